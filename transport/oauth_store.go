package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
)

// storedToken is the token file's content: what a restart needs to go on without a
// person approving again (the refresh token, the client registration, the endpoints).
type storedToken struct {
	Resource     string      `json:"resource"`
	Issuer       string      `json:"issuer"`
	AccessToken  string      `json:"access_token"`
	RefreshToken string      `json:"refresh_token,omitempty"`
	Expiry       time.Time   `json:"expiry,omitzero"`
	Scopes       []string    `json:"scopes,omitempty"`
	Target       string      `json:"target"`
	Client       storedID    `json:"client"`
	Server       *asMetadata `json:"authorization_server"`
}

type storedID struct {
	ID          string `json:"client_id"`
	Secret      string `json:"client_secret,omitempty"`
	AuthMethod  string `json:"token_endpoint_auth_method"`
	RedirectURI string `json:"redirect_uri,omitempty"`
}

// setToken makes t the current token and, with a token file, writes it there.
func (o *OAuth) setToken(t *oauthToken) {
	o.tok.Store(t)
	if o.cfg.TokenFile == "" || t == nil {
		return
	}
	if err := o.saveToken(t); err != nil {
		o.log.Warn().Err(err).Str("token_file", o.cfg.TokenFile).Msg("keeping the upstream's tokens on disk failed; they stay in memory")
	}
}

// saveToken writes t to the token file, readable by its owner only, atomically.
func (o *OAuth) saveToken(t *oauthToken) error {
	st := storedToken{Resource: canonicalResource(o.resource), Issuer: t.issuer, RefreshToken: t.refresh,
		Expiry: t.expiry, Scopes: t.scopes, Target: t.target, Server: t.as}
	if h := t.b.Header; len(h) == 1 && len(h[0]) > len("Bearer ") {
		st.AccessToken = h[0][len("Bearer "):]
	}
	if c := t.client; c != nil {
		st.Client = storedID{ID: c.id, Secret: c.secret, AuthMethod: c.authMethod, RedirectURI: c.redirectURI}
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(o.cfg.TokenFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".mcp-proxy-token-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), o.cfg.TokenFile)
}

// loadToken reads the token file, if there is one for this upstream, and makes its token
// current (an expired one is refreshed before its first use). A missing file is normal;
// an unreadable one, or one for another upstream, is reported and ignored.
func (o *OAuth) loadToken() {
	b, err := os.ReadFile(o.cfg.TokenFile)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		if fi, serr := os.Stat(o.cfg.TokenFile); serr == nil && fi.Mode().Perm()&0o077 != 0 {
			o.log.Warn().Str("token_file", o.cfg.TokenFile).Str("mode", fi.Mode().Perm().String()).
				Msg("the token file can be read by others; it holds credentials (chmod 600 it)")
		}
	}
	var st storedToken
	switch {
	case err != nil:
	case json.Unmarshal(b, &st) != nil:
		err = errors.New("not a token file")
	case st.Resource != canonicalResource(o.resource):
		err = fmt.Errorf("it holds tokens for %s, not this upstream", st.Resource)
	case st.AccessToken == "" || st.Server == nil || st.Client.ID == "":
		err = errors.New("it is incomplete")
	}
	if err != nil {
		o.log.Warn().Err(err).Str("token_file", o.cfg.TokenFile).Msg("ignoring the token file; authorizing anew when the upstream asks")
		return
	}
	c := &oauthClientID{id: st.Client.ID, secret: st.Client.Secret, authMethod: st.Client.AuthMethod, redirectURI: st.Client.RedirectURI}
	t := newOAuthToken(st.AccessToken)
	t.refresh, t.expiry, t.issuer, t.scopes, t.client, t.as, t.target = st.RefreshToken, st.Expiry, st.Issuer, st.Scopes, c, st.Server, st.Target
	o.tok.Store(t)
	o.mu.Lock()
	o.clients[st.Issuer] = c
	o.asked = union(o.asked, st.Scopes)
	o.mu.Unlock()
	o.log.Info().Str("token_file", o.cfg.TokenFile).Str("issuer", st.Issuer).Msg("using the stored authorization")
}

// openURL opens u in the desktop's browser; a variable so that tests can watch it. The
// browser never inherits the proxy's stdout (in stdio mode that carries the protocol).
var openURL = func(u string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return errors.New("no graphical session (DISPLAY and WAYLAND_DISPLAY are unset)")
		}
		cmd = exec.Command("xdg-open", u)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() // reap it
	return nil
}
