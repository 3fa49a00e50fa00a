package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Grants an OAuthConfig can ask for.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// OAuthConfig is how the proxy authorizes itself with one HTTP upstream (the MCP
// authorization specification, OAuth 2.1). The zero value discovers everything from
// the upstream's 401 and registers the proxy dynamically.
type OAuthConfig struct {
	Disabled bool // never run the flow; a 401 is an error

	// ClientID and ClientSecret are a pre-registered client. Empty: the proxy uses
	// ClientMetadataURL when the authorization server supports Client ID Metadata
	// Documents, else Dynamic Client Registration (RFC 7591).
	ClientID     string
	ClientSecret string
	// Issuer, when set, limits the pre-registered client to that authorization server
	// (credentials are not portable between servers).
	Issuer string
	// ClientMetadataURL is an https URL serving this proxy's client metadata document,
	// used as its client_id where supported.
	ClientMetadataURL string
	// Scopes are asked for instead of the metadata's scopes_supported, together with
	// the scope of the upstream's challenge. Nil: what the upstream says.
	Scopes []string
	// RedirectPort is the loopback port of http://127.0.0.1:PORT/callback, where the
	// browser lands after a person approves. Zero: a free port.
	RedirectPort int
	// Grant is GrantAuthorizationCode (the default) or GrantClientCredentials.
	Grant string
	// AuthorizationTimeout bounds the wait for a person to approve. Zero: 5 minutes.
	AuthorizationTimeout time.Duration
	// ClientName is the client_name registered. Empty: "mcp-proxy".
	ClientName string
	// TokenFile, when set, keeps the token, refresh token and client registration across
	// restarts (written with mode 0600). Empty: in memory only.
	TokenFile string
	// OpenBrowser opens the authorization URL in the desktop's browser when a person
	// must approve (besides logging it).
	OpenBrowser bool
	// ApplicationType is registered (RFC 7591, OpenID Connect): "native" (the default:
	// a loopback redirect) or "web" (the per-user flows, whose redirect is the proxy's
	// own HTTP listener).
	ApplicationType string
}

// maxStepUps bounds the authorizations in a row that the upstream answers with 403
// insufficient_scope again, so a server that will never be satisfied does not cause
// an endless loop of authorizations.
const maxStepUps = 2

// OAuth is the OAuth client of one upstream resource: it holds the current access
// token (in memory only), runs one authorization at a time, and refreshes. Every link
// to the same upstream shares it, so restarts and per-client sessions reuse the token.
// Safe for concurrent use.
type OAuth struct {
	cfg      OAuthConfig
	resource *url.URL
	log      zerolog.Logger
	http     *http.Client // follows redirects: metadata, registration, tokens
	noFollow *http.Client // the authorization request

	tok atomic.Pointer[oauthToken] // the current token; nil before the first flow

	mu       sync.Mutex // guards flight, clients, asked, stepUps, lastPort
	flight   *oauthFlight
	clients  map[string]*oauthClientID // by issuer: registrations are per authorization server
	asked    []string                  // every scope asked for so far (step-up asks for the union)
	stepUps  int                       // 403 insufficient_scope authorizations since the last success
	lastPort int                       // the callback port registered
}

// oauthToken is one access token and what it was obtained with.
type oauthToken struct {
	b       Bearer // the Authorization header: "Bearer <access token>" (shared, never modified)
	refresh string
	expiry  time.Time // zero: unknown
	issuer  string
	scopes  []string // the scopes asked for
	client  *oauthClientID
	as      *asMetadata
	target  string // the resource parameter
}

func (t *oauthToken) String() string { return "oauth token (redacted)" }

// newOAuthToken returns the token of access token tok, its Bearer pointing back at it.
func newOAuthToken(tok string) *oauthToken {
	t := &oauthToken{}
	t.b = Bearer{Header: []string{"Bearer " + tok}, oauth: t}
	return t
}

// Authorization implements Authorizer: the current token, refreshed first when it is
// about to expire; nil before the first authorization (the upstream's 401 starts it).
func (o *OAuth) Authorization(ctx context.Context) (*Bearer, error) {
	sent := o.token()
	if sent.needsRefresh() {
		if err := o.Refresh(ctx, sent); err != nil {
			o.log.Info().Err(err).Msg("refreshing the expiring token failed")
		}
		sent = o.token()
	}
	if sent == nil {
		return nil, nil
	}
	return &sent.b, nil
}

