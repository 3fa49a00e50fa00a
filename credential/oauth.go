package credential

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// OAuthConfig configures mode "oauth": each principal authorizes the proxy at the
// upstream's own authorization server (the authorization code grant with PKCE) once, in
// a browser; the grant is refreshed as it expires.
type OAuthConfig struct {
	URL string // the upstream's URL: where discovery starts (RFC 9728)
	// Client is a pre-registered client (ID "" registers dynamically, RFC 7591, or uses
	// ClientMetadataURL where supported).
	Client            Client
	ClientMetadataURL string
	ClientName        string
	Scopes            []string // asked for; nil: what the server supports of "offline_access" only
	Resource          string   // the resource asked for (RFC 8707); "": the metadata's
	TokenEndpoint     string   // "": the authorization server's
	// RedirectURL is the proxy's callback, which the browser is sent back to: its path
	// is CallbackPath; its origin also serves the links (ConnectPath).
	RedirectURL string
}

// The paths of the HTTP listener that the per-user authorizations use.
const (
	CallbackPath = "/oauth/callback"
	ConnectPath  = "/oauth/connect/"
)

// userOAuth obtains principals' tokens by the authorization code grant.
type userOAuth struct {
	upstream string
	cfg      *OAuthConfig
	flows    *Flows
	disc     *transport.OAuth // discovery and registration only: never its own flow
	http     *http.Client
	log      zerolog.Logger
	p        *Provider // set by NewProvider

	mu     sync.Mutex // guards as and client
	as     *transport.AuthServer
	client *Client
}

func newUserOAuth(upstream string, cfg *OAuthConfig, flows *Flows, log zerolog.Logger) (*userOAuth, error) {
	if cfg.RedirectURL == "" {
		return nil, errors.New("credential: mode oauth needs the proxy's callback URL")
	}
	disc, err := transport.NewOAuth(cfg.URL, transport.OAuthConfig{ClientID: cfg.Client.ID, ClientSecret: cfg.Client.Secret,
		ClientMetadataURL: cfg.ClientMetadataURL, Scopes: cfg.Scopes, ClientName: cfg.ClientName, ApplicationType: "web"}, log)
	if err != nil {
		return nil, err
	}
	o := &userOAuth{upstream: upstream, cfg: cfg, flows: flows, disc: disc, http: &http.Client{Timeout: 30 * time.Second}, log: log}
	flows.add(o)
	return o, nil
}

// server returns the upstream's authorization server and the proxy's client there,
// found (and registered) once.
func (o *userOAuth) server(ctx context.Context) (*transport.AuthServer, *Client, error) {
	o.mu.Lock()
	as, c := o.as, o.client
	o.mu.Unlock()
	if as != nil {
		return as, c, nil
	}
	as, err := o.disc.DiscoverAuthServer(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("finding the authorization server: %w", err)
	}
	if !as.PKCE {
		return nil, nil, fmt.Errorf("the authorization server %s does not advertise PKCE with S256: refusing to authorize", as.Issuer)
	}
	if o.cfg.TokenEndpoint != "" {
		as.TokenEndpoint = o.cfg.TokenEndpoint
	}
	if o.cfg.Resource != "" {
		as.Resource = o.cfg.Resource
	}
	client := o.cfg.Client
	if client.Method != AuthJWT { // a private_key_jwt client is configured whole
		rc, err := o.disc.RegisterClient(ctx, as, o.cfg.RedirectURL)
		if err != nil {
			return nil, nil, fmt.Errorf("registering with %s: %w", as.Issuer, err)
		}
		client = Client{ID: rc.ID, Secret: rc.Secret, Method: rc.AuthMethod}
	}
	o.mu.Lock()
	o.as, o.client = as, &client
	o.mu.Unlock()
	return as, &client, nil
}

// obtain implements strategy: the principal's grant from the store, refreshed when it
// has expired; without one, a call is answered with a link to authorize (a new flow),
// and a request of the principal's session that is not a call fails.
func (o *userOAuth) obtain(ctx context.Context, h *handle, call *Call) (*token, error) {
	p := h.p
	g, t, err := h.stored(ctx, o.upstream, ModeOAuth)
	if err != nil || t != nil {
		return t, err
	}
	if g != nil && !g.RefreshToken.IsZero() {
		t, err := o.refresh(ctx, h, g)
		if err == nil {
			return t, nil
		}
		o.log.Info().Err(err).Str("principal", h.name).Msg("refreshing the principal's grant failed; it must authorize again")
	}
	h.tok.Store(nil)
	if call == nil {
		return nil, unavailable(o.upstream, "principal %q has not authorized the upstream (or its grant ended); its next call gets the link to authorize", h.name)
	}
	link, id, err := o.flows.begin(ctx, o, h.name)
	if err != nil {
		return nil, err
	}
	p.event(EventPending)
	ref := authorizationRequired(o.upstream, link, id, *call)
	if ref.Err != nil && ref.Err.Code == mcp.CodeURLElicitationRequired && call.Client != nil {
		o.flows.wait(id, call.Client) // told when the link's authorization completes
	}
	return nil, ref
}

