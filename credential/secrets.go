package credential

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

// SecretSource holds every principal's named secrets (mode "secret").
type SecretSource interface {
	// Secrets returns principal's secrets; nil and no error when it has none.
	Secrets(ctx context.Context, principal string) (map[string]string, error)
}

// FileSource reads the principals' secrets from a JSON file of the form
//
//	{"api_key:alice": {"github_token": "ghp_…"}, "jwt:bob": {"github_token": "ghp_…"}}
//
// whose keys are principals' identities (principal.ID), as its Key function reads them
// (the proxy's: "jwt:bob" is bob's token from the jwt block's issuer; a bare name, which
// could be an API key's or a token's, is refused).
// It refuses a file that its group or others may read or write (mode 0600 or
// stricter), as ssh does with a private key, and reads it again when it changes (looked
// at no more than once a second). A value may not hold a NUL byte, nor a line break
// (it could end a header).
type FileSource struct {
	path string
	key  func(string) (string, error) // a key of the file → the identity it names

	mu      sync.Mutex // guards the fields below
	secrets map[string]map[string]string
	mtime   time.Time
	size    int64
	looked  time.Time
	err     error
}

// NewFileSource reads path; an error when it cannot be used. key turns each principal
// of the file into the identity it names, or says why it is not one; nil takes the keys
// as they are.
func NewFileSource(path string, key func(string) (string, error)) (*FileSource, error) {
	f := &FileSource{path: path, key: key}
	if err := f.reload(time.Now()); err != nil {
		return nil, err
	}
	return f, nil
}

// maxSecretsFile bounds the secrets file.
const maxSecretsFile = 16 << 20

// Secrets implements SecretSource.
func (f *FileSource) Secrets(_ context.Context, principal string) (map[string]string, error) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.looked) >= time.Second {
		f.looked = now
		if st, err := os.Stat(f.path); err != nil || !st.ModTime().Equal(f.mtime) || st.Size() != f.size {
			f.err = f.reloadLocked()
		}
	}
	if f.err != nil {
		return nil, f.err
	}
	return f.secrets[principal], nil
}

func (f *FileSource) reload(now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.looked = now
	f.err = f.reloadLocked()
	return f.err
}

// reloadLocked reads the file; f.mu is held. On an error the secrets read before stay
// unused: a call is refused rather than served with what may be stale.
func (f *FileSource) reloadLocked() error {
	fh, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("reading the secrets file: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("reading the secrets file: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("the secrets file %s may be read or written by others than its owner (mode %04o): refusing it; chmod 600 it", f.path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxSecretsFile+1))
	if err != nil {
		return fmt.Errorf("reading the secrets file: %w", err)
	}
	if len(b) > maxSecretsFile {
		return fmt.Errorf("the secrets file %s is larger than %d bytes", f.path, maxSecretsFile)
	}
	var m map[string]map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		// The decoder's message may quote the file: never a secret in an error.
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("the secrets file %s is not valid JSON (at byte %d)", f.path, se.Offset)
		}
		return fmt.Errorf("the secrets file %s is not a JSON object of principals, each an object of names and string values", f.path)
	}
	byID := make(map[string]map[string]string, len(m))
	for p, s := range m {
		for name, v := range s {
			if strings.ContainsAny(v, "\x00\r\n") {
				return fmt.Errorf("the secrets file %s: secret %q of principal %q holds a NUL byte or a line break", f.path, name, p)
			}
		}
		id := p
		if f.key != nil {
			if id, err = f.key(p); err != nil {
				return fmt.Errorf("the secrets file %s: %w", f.path, err)
			}
		}
		if _, dup := byID[id]; dup {
			return fmt.Errorf("the secrets file %s names principal %q twice", f.path, id)
		}
		byID[id] = s
	}
	f.secrets, f.mtime, f.size = byID, st.ModTime(), st.Size()
	return nil
}

// admitSecrets looks up the principal's secrets and checks it has every one the
// upstream refers to; they are kept for the session that starts with them.
func (h *handle) admitSecrets(ctx context.Context) error {
	p := h.p
	if m := h.secrets.Load(); m != nil && p.deps.Now().UnixNano()-h.checked.Load() < int64(time.Second) {
		return nil
	}
	var secrets map[string]string
	var err error
	if p.cfg.Source != nil {
		secrets, err = p.cfg.Source.Secrets(ctx, h.name)
	} else {
		p.event(EventCacheMiss)
		var g *Grant
		if g, err = p.deps.Store.Get(ctx, p.cfg.Upstream, h.name); err == nil && g != nil {
			secrets = make(map[string]string, len(g.Secrets))
			for k, v := range g.Secrets {
				secrets[k] = v.Reveal()
			}
		}
	}
	if err != nil {
		h.secrets.Store(nil)
		return failed(p.cfg.Upstream, err)
	}
	for _, name := range p.cfg.Secrets {
		if _, ok := secrets[name]; !ok {
			h.secrets.Store(nil)
			return unavailable(p.cfg.Upstream, "principal %q has no secret %q (the upstream's env or headers need it)", h.name, name)
		}
	}
	h.secrets.Store(&secrets)
	h.checked.Store(p.deps.Now().UnixNano())
	return nil
}

// HasSource reports whether the principals' secrets come from a SecretSource (a file)
// rather than the store.
func (p *Provider) HasSource() bool { return p.cfg.Source != nil }

// SetSecret stores principal's secret name in the store (mode "secret" without a
// source), and drops what this process caches of the principal's secrets: the next call
// reads them again.
func (p *Provider) SetSecret(ctx context.Context, principalName, name, value string) error {
	g, err := p.deps.Store.Get(ctx, p.cfg.Upstream, principalName)
	if err != nil {
		return err
	}
	now := p.deps.Now()
	if g == nil {
		g = &Grant{Upstream: p.cfg.Upstream, Principal: principalName, Mode: ModeSecret, Created: now}
	}
	if g.Secrets == nil {
		g.Secrets = map[string]principal.Secret{}
	}
	g.Secrets[name] = principal.NewSecret(value)
	g.Updated = now
	if err := p.deps.Store.Put(ctx, g); err != nil {
		return err
	}
	p.Forget(principalName)
	return nil
}

// SecretsOf looks up who's secrets (mode "secret") and checks it has every one the
// upstream refers to: what a session of its is started with, at each start. The error
// is a *Refusal naming the upstream and the missing secret.
func (p *Provider) SecretsOf(ctx context.Context, who string) (lookup func(name string) (string, bool), err error) {
	if err := p.handle(who).admitSecrets(ctx); err != nil {
		return nil, err
	}
	lookup, ok := p.Secrets(who)
	if !ok {
		return nil, unavailable(p.cfg.Upstream, "principal %q has no secrets", who)
	}
	return lookup, nil
}