// Renew implements Authorizer: Authorize, for the token sent.
func (o *OAuth) Renew(ctx context.Context, status int, h http.Header, sent *Bearer) error {
	var t *oauthToken
	if sent != nil {
		t = sent.oauth
	}
	return o.Authorize(ctx, status, h, t)
}

// Accepted implements Authorizer: the upstream took the current token.
func (o *OAuth) Accepted() { o.succeeded() }

// oauthFlight is an authorization in progress; others wait for it.
type oauthFlight struct {
	done chan struct{}
	err  error
}

// NewOAuth returns the OAuth client for the upstream at resource. Nothing happens until
// the upstream answers 401.
func NewOAuth(resource string, cfg OAuthConfig, log zerolog.Logger) (*OAuth, error) {
	u, err := url.Parse(resource)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid upstream URL %q", resource)
	}
	u.Fragment = ""
	if cfg.Grant == "" {
		cfg.Grant = GrantAuthorizationCode
	}
	if cfg.AuthorizationTimeout <= 0 {
		cfg.AuthorizationTimeout = 5 * time.Minute
	}
	if cfg.ClientName == "" {
		cfg.ClientName = "mcp-proxy"
	}
	if cfg.ApplicationType == "" {
		cfg.ApplicationType = "native"
	}
	o := &OAuth{cfg: cfg, resource: u, log: log.With().Str("oauth", u.Redacted()).Logger(),
		http:    &http.Client{Transport: sharedTransport, Timeout: 30 * time.Second},
		clients: map[string]*oauthClientID{}}
	o.noFollow = &http.Client{Transport: sharedTransport, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if cfg.TokenFile != "" {
		o.loadToken()
	}
	return o, nil
}

// token returns the current token (nil before any).
func (o *OAuth) token() *oauthToken { return o.tok.Load() }

// needsRefresh reports whether the current token expires within 30 seconds and can be
// refreshed.
func (t *oauthToken) needsRefresh() bool {
	return t != nil && t.refresh != "" && !t.expiry.IsZero() && time.Until(t.expiry) < 30*time.Second
}

// errNoStepUp is returned when an upstream keeps answering insufficient_scope.
var errNoStepUp = errors.New("the upstream still answers 403 insufficient_scope after authorization")

// Refresh renews token sent if it is still the current one (nothing when another caller
// did it first).
func (o *OAuth) Refresh(ctx context.Context, sent *oauthToken) error {
	return o.run(ctx, sent, func(ctx context.Context) error {
		return o.refresh(ctx, sent)
	})
}

// Authorize runs the authorization the upstream's answer asks for (status 401, or 403
// with insufficient_scope), unless the token sent was already replaced, and waits for
// it. Only one authorization runs at a time; others wait for its outcome.
func (o *OAuth) Authorize(ctx context.Context, status int, h http.Header, sent *oauthToken) error {
	ch := parseChallenge(h)
	if status == http.StatusForbidden {
		if ch.err != "insufficient_scope" {
			return fmt.Errorf("HTTP 403 from %s (%s)", o.resource.Redacted(), orNone(ch.err))
		}
		o.mu.Lock()
		want := o.scopesFor(ch)
		grows := sent == nil || !subset(want, sent.scopes)
		if grows && o.stepUps >= maxStepUps {
			grows = false
		}
		if grows && o.tok.Load() == sent {
			o.stepUps++
		}
		o.mu.Unlock()
		if !grows {
			return fmt.Errorf("%w (scope %q)", errNoStepUp, ch.scope)
		}
	}
	return o.run(ctx, sent, func(ctx context.Context) error {
		return o.authorize(ctx, ch, sent)
	})
}

// succeeded notes that the upstream accepted the current token.
func (o *OAuth) succeeded() {
	o.mu.Lock()
	o.stepUps = 0
	o.mu.Unlock()
}

// run starts flow unless one is in flight or sent is no longer the current token, and
// waits for the outcome (or ctx). The flow has its own deadline, not the caller's: a
// person approving in a browser may take longer than one request, and the next request
// (after a restart, say) joins the same flow.
func (o *OAuth) run(ctx context.Context, sent *oauthToken, flow func(context.Context) error) error {
	o.mu.Lock()
	f := o.flight
	if f == nil {
		if o.tok.Load() != sent {
			o.mu.Unlock()
			return nil // replaced meanwhile: retry with the new token
		}
		f = &oauthFlight{done: make(chan struct{})}
		o.flight = f
		go func() {
			fctx, cancel := context.WithTimeout(context.Background(), o.cfg.AuthorizationTimeout+time.Minute)
			err := flow(fctx)
			cancel()
			if err != nil {
				o.log.Warn().Err(err).Msg("authorizing with the upstream failed")
			}
			o.mu.Lock()
			f.err = err
			o.flight = nil
			o.mu.Unlock()
			close(f.done)
		}()
	}
	o.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for authorization: %w", ctx.Err())
	}
}

