package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// oauthClientID is the proxy's identity at one authorization server.
type oauthClientID struct {
	id, secret  string
	authMethod  string // client_secret_basic | client_secret_post | none
	redirectURI string // what was registered ("" for a pre-registered client: any loopback port)
}

// clientFor returns the proxy's client identity at as: pre-registered (config), a
// Client ID Metadata Document URL where supported, else a dynamic registration, which
// is kept per authorization server and never shown to another one.
func (o *OAuth) clientFor(ctx context.Context, as *asMetadata, redirectURI string) (*oauthClientID, error) {
	o.mu.Lock()
	c := o.clients[as.Issuer]
	o.mu.Unlock()
	if c != nil && (c.redirectURI == "" || c.redirectURI == redirectURI || redirectURI == "") {
		return c, nil
	}
	switch {
	case o.cfg.ClientID != "" && (o.cfg.Issuer == "" || o.cfg.Issuer == as.Issuer):
		c = &oauthClientID{id: o.cfg.ClientID, secret: o.cfg.ClientSecret,
			authMethod: pickAuthMethod(as.TokenEndpointAuthMethodsSupported, o.cfg.ClientSecret != "")}
	case o.cfg.ClientMetadataURL != "" && as.CIMDSupported:
		c = &oauthClientID{id: o.cfg.ClientMetadataURL, authMethod: AuthNone}
	case as.RegistrationEndpoint != "":
		var err error
		if c, err = o.register(ctx, as, redirectURI); err != nil {
			return nil, err
		}
	case o.cfg.ClientID != "":
		return nil, fmt.Errorf("the configured client_id is for %s, and %s offers no dynamic client registration", o.cfg.Issuer, as.Issuer)
	default:
		return nil, fmt.Errorf("the authorization server %s offers no dynamic client registration: configure a client_id in the upstream's oauth block", as.Issuer)
	}
	o.mu.Lock()
	o.clients[as.Issuer] = c
	o.mu.Unlock()
	return c, nil
}

// pickAuthMethod chooses how to authenticate at the token endpoint from what the server
// supports (RFC 8414: absent means client_secret_basic).
func pickAuthMethod(supported []string, haveSecret bool) string {
	if !haveSecret {
		return AuthNone
	}
	if len(supported) == 0 {
		return AuthBasic
	}
	for _, m := range []string{AuthBasic, AuthPost} {
		if slices.Contains(supported, m) {
			return m
		}
	}
	return AuthNone
}

