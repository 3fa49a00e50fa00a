package credential

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// Token exchange (RFC 8693) and the identity assertion grant.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	grantJWTBearer     = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	typeAccessToken    = "urn:ietf:params:oauth:token-type:access_token"
	typeIDJAG          = "urn:ietf:params:oauth:token-type:id-jag"
)

// ExchangeConfig configures mode "exchange": the principal's access token is exchanged
// at TokenEndpoint, by the proxy as Client, for a token for Resource (and Audience),
// with Scopes. With IDJAG, the identity provider issues an ID-JAG for the upstream's
// authorization server instead, which the proxy presents there with the JWT bearer
// grant (the MCP enterprise-managed authorization extension).
type ExchangeConfig struct {
	TokenEndpoint    string
	Client           Client
	Resource         string // RFC 8707: the upstream's resource identifier
	Audience         string // "" for none (IDJAG: the authorization server's issuer)
	Scopes           []string
	SubjectTokenType string // default the access token type
	IDJAG            *IDJAGConfig
}

// IDJAGConfig is the upstream's authorization server of an identity assertion grant.
type IDJAGConfig struct {
	Issuer        string // the ID-JAG's audience
	TokenEndpoint string // "" finds it in the issuer's metadata (RFC 8414)
	Client        Client // the proxy's client there
}

// exchanger obtains principals' tokens by token exchange.
type exchanger struct {
	upstream string
	cfg      *ExchangeConfig
	http     *http.Client

	mu       sync.Mutex // guards asToken
	asToken  string     // the ID-JAG authorization server's token endpoint, once found
	discover func(ctx context.Context, issuer string) (string, error)
}

func newExchanger(upstream string, cfg *ExchangeConfig) (*exchanger, error) {
	if cfg.TokenEndpoint == "" || cfg.Client.ID == "" {
		return nil, errors.New("credential: an exchange needs a token endpoint and a client_id")
	}
	if cfg.SubjectTokenType == "" {
		cfg.SubjectTokenType = typeAccessToken
	}
	x := &exchanger{upstream: upstream, cfg: cfg, http: &http.Client{Timeout: 30 * time.Second}}
	if cfg.IDJAG != nil {
		x.asToken = cfg.IDJAG.TokenEndpoint
	}
	x.discover = func(ctx context.Context, issuer string) (string, error) {
		return transport.TokenEndpointOf(ctx, x.http, issuer)
	}
	return x, nil
}

// obtain implements strategy: the token another replica (or an earlier run, with a file
// store) exchanged, while it is usable; else a new exchange.
func (x *exchanger) obtain(ctx context.Context, h *handle, _ *Call) (*token, error) {
	_, t, err := h.stored(ctx, x.upstream, ModeExchange)
	if err != nil || t != nil {
		return t, err
	}
	if t, err = x.exchange(ctx, h); err != nil {
		return nil, err
	}
	h.p.event(EventExchange)
	return t, nil
}

// renew implements strategy: the upstream refused the token: exchange again, with the
// principal's current token.
func (x *exchanger) renew(ctx context.Context, h *handle, _ *token) (*token, error) {
	t, err := x.exchange(ctx, h)
	if err != nil {
		return nil, err
	}
	h.p.event(EventRefresh)
	return t, nil
}