// renew implements strategy: the upstream refused the token: refresh the grant.
func (o *userOAuth) renew(ctx context.Context, h *handle, sent *token) (*token, error) {
	if sent == nil || sent.grant == nil || sent.grant.RefreshToken.IsZero() {
		return nil, unavailable(o.upstream, "the upstream refused principal %q's grant, which cannot be refreshed; its next call gets the link to authorize again", h.name)
	}
	t, err := o.refresh(ctx, h, sent.grant)
	if err != nil {
		h.tok.Store(nil) // the next call reads the store: no grant, a new link
		return nil, unavailable(o.upstream, "refreshing principal %q's grant failed (%v); its next call gets the link to authorize again", h.name, err)
	}
	return t, nil
}

// leaseTTL bounds how long a replica may hold the right to refresh a grant.
const leaseTTL = 30 * time.Second

// refresh renews g with its refresh token, once across the replicas: the one holding
// the store's lease refreshes, the others wait for the grant it stores. A refresh token
// the server refuses ends the grant (it is deleted).
func (o *userOAuth) refresh(ctx context.Context, h *handle, g *Grant) (*token, error) {
	p := h.p
	store := p.deps.Store
	for tries := 0; ; tries++ {
		release, ok, err := store.Lease(ctx, o.upstream, h.name, leaseTTL)
		if err != nil {
			return nil, fmt.Errorf("taking the refresh lease: %w", err)
		}
		if ok {
			defer release()
			break
		}
		// Another replica refreshes: wait for what it stores.
		if tries > 100 {
			return nil, errors.New("another replica holds the refresh lease and has stored nothing new")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if cur, err := store.Get(ctx, o.upstream, h.name); err == nil && cur != nil && cur.AccessToken != g.AccessToken {
			if t := tokenOf(cur); t.usable(p.deps.Now()) {
				return t, nil
			}
		}
	}
	// Refreshed by another replica just before the lease was ours?
	if cur, err := store.Get(ctx, o.upstream, h.name); err == nil && cur != nil && cur.AccessToken != g.AccessToken {
		if t := tokenOf(cur); t.usable(p.deps.Now()) {
			return t, nil
		}
		g = cur
	}
	as, client, err := o.server(ctx)
	if err != nil {
		return nil, err
	}
	client = o.clientOf(client, g.ClientID, g.ClientSecret, g.ClientAuth)
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {g.RefreshToken.Reveal()}, "resource": {as.Resource}}
	now := p.deps.Now()
	r, err := tokenRequest(ctx, o.http, as.TokenEndpoint, client, form)
	if err != nil {
		if oauthErrorCode(err) == "invalid_grant" {
			if derr := store.Delete(ctx, o.upstream, h.name); derr != nil {
				o.log.Warn().Err(derr).Str("principal", h.name).Msg("deleting the ended grant")
			}
		}
		return nil, err
	}
	n := *g
	n.AccessToken, n.Expiry, n.Updated = principal.NewSecret(r.AccessToken), r.Expiry(now), now
	if r.RefreshToken != "" {
		n.RefreshToken = principal.NewSecret(r.RefreshToken)
	}
	if r.Scope != "" {
		n.Scopes = strings.Fields(r.Scope)
	}
	if s := jwtSubject(r.AccessToken); s != "" {
		n.Subject = s
	}
	if err := store.Put(ctx, &n); err != nil {
		return nil, fmt.Errorf("storing the refreshed grant: %w", err)
	}
	p.event(EventRefresh)
	return tokenOf(&n), nil
}

// clientOf is the client a flow or grant was made with (id, secret, auth), or this
// process's own when it records none. A private_key_jwt client is the configured one
// (its key is on every replica).
func (o *userOAuth) clientOf(own *Client, id string, secret principal.Secret, auth string) *Client {
	if id == "" || id == own.ID || own.Method == AuthJWT {
		return own
	}
	return &Client{ID: id, Secret: secret.Reveal(), Method: auth}
}