// register performs Dynamic Client Registration (RFC 7591).
func (o *OAuth) register(ctx context.Context, as *asMetadata, redirectURI string) (*oauthClientID, error) {
	method := AuthNone
	if len(as.TokenEndpointAuthMethodsSupported) > 0 && !slices.Contains(as.TokenEndpointAuthMethodsSupported, AuthNone) {
		method = pickAuthMethod(as.TokenEndpointAuthMethodsSupported, true)
	}
	grants := []string{GrantAuthorizationCode, "refresh_token"}
	if o.cfg.Grant == GrantClientCredentials {
		grants = []string{GrantClientCredentials}
	}
	meta := map[string]any{
		"client_name":                o.cfg.ClientName,
		"grant_types":                grants,
		"token_endpoint_auth_method": method,
		"application_type":           o.cfg.ApplicationType,
	}
	if redirectURI != "" {
		meta["redirect_uris"] = []string{redirectURI}
		meta["response_types"] = []string{"code"}
	}
	body, _ := json.Marshal(meta)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, as.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := o.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("registering with %s: %w", as.Issuer, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxMetadata))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("registering with %s: HTTP %d%s", as.Issuer, resp.StatusCode, oauthErrorText(b))
	}
	var r struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		AuthMethod   string `json:"token_endpoint_auth_method"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.ClientID == "" {
		return nil, fmt.Errorf("registering with %s: the answer has no client_id", as.Issuer)
	}
	c := &oauthClientID{id: r.ClientID, secret: r.ClientSecret, authMethod: r.AuthMethod, redirectURI: redirectURI}
	if c.authMethod == "" {
		c.authMethod = pickAuthMethod(as.TokenEndpointAuthMethodsSupported, c.secret != "")
	}
	o.log.Info().Str("issuer", as.Issuer).Str("client_id", c.id).Msg("registered with the authorization server")
	return c, nil
}

// authorizationCode runs the authorization code grant with PKCE (S256), state, and the
// resource parameter. The authorization URL is requested without following redirects:
// a server that approves at once (no login page) redirects straight to the redirect
// URI with the code. Otherwise a person must open the URL: it is logged, and the
// browser's redirect is awaited on the loopback callback listener.
func (o *OAuth) authorizationCode(ctx context.Context, as *asMetadata, target string, scopes []string) (*oauthToken, error) {
	if !slices.Contains(as.CodeChallengeMethodsSupported, "S256") {
		return nil, fmt.Errorf("the authorization server %s does not advertise PKCE with S256 (code_challenge_methods_supported): refusing to authorize", as.Issuer)
	}
	if as.AuthorizationEndpoint == "" || as.TokenEndpoint == "" {
		return nil, fmt.Errorf("the authorization server %s has no authorization or token endpoint", as.Issuer)
	}
	cb, err := o.listenCallback()
	if err != nil {
		return nil, err
	}
	defer cb.close()
	client, err := o.clientFor(ctx, as, cb.uri)
	if err != nil {
		return nil, err
	}
	verifier, state := randomToken(32), randomToken(16)
	cb.state.Store(&state)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {client.id},
		"redirect_uri":          {cb.uri},
		"state":                 {state},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
		"resource":              {target},
	}
	if len(scopes) > 0 {
		q.Set("scope", strings.Join(scopes, " "))
	}
	authURL, err := url.Parse(as.AuthorizationEndpoint)
	if err != nil {
		return nil, fmt.Errorf("invalid authorization endpoint %q", as.AuthorizationEndpoint)
	}
	aq := authURL.Query()
	for k, v := range q {
		aq[k] = v
	}
	authURL.RawQuery = aq.Encode()

	result, err := o.fetchCode(ctx, authURL.String(), cb)
	if err != nil {
		return nil, err
	}
	// RFC 9207: a present iss must be the issuer exactly (no normalization); an advertised
	// one must be present. Checked before anything else in the response is acted on,
	// error responses included.
	if iss, ok := result["iss"]; ok && (len(iss) != 1 || iss[0] != as.Issuer) {
		return nil, fmt.Errorf("the authorization response comes from issuer %q, not %q: refusing it", result.Get("iss"), as.Issuer)
	} else if !ok && as.IssParameterSupported {
		return nil, fmt.Errorf("the authorization response has no iss although %s advertises it: refusing it", as.Issuer)
	}
	if result.Get("state") != state {
		return nil, errors.New("the authorization response's state does not match the request's: refusing it")
	}
	if e := result.Get("error"); e != "" {
		return nil, fmt.Errorf("the authorization server refused: %s %s", e, result.Get("error_description"))
	}
	code := result.Get("code")
	if code == "" {
		return nil, errors.New("the authorization response has no code")
	}
	form := url.Values{
		"grant_type":    {GrantAuthorizationCode},
		"code":          {code},
		"redirect_uri":  {cb.uri},
		"code_verifier": {verifier},
		"resource":      {target},
	}
	return o.tokenRequest(ctx, as, client, form, target, scopes)
}

// fetchCode obtains the authorization response's query parameters.
func (o *OAuth) fetchCode(ctx context.Context, authURL string, cb *callback) (url.Values, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := o.noFollow.Do(req)
	if err == nil {
		resp.Body.Close()
		if loc, err := resp.Location(); err == nil && strings.HasPrefix(loc.String(), cb.uri) {
			return loc.Query(), nil
		}
	}
	o.log.Warn().Str("url", authURL).Dur("timeout", o.cfg.AuthorizationTimeout).
		Msg("the upstream needs authorization: open this URL in a browser and approve")
	if o.cfg.OpenBrowser {
		if err := openURL(authURL); err != nil {
			o.log.Info().Err(err).Msg("could not open a browser; open the URL by hand")
		}
	}
	t := time.NewTimer(o.cfg.AuthorizationTimeout)
	defer t.Stop()
	select {
	case v := <-cb.got:
		return v, nil
	case <-t.C:
		return nil, fmt.Errorf("nobody approved the authorization within %s", o.cfg.AuthorizationTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// clientCredentials runs the client credentials grant (machine to machine).
func (o *OAuth) clientCredentials(ctx context.Context, as *asMetadata, target string, scopes []string) (*oauthToken, error) {
	if as.TokenEndpoint == "" {
		return nil, fmt.Errorf("the authorization server %s has no token endpoint", as.Issuer)
	}
	client, err := o.clientFor(ctx, as, "")
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {GrantClientCredentials}, "resource": {target}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	return o.tokenRequest(ctx, as, client, form, target, scopes)
}

// refresh exchanges t's refresh token for a new token.
func (o *OAuth) refresh(ctx context.Context, t *oauthToken) error {
	if t == nil || t.refresh == "" {
		return errors.New("no refresh token")
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {t.refresh}, "resource": {t.target}}
	n, err := o.tokenRequest(ctx, t.as, t.client, form, t.target, t.scopes)
	if err != nil {
		return err
	}
	if n.refresh == "" {
		n.refresh = t.refresh // the server keeps the old one valid (RFC 6749 §6)
	}
	o.setToken(n)
	o.log.Debug().Msg("refreshed the access token")
	return nil
}

// tokenRequest posts form to the token endpoint with the client's authentication
// (RequestToken) and makes the answer the upstream's token.
func (o *OAuth) tokenRequest(ctx context.Context, as *asMetadata, c *oauthClientID, form url.Values, target string, scopes []string) (*oauthToken, error) {
	now := time.Now()
	r, err := RequestToken(ctx, o.http, as.TokenEndpoint, &TokenClient{ID: c.id, Secret: c.secret, Method: c.authMethod}, form)
	if err != nil {
		return nil, err
	}
	if err := r.Bearer(); err != nil {
		return nil, fmt.Errorf("token request to %s: %w", as.TokenEndpoint, err)
	}
	t := newOAuthToken(r.AccessToken)
	t.refresh, t.issuer, t.scopes, t.client, t.as, t.target = r.RefreshToken, as.Issuer, scopes, c, as, target
	t.expiry = r.Expiry(now)
	return t, nil
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// callback is the loopback listener the browser is redirected to.
type callback struct {
	uri   string
	state atomic.Pointer[string] // the request's state; a callback with another is refused
	got   chan url.Values
	srv   *http.Server
}

// listenCallback listens on 127.0.0.1 at the configured port, else the port registered
// before, else a free one.
func (o *OAuth) listenCallback() (*callback, error) {
	o.mu.Lock()
	port := o.cfg.RedirectPort
	if port == 0 {
		port = o.lastPort
	}
	o.mu.Unlock()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil && port != 0 && o.cfg.RedirectPort == 0 {
		ln, err = net.Listen("tcp", "127.0.0.1:0") // the old port is taken: register anew
	}
	if err != nil {
		return nil, fmt.Errorf("listening for the authorization callback: %w", err)
	}
	port = ln.Addr().(*net.TCPAddr).Port
	o.mu.Lock()
	o.lastPort = port
	o.mu.Unlock()
	cb := &callback{uri: fmt.Sprintf("http://127.0.0.1:%d/callback", port), got: make(chan url.Values, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		if want := cb.state.Load(); want == nil || r.URL.Query().Get("state") != *want {
			// Not the answer to our request (a stale tab, a forgery): keep waiting.
			http.Error(w, "mcp-proxy: this authorization response does not match the pending request", http.StatusBadRequest)
			return
		}
		select {
		case cb.got <- r.URL.Query():
			fmt.Fprintln(w, "mcp-proxy: authorization received; you can close this window.")
		default:
			http.Error(w, "mcp-proxy: an authorization response was already received", http.StatusConflict)
		}
	})
	cb.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = cb.srv.Serve(ln) }() // ends when close shuts the server down
	return cb, nil
}

func (c *callback) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.srv.Shutdown(ctx)
}
