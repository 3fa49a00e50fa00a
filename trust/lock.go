package trust

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// LockVersion is the version of the lock file format this package reads and writes.
const LockVersion = 1

// Lock is the content of a lock file (proxy.lock): what was approved, per upstream.
// Definitions are kept whole, not only hashed, so that a change can be reported field by
// field.
type Lock struct {
	Version   int                      `json:"lock_version"`
	Upstreams map[string]*LockUpstream `json:"upstreams"`
}

// LockUpstream is what was approved of one upstream.
type LockUpstream struct {
	Server    Server           `json:"server"`
	Tools     map[string]Entry `json:"tools,omitempty"`
	Prompts   map[string]Entry `json:"prompts,omitempty"`
	Templates map[string]Entry `json:"templates,omitempty"`
}

// Server is an upstream's serverInfo name and version when it was approved.
type Server struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// Entry is one approved definition: the SHA-256 of its canonical form, and the form.
type Entry struct {
	SHA256     string          `json:"sha256"`
	Definition json.RawMessage `json:"definition"`
}

// entries returns the map of kind k, creating it when create is set.
func (u *LockUpstream) entries(k Kind, create bool) map[string]Entry {
	p := &u.Tools
	switch k {
	case KindPrompt:
		p = &u.Prompts
	case KindTemplate:
		p = &u.Templates
	}
	if *p == nil && create {
		*p = map[string]Entry{}
	}
	return *p
}

// Entries returns the approved definitions of kind k, by the upstream's own name.
func (u *LockUpstream) Entries(k Kind) map[string]Entry { return u.entries(k, false) }

// ReadLock reads and checks a lock file. A missing file is reported as an error
// satisfying errors.Is(err, fs.ErrNotExist).
func ReadLock(path string) (*Lock, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseLock(b, path)
}

// ParseLock parses and checks a lock file's content; name is used in errors. Every
// entry's hash must be that of its definition's canonical form (an edited definition
// whose hash was not recomputed is refused, not trusted).
func ParseLock(b []byte, name string) (*Lock, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var l Lock
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if l.Version != LockVersion {
		return nil, fmt.Errorf("%s: lock_version %d is not supported (this proxy reads version %d)", name, l.Version, LockVersion)
	}
	if l.Upstreams == nil {
		l.Upstreams = map[string]*LockUpstream{}
	}
	for _, up := range sortedKeys(l.Upstreams) {
		u := l.Upstreams[up]
		if u == nil {
			return nil, fmt.Errorf("%s: upstream %q: null", name, up)
		}
		for _, k := range Kinds {
			es := u.entries(k, false)
			for _, n := range sortedKeys(es) {
				e := es[n]
				canon, err := canonical(k, e.Definition)
				if err != nil {
					return nil, fmt.Errorf("%s: upstream %q %s %q: definition: %w", name, up, k, n, err)
				}
				if got := hashOf(canon); got != e.SHA256 {
					return nil, fmt.Errorf("%s: upstream %q %s %q: sha256 %s does not match its definition (%s); was the definition edited by hand? Re-approve with mcp-proxy lock --update", name, up, k, n, e.SHA256, got)
				}
				e.Definition = canon
				es[n] = e
			}
		}
	}
	return &l, nil
}

// Encode returns the lock file's content: indented JSON with sorted keys, so that a
// change reads well in a code review.
func (l *Lock) Encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(l); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLock writes l to path atomically (a temporary file in the same directory, then a
// rename), readable by all: it holds definitions, not secrets.
func WriteLock(path string, l *Lock) error {
	b, err := l.Encode()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// IsNotExist reports whether err says the lock file does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// NewLock returns an empty lock.
func NewLock() *Lock { return &Lock{Version: LockVersion, Upstreams: map[string]*LockUpstream{}} }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