// scopesFor is the scope set to ask for after challenge ch: the configured scopes, else
// the challenge's, else (filled in later from the metadata) none; always with every scope
// asked for before, so a step-up does not lose what was granted. Called with mu held.
func (o *OAuth) scopesFor(ch challenge) []string {
	var s []string
	switch {
	case o.cfg.Scopes != nil:
		s = append(s, o.cfg.Scopes...)
	case ch.scope != "":
		s = strings.Fields(ch.scope)
	}
	if ch.scope != "" && o.cfg.Scopes != nil {
		s = union(s, strings.Fields(ch.scope))
	}
	return union(o.asked, s)
}

// authorize discovers the authorization server and obtains a new token: by refreshing
// when the server is the one that issued the current token and a refresh token exists,
// else with the configured grant.
func (o *OAuth) authorize(ctx context.Context, ch challenge, sent *oauthToken) error {
	prm, err := o.fetchResourceMetadata(ctx, ch, o.resource)
	if err != nil {
		return err
	}
	target := canonicalResource(o.resource)
	var issuer string
	var scopes []string
	if prm != nil {
		issuer, target = prm.AuthorizationServers[0], prm.Resource
	} else {
		// 2025-03-26: no resource metadata; the server's origin is the authorization server.
		issuer = o.resource.Scheme + "://" + o.resource.Host
	}
	as, err := fetchASMetadata(ctx, o.http, issuer)
	if err != nil {
		return err
	}
	if as == nil {
		if prm != nil {
			return fmt.Errorf("no authorization server metadata for %s", issuer)
		}
		if !ch.bearer {
			return fmt.Errorf("HTTP 401 from %s without a Bearer challenge, and no OAuth metadata (RFC 9728, RFC 8414) found: "+
				"give the upstream its credentials in \"headers\", or \"oauth { disabled = true }\"", o.resource.Redacted())
		}
		// 2025-03-26 fallback: the default endpoints at the server's origin.
		as = &asMetadata{Issuer: issuer, AuthorizationEndpoint: issuer + "/authorize", TokenEndpoint: issuer + "/token",
			RegistrationEndpoint: issuer + "/register", CodeChallengeMethodsSupported: []string{"S256"}}
	}

	o.mu.Lock()
	scopes = o.scopesFor(ch)
	o.mu.Unlock()
	if len(scopes) == 0 && prm != nil && o.cfg.Scopes == nil {
		scopes = slices.Clone(prm.ScopesSupported)
	}

	if sent != nil && sent.refresh != "" && sent.issuer == as.Issuer && subset(scopes, sent.scopes) && ch.err != "insufficient_scope" {
		if err := o.refresh(ctx, sent); err == nil {
			return nil
		} else {
			o.log.Info().Err(err).Msg("refreshing the token failed; authorizing again")
		}
	}

	if o.cfg.Grant == GrantAuthorizationCode && slices.Contains(as.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		// SEP-2207: ask for a refresh token where the server offers one.
		scopes = append(scopes, "offline_access")
	}
	o.mu.Lock()
	o.asked = union(o.asked, scopes)
	o.mu.Unlock()

	var t *oauthToken
	if o.cfg.Grant == GrantClientCredentials {
		t, err = o.clientCredentials(ctx, as, target, scopes)
	} else {
		t, err = o.authorizationCode(ctx, as, target, scopes)
	}
	if err != nil {
		return err
	}
	o.setToken(t)
	o.log.Info().Str("issuer", as.Issuer).Strs("scopes", scopes).Msg("authorized with the upstream")
	return nil
}

// canonicalResource is the resource identifier of u (RFC 8707, MCP): scheme and host in
// lower case, no fragment, no trailing slash unless meaningful.
func canonicalResource(u *url.URL) string {
	c := *u
	c.Scheme, c.Host, c.Fragment, c.RawFragment = strings.ToLower(c.Scheme), strings.ToLower(c.Host), "", ""
	return c.String()
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func subset(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

func orNone(s string) string {
	if s == "" {
		return "no error code"
	}
	return s
}