// exchange exchanges the principal's access token and stores the result, which is not
// served past that token's own expiry (Grant.Until), however long the upstream's lives.
func (x *exchanger) exchange(ctx context.Context, h *handle) (*token, error) {
	p := h.p
	who := h.who.Load()
	if who == nil || who.Token.IsZero() {
		via := "no token"
		if who != nil {
			via = "authenticated by " + who.Via
		}
		return nil, unavailable(x.upstream, "principal %q has no access token to exchange (%s); this upstream needs a principal authenticated with a token (auth's jwt block)", h.name, via)
	}
	now := p.deps.Now()
	if !who.TokenExpiry.IsZero() && !now.Before(who.TokenExpiry) {
		return nil, unavailable(x.upstream, "principal %q's access token has expired; a call with a fresh one is exchanged", h.name)
	}
	cfg := x.cfg
	form := url.Values{
		"grant_type":         {grantTokenExchange},
		"subject_token":      {who.Token.Reveal()},
		"subject_token_type": {cfg.SubjectTokenType},
		"resource":           {cfg.Resource},
	}
	if len(cfg.Scopes) > 0 {
		form.Set("scope", strings.Join(cfg.Scopes, " "))
	}
	if cfg.IDJAG != nil {
		form.Set("requested_token_type", typeIDJAG)
		form.Set("audience", cfg.IDJAG.Issuer)
	} else {
		form.Set("requested_token_type", typeAccessToken)
		if cfg.Audience != "" {
			form.Set("audience", cfg.Audience)
		}
	}
	r, err := tokenRequest(ctx, x.http, cfg.TokenEndpoint, &cfg.Client, form)
	if err != nil {
		return nil, fmt.Errorf("exchanging principal %q's token: %w", h.name, err)
	}
	issuer := cfg.TokenEndpoint
	if cfg.IDJAG != nil {
		if r.IssuedTokenType != "" && r.IssuedTokenType != typeIDJAG {
			return nil, fmt.Errorf("exchanging principal %q's token: the identity provider issued a %q, not an ID-JAG", h.name, r.IssuedTokenType)
		}
		endpoint, err := x.idjagEndpoint(ctx)
		if err != nil {
			return nil, err
		}
		form := url.Values{"grant_type": {grantJWTBearer}, "assertion": {r.AccessToken}}
		if len(cfg.Scopes) > 0 {
			form.Set("scope", strings.Join(cfg.Scopes, " "))
		}
		if r, err = tokenRequest(ctx, x.http, endpoint, &cfg.IDJAG.Client, form); err != nil {
			return nil, fmt.Errorf("presenting principal %q's ID-JAG: %w", h.name, err)
		}
		issuer = cfg.IDJAG.Issuer
	}
	if err := r.Bearer(); err != nil {
		return nil, fmt.Errorf("exchanging principal %q's token: %w", h.name, err)
	}
	g := &Grant{Upstream: x.upstream, Principal: h.name, Mode: ModeExchange, AccessToken: principal.NewSecret(r.AccessToken),
		Expiry: r.Expiry(now), Until: who.TokenExpiry, Scopes: strings.Fields(r.Scope), Issuer: issuer, Subject: jwtSubject(r.AccessToken),
		Created: now, Updated: now}
	if err := p.deps.Store.Put(ctx, g); err != nil {
		// The token is good: serve with it; the next replica exchanges its own.
		p.log.Warn().Err(err).Str("principal", h.name).Msg("could not store the exchanged token")
	}
	return tokenOf(g), nil
}

// idjagEndpoint is the token endpoint of the ID-JAG's authorization server: configured,
// else found in its metadata once.
func (x *exchanger) idjagEndpoint(ctx context.Context) (string, error) {
	x.mu.Lock()
	e := x.asToken
	x.mu.Unlock()
	if e != "" {
		return e, nil
	}
	e, err := x.discover(ctx, x.cfg.IDJAG.Issuer)
	if err != nil {
		return "", err
	}
	x.mu.Lock()
	x.asToken = e
	x.mu.Unlock()
	return e, nil
}

// tokenOf is the cached form of g's access token.
func tokenOf(g *Grant) *token {
	t := &token{bearer: transport.NewBearer(g.AccessToken.Reveal()), expiry: g.Expiry, until: g.Until, margin: skew, subject: g.Subject, grant: g}
	if life := g.Expiry.Sub(g.Updated); !g.Expiry.IsZero() && !g.Updated.IsZero() && life/4 < skew {
		t.margin = max(life/4, 0)
	}
	return t
}

// jwtSubject is the sub claim of tok when it is a JWT (read, not verified: it is only
// shown, as whom the upstream knows the call's principal as); "" otherwise.
func jwtSubject(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(b, &c) != nil || len(c.Sub) > 256 {
		return ""
	}
	return c.Sub
}