// authorizationURL is where the principal's browser goes to authorize flow f.
func (o *userOAuth) authorizationURL(ctx context.Context, f *Flow) (string, error) {
	as, client, err := o.server(ctx)
	if err != nil {
		return "", err
	}
	client = o.clientOf(client, f.ClientID, f.ClientSecret, f.ClientAuth)
	sum := sha256.Sum256([]byte(f.Verifier.Reveal()))
	u, err := url.Parse(as.AuthorizationEndpoint)
	if err != nil {
		return "", fmt.Errorf("invalid authorization endpoint %q", as.AuthorizationEndpoint)
	}
	q := u.Query()
	q.Set("response_type", "code")
	q.Set("client_id", client.ID)
	q.Set("redirect_uri", o.cfg.RedirectURL)
	q.Set("state", f.ID+"."+f.State.Reveal())
	q.Set("code_challenge", base64.RawURLEncoding.EncodeToString(sum[:]))
	q.Set("code_challenge_method", "S256")
	q.Set("resource", as.Resource)
	if scopes := o.scopes(as); len(scopes) > 0 {
		q.Set("scope", strings.Join(scopes, " "))
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// scopes are what the authorization asks for: the configured ones, with offline_access
// where the server offers it (a refresh token, SEP-2207).
func (o *userOAuth) scopes(as *transport.AuthServer) []string {
	s := append([]string(nil), o.cfg.Scopes...)
	for _, sup := range as.ScopesSupported {
		if sup == "offline_access" {
			for _, have := range s {
				if have == sup {
					return s
				}
			}
			return append(s, sup)
		}
	}
	return s
}

// redeem exchanges the authorization code of flow f for the principal's grant, and
// stores it.
func (o *userOAuth) redeem(ctx context.Context, f *Flow, code string, iss []string) (*Grant, error) {
	as, client, err := o.server(ctx)
	if err != nil {
		return nil, err
	}
	// RFC 9207: a present iss must be the issuer exactly; an advertised one must be there.
	if len(iss) > 0 && (len(iss) != 1 || iss[0] != as.Issuer) {
		return nil, fmt.Errorf("the authorization response comes from issuer %q, not %q", iss[0], as.Issuer)
	} else if len(iss) == 0 && as.IssParameterSupported {
		return nil, fmt.Errorf("the authorization response has no iss although %s advertises it", as.Issuer)
	}
	client = o.clientOf(client, f.ClientID, f.ClientSecret, f.ClientAuth)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {o.cfg.RedirectURL},
		"code_verifier": {f.Verifier.Reveal()}, "resource": {as.Resource}}
	now := o.p.deps.Now()
	r, err := tokenRequest(ctx, o.http, as.TokenEndpoint, client, form)
	if err != nil {
		return nil, err
	}
	if err := r.Bearer(); err != nil {
		return nil, err
	}
	g := &Grant{Upstream: o.upstream, Principal: f.Principal, Mode: ModeOAuth, AccessToken: principal.NewSecret(r.AccessToken),
		RefreshToken: principal.NewSecret(r.RefreshToken), Expiry: r.Expiry(now), Scopes: strings.Fields(r.Scope),
		Issuer: as.Issuer, Subject: jwtSubject(r.AccessToken), Created: now, Updated: now,
		ClientID: client.ID, ClientSecret: principal.NewSecret(client.Secret), ClientAuth: client.Method}
	if err := o.p.deps.Store.Put(ctx, g); err != nil {
		return nil, fmt.Errorf("storing the grant: %w", err)
	}
	h := o.p.handle(f.Principal)
	h.tok.Store(tokenOf(g))
	h.checked.Store(now.UnixNano())
	o.p.event(EventAuthorized)
	return g, nil
}

// revoke asks the authorization server to revoke g's refresh token (RFC 7009), when
// it offers revocation; best effort.
func (o *userOAuth) revoke(ctx context.Context, g *Grant) error {
	as, client, err := o.server(ctx)
	if err != nil || as.RevocationEndpoint == "" {
		return err
	}
	client = o.clientOf(client, g.ClientID, g.ClientSecret, g.ClientAuth)
	tok := g.RefreshToken
	hint := "refresh_token"
	if tok.IsZero() {
		tok, hint = g.AccessToken, "access_token"
	}
	form := url.Values{"token": {tok.Reveal()}, "token_type_hint": {hint}}
	_, err = transport.PostTokenForm(ctx, o.http, as.RevocationEndpoint, client.tokenClient(), form) // RFC 7009: 200, no body
	return err
}
