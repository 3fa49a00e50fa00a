package config

import (
	"net"
	"net/url"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

// Credential modes: whom an upstream's calls act as (docs/credentials.md).
const (
	// CredentialsShared: every call uses the upstream's own credentials (headers, env,
	// the oauth block), as without a credentials block.
	CredentialsShared = "shared"
	// CredentialsExchange: the calling principal's validated access token is exchanged
	// (RFC 8693) for a token whose audience is the upstream.
	CredentialsExchange = "exchange"
	// CredentialsOAuth: each principal authorizes the proxy at the upstream's own
	// authorization server (authorization code with PKCE), once.
	CredentialsOAuth = "oauth"
	// CredentialsSecret: each principal has its own secrets, put into the child's env or
	// the upstream's headers with secret("NAME").
	CredentialsSecret = "secret"
)

// Client authentication methods at a token endpoint (RFC 6749 §2.3, RFC 7523 §2.2).
const (
	ClientAuthBasic = "client_secret_basic"
	ClientAuthPost  = "client_secret_post"
	ClientAuthJWT   = "private_key_jwt"
	ClientAuthNone  = "none"
)

// Token types of RFC 8693 §3 and of the identity assertion grant.
const (
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
	TokenTypeIDToken     = "urn:ietf:params:oauth:token-type:id_token"
	TokenTypeIDJAG       = "urn:ietf:params:oauth:token-type:id-jag"
)

// CallbackPath is where a person's browser lands after authorizing an upstream in
// mode "oauth": a path of the HTTP listener.
const CallbackPath = "/oauth/callback"

// Credentials is an upstream's credentials block: whom its calls act as. Nil (no block)
// is mode "shared".
type Credentials struct {
	Mode string // CredentialsShared, CredentialsExchange, CredentialsOAuth or CredentialsSecret

	// The token endpoint the proxy authenticates at as a client: the identity provider's
	// (exchange) or the upstream's authorization server's (oauth; "" discovers it).
	TokenEndpoint string
	ClientID      string
	ClientSecret  string
	// ClientAuth is how the proxy authenticates there: ClientAuthBasic (the default with
	// a secret), ClientAuthPost, ClientAuthJWT (a JWT signed with PrivateKeyFile) or
	// ClientAuthNone (the default without a secret or key).
	ClientAuth     string
	PrivateKeyFile string // PEM (PKCS#8, PKCS#1 or SEC 1) for private_key_jwt; absolute
	KeyID          string // the kid of that key's JWT header; "" for none

	// Exchange: the token asked for is for Resource (RFC 8707; default the upstream's
	// url) and Audience (optional), with Scopes; the principal's token is presented as
	// SubjectTokenType (default TokenTypeAccessToken).
	Resource         string
	Audience         string
	Scopes           []string // exchange and oauth
	SubjectTokenType string
	// IDJAG, when set, makes the exchange an identity assertion grant: the identity
	// provider issues an ID-JAG for the upstream's authorization server, which the proxy
	// presents there with the JWT bearer grant (RFC 7523).
	IDJAG *IDJAG

	// OAuth: a Client ID Metadata Document URL used as client_id where supported, and
	// the callback URL registered (default: the origin of auth.resource, else of the
	// listen address, with CallbackPath).
	ClientMetadataURL string
	RedirectURL       string

	// Secret: the file of every principal's secrets (JSON: principal → name → value;
	// refused when group or others may read it). "": the token store holds them.
	SecretsFile string
	// CataloguePrincipal, mode secret: the principal (a service account) whose secrets
	// the upstream's own session, which lists the catalogue, is started with, for a
	// server that does not start without them; "": that session gets none. It is an
	// identity as the secrets are kept under (principal.ParseIdentity: "api_key:svc").
	CataloguePrincipal string

	DeclRange hcl.Range
	ModeRange hcl.Range // of the mode attribute; DeclRange when it is not set
}

// IDJAG is the id_jag block of an exchange: the upstream's authorization server the
// ID-JAG is for, and the proxy's client there.
type IDJAG struct {
	Issuer         string // the authorization server's issuer: the ID-JAG's audience
	TokenEndpoint  string // "" finds it in the issuer's metadata (RFC 8414)
	ClientID       string
	ClientSecret   string
	ClientAuth     string
	PrivateKeyFile string
	KeyID          string
	DeclRange      hcl.Range
}

// PerUser reports whether c makes calls act as their principal (any mode but shared).
func (c *Credentials) PerUser() bool { return c != nil && c.Mode != CredentialsShared }

type rawCredentials struct {
	Mode               *hcl.Attribute `hcl:"mode,optional"`
	TokenEndpoint      *hcl.Attribute `hcl:"token_endpoint,optional"`
	ClientID           *hcl.Attribute `hcl:"client_id,optional"`
	ClientSecret       *hcl.Attribute `hcl:"client_secret,optional"`
	ClientAuth         *hcl.Attribute `hcl:"client_auth,optional"`
	PrivateKeyFile     *hcl.Attribute `hcl:"private_key_file,optional"`
	KeyID              *hcl.Attribute `hcl:"key_id,optional"`
	Resource           *hcl.Attribute `hcl:"resource,optional"`
	Audience           *hcl.Attribute `hcl:"audience,optional"`
	Scopes             *hcl.Attribute `hcl:"scopes,optional"`
	SubjectTokenType   *hcl.Attribute `hcl:"subject_token_type,optional"`
	ClientMetadataURL  *hcl.Attribute `hcl:"client_metadata_url,optional"`
	RedirectURL        *hcl.Attribute `hcl:"redirect_url,optional"`
	SecretsFile        *hcl.Attribute `hcl:"secrets_file,optional"`
	CataloguePrincipal *hcl.Attribute `hcl:"catalogue_principal,optional"`
	IDJAG              []rawIDJAG     `hcl:"id_jag,block"`

	DefRange hcl.Range `hcl:",def_range"`
}

type rawIDJAG struct {
	Issuer         *hcl.Attribute `hcl:"issuer,optional"`
	TokenEndpoint  *hcl.Attribute `hcl:"token_endpoint,optional"`
	ClientID       *hcl.Attribute `hcl:"client_id,optional"`
	ClientSecret   *hcl.Attribute `hcl:"client_secret,optional"`
	ClientAuth     *hcl.Attribute `hcl:"client_auth,optional"`
	PrivateKeyFile *hcl.Attribute `hcl:"private_key_file,optional"`
	KeyID          *hcl.Attribute `hcl:"key_id,optional"`

	DefRange hcl.Range `hcl:",def_range"`
}

// decodeCredentials evaluates and validates an upstream's credentials block (at most
// one); nil without one. What depends on other blocks (auth, listen) is checked by
// checkCredentials.
func decodeCredentials(e *evaluator, raw *rawUpstream, u *Upstream, baseDir string) *Credentials {
	raws := raw.Credentials
	if len(raws) == 0 {
		return nil
	}
	for _, r := range raws[1:] {
		e.blockErrorf(r.DefRange, "Duplicate credentials block", "An upstream has at most one \"credentials\" block; the first is at %s.",
			position(raws[0].DefRange))
	}
	r := &raws[0]
	c := &Credentials{Mode: CredentialsShared, DeclRange: r.DefRange, ModeRange: r.DefRange}
	if r.Mode == nil {
		e.blockErrorf(r.DefRange, "Missing mode", "A credentials block needs mode = %q, %q, %q or %q.",
			CredentialsShared, CredentialsExchange, CredentialsOAuth, CredentialsSecret)
	} else {
		c.ModeRange = r.Mode.Expr.Range()
		if s, ok := e.oneOf(r.Mode, "mode", CredentialsShared, CredentialsExchange, CredentialsOAuth, CredentialsSecret); ok {
			c.Mode = s
		}
	}
	str := func(a *hcl.Attribute, dst *string) {
		if s, ok := e.string(a); ok {
			*dst = s
		}
	}
	str(r.TokenEndpoint, &c.TokenEndpoint)
	str(r.ClientID, &c.ClientID)
	str(r.ClientSecret, &c.ClientSecret)
	str(r.KeyID, &c.KeyID)
	str(r.Resource, &c.Resource)
	str(r.Audience, &c.Audience)
	str(r.SubjectTokenType, &c.SubjectTokenType)
	str(r.ClientMetadataURL, &c.ClientMetadataURL)
	str(r.RedirectURL, &c.RedirectURL)
	str(r.CataloguePrincipal, &c.CataloguePrincipal)
	if s, ok := e.string(r.PrivateKeyFile); ok && s != "" {
		c.PrivateKeyFile = resolvePath(baseDir, s)
	}
	if s, ok := e.string(r.SecretsFile); ok && s != "" {
		c.SecretsFile = resolvePath(baseDir, s)
	}
	if l, ok := e.stringList(r.Scopes); ok {
		c.Scopes = l
		checkScopes(e, r.Scopes, l)
	}
	c.ClientAuth = decodeClientAuth(e, r.ClientAuth, c.ClientSecret, c.PrivateKeyFile)

	// What each mode takes; the rest is an error where it is written.
	takes := map[string][]*hcl.Attribute{
		CredentialsShared: nil,
		CredentialsExchange: {r.TokenEndpoint, r.ClientID, r.ClientSecret, r.ClientAuth, r.PrivateKeyFile, r.KeyID,
			r.Resource, r.Audience, r.Scopes, r.SubjectTokenType},
		CredentialsOAuth: {r.TokenEndpoint, r.ClientID, r.ClientSecret, r.ClientAuth, r.PrivateKeyFile, r.KeyID,
			r.Scopes, r.ClientMetadataURL, r.RedirectURL, r.Resource},
		CredentialsSecret: {r.SecretsFile, r.CataloguePrincipal},
	}
	for _, a := range []*hcl.Attribute{r.TokenEndpoint, r.ClientID, r.ClientSecret, r.ClientAuth, r.PrivateKeyFile, r.KeyID,
		r.Resource, r.Audience, r.Scopes, r.SubjectTokenType, r.ClientMetadataURL, r.RedirectURL, r.SecretsFile, r.CataloguePrincipal} {
		if a == nil || containsAttr(takes[c.Mode], a) {
			continue
		}
		e.errorf(a, "Argument does not apply", "%q does not apply to credentials mode %q.", a.Name, c.Mode)
	}
	for _, j := range r.IDJAG[min(1, len(r.IDJAG)):] {
		e.blockErrorf(j.DefRange, "Duplicate id_jag block", "A credentials block has at most one \"id_jag\" block.")
	}
	if len(r.IDJAG) > 0 {
		if c.Mode != CredentialsExchange {
			e.blockErrorf(r.IDJAG[0].DefRange, "Block does not apply", "An \"id_jag\" block applies to credentials mode %q.", CredentialsExchange)
		}
		c.IDJAG = decodeIDJAG(e, &r.IDJAG[0], baseDir)
	}

	isURL := raw.URL != nil && raw.Command == nil
	switch c.Mode {
	case CredentialsExchange:
		if !isURL {
			e.blockErrorf(c.ModeRange, "Mode needs a url upstream", "Credentials mode %q sends a token in the Authorization header: it applies to upstreams with a \"url\".", c.Mode)
		}
		if r.TokenEndpoint == nil {
			e.blockErrorf(r.DefRange, "Missing token_endpoint", "Credentials mode %q needs the identity provider's token_endpoint, where the principal's token is exchanged.", c.Mode)
		} else {
			checkHTTPURL(e, r.TokenEndpoint, c.TokenEndpoint)
		}
		if c.ClientID == "" {
			e.blockErrorf(r.DefRange, "Missing client_id", "Credentials mode %q needs the proxy's client_id at the token endpoint (token exchange is done by an authenticated client).", c.Mode)
		}
		if c.Resource == "" {
			c.Resource = u.URL
		} else if r.Resource != nil {
			checkHTTPURL(e, r.Resource, c.Resource)
		}
		if c.SubjectTokenType == "" {
			c.SubjectTokenType = TokenTypeAccessToken
		} else if !strings.HasPrefix(c.SubjectTokenType, "urn:") {
			e.errorf(r.SubjectTokenType, "Invalid subject_token_type", "\"subject_token_type\" must be a token type URI (RFC 8693 §3), such as %q, got %q.", TokenTypeAccessToken, c.SubjectTokenType)
		}
	case CredentialsOAuth:
		if !isURL {
			e.blockErrorf(c.ModeRange, "Mode needs a url upstream", "Credentials mode %q authorizes the proxy at an HTTP upstream's authorization server: it applies to upstreams with a \"url\".", c.Mode)
		}
		if r.TokenEndpoint != nil {
			checkHTTPURL(e, r.TokenEndpoint, c.TokenEndpoint)
		}
		if r.Resource != nil {
			checkHTTPURL(e, r.Resource, c.Resource)
		}
		if r.ClientMetadataURL != nil {
			if pu, err := url.Parse(c.ClientMetadataURL); err != nil || pu.Scheme != "https" || pu.Host == "" || pu.Path == "" || pu.Path == "/" {
				e.errorf(r.ClientMetadataURL, "Invalid client_metadata_url",
					"\"client_metadata_url\" must be an https:// URL with a path (a Client ID Metadata Document), got %q.", c.ClientMetadataURL)
			}
		}
		if r.RedirectURL != nil {
			if pu, err := url.Parse(c.RedirectURL); err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" || pu.Path != CallbackPath {
				e.errorf(r.RedirectURL, "Invalid redirect_url",
					"\"redirect_url\" must be the absolute URL at which browsers reach this proxy's %s, such as \"https://mcp.example.com%s\", got %q.",
					CallbackPath, CallbackPath, c.RedirectURL)
			}
		}
		if c.ClientAuth == ClientAuthJWT && c.ClientID == "" {
			e.blockErrorf(r.DefRange, "Missing client_id", "private_key_jwt needs the client_id the key is registered for.")
		}
	case CredentialsSecret:
		// secret() references are checked with the env and headers (checkSecretRefs).
		if r.CataloguePrincipal != nil && c.CataloguePrincipal == "" {
			e.errorf(r.CataloguePrincipal, "Invalid catalogue_principal", "\"catalogue_principal\" must name a principal; leave it out for none.")
		} else if _, _, _, ok := principal.ParseIdentity(c.CataloguePrincipal); c.CataloguePrincipal != "" && !ok {
			e.errorf(r.CataloguePrincipal, "Invalid catalogue_principal",
				"\"catalogue_principal\" names a principal as the secrets are kept, by its identity: \"api_key:%s\", \"jwt:%s\" or \"stdio:%s\", not %q.",
				c.CataloguePrincipal, c.CataloguePrincipal, c.CataloguePrincipal, c.CataloguePrincipal)
		}
	}
	if c.ClientSecret != "" && c.ClientID == "" && r.ClientSecret != nil && c.Mode != CredentialsShared {
		e.errorf(r.ClientSecret, "Missing client_id", "\"client_secret\" needs the \"client_id\" it belongs to.")
	}
	return c
}

// decodeIDJAG evaluates an id_jag block.
func decodeIDJAG(e *evaluator, r *rawIDJAG, baseDir string) *IDJAG {
	j := &IDJAG{DeclRange: r.DefRange}
	for _, p := range []struct {
		a   *hcl.Attribute
		dst *string
	}{{r.Issuer, &j.Issuer}, {r.TokenEndpoint, &j.TokenEndpoint}, {r.ClientID, &j.ClientID}, {r.ClientSecret, &j.ClientSecret}, {r.KeyID, &j.KeyID}} {
		if s, ok := e.string(p.a); ok {
			*p.dst = s
		}
	}
	if s, ok := e.string(r.PrivateKeyFile); ok && s != "" {
		j.PrivateKeyFile = resolvePath(baseDir, s)
	}
	j.ClientAuth = decodeClientAuth(e, r.ClientAuth, j.ClientSecret, j.PrivateKeyFile)
	if r.Issuer == nil {
		e.blockErrorf(r.DefRange, "Missing issuer", "An \"id_jag\" block needs the issuer of the upstream's authorization server: the audience of the ID-JAG.")
	} else {
		checkHTTPURL(e, r.Issuer, j.Issuer)
	}
	if r.TokenEndpoint != nil {
		checkHTTPURL(e, r.TokenEndpoint, j.TokenEndpoint)
	}
	if j.ClientID == "" {
		e.blockErrorf(r.DefRange, "Missing client_id", "An \"id_jag\" block needs the proxy's client_id at the upstream's authorization server (the ID-JAG is issued to it).")
	}
	return j
}

// decodeClientAuth evaluates client_auth, defaulting from what is configured: a key
// means private_key_jwt, a secret client_secret_basic, neither none.
func decodeClientAuth(e *evaluator, a *hcl.Attribute, secret, keyFile string) string {
	def := ClientAuthNone
	switch {
	case keyFile != "":
		def = ClientAuthJWT
	case secret != "":
		def = ClientAuthBasic
	}
	s, ok := e.oneOf(a, "client_auth", ClientAuthBasic, ClientAuthPost, ClientAuthJWT, ClientAuthNone)
	if !ok {
		return def
	}
	switch {
	case (s == ClientAuthBasic || s == ClientAuthPost) && secret == "":
		e.errorf(a, "Missing client_secret", "client_auth = %q needs a \"client_secret\".", s)
	case s == ClientAuthJWT && keyFile == "":
		e.errorf(a, "Missing private_key_file", "client_auth = %q needs a \"private_key_file\" (PEM) to sign the client assertion with.", s)
	}
	return s
}

// checkScopes reports scopes that cannot be sent.
func checkScopes(e *evaluator, a *hcl.Attribute, l []string) {
	for _, sc := range l {
		if sc == "" || strings.ContainsAny(sc, " \"\\") {
			e.errorf(a, "Invalid scope", "Scope %q must be non-empty, without spaces, quotes or backslashes.", sc)
		}
	}
}

// checkHTTPURL reports a value that is not an absolute http(s) URL.
func checkHTTPURL(e *evaluator, a *hcl.Attribute, s string) {
	if pu, err := url.Parse(s); err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
		e.errorf(a, "Invalid URL", "%q must be an absolute http:// or https:// URL, got %q.", a.Name, s)
	}
}

func containsAttr(l []*hcl.Attribute, a *hcl.Attribute) bool {
	for _, x := range l {
		if x == a {
			return true
		}
	}
	return false
}

// checkCredentials checks what a credentials block needs of the rest of the file: an
// exchange needs principals with tokens (auth's jwt block); an oauth upstream needs the
// HTTP listener its callback lands on, and a URL browsers reach it at.
func checkCredentials(e *evaluator, cfg *Config) {
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		c := u.Credentials
		if !c.PerUser() || u.Disabled {
			continue
		}
		switch c.Mode {
		case CredentialsExchange:
			if cfg.Auth == nil || cfg.Auth.JWT == nil {
				e.blockErrorf(c.ModeRange, "Exchange without tokens",
					"Upstream %q exchanges the calling principal's access token, but no auth block with a jwt block authenticates principals by token: "+
						"add one (API keys and the stdio user have no token to exchange).", u.Name)
			}
		case CredentialsOAuth:
			if len(cfg.Listen) == 0 {
				e.blockErrorf(c.ModeRange, "OAuth without a listener",
					"Upstream %q authorizes each principal in a browser, whose callback lands on the HTTP listener (%s): add a listen \"http\" block.", u.Name, CallbackPath)
				continue
			}
			if c.RedirectURL == "" {
				c.RedirectURL = defaultRedirectURL(cfg)
			}
			if c.RedirectURL == "" {
				e.blockErrorf(c.ModeRange, "Missing redirect_url",
					"Upstream %q needs the URL at which browsers reach this proxy's %s: set redirect_url, or auth's resource (its origin is used).",
					u.Name, CallbackPath)
			}
		}
	}
}

// defaultRedirectURL is CallbackPath at the origin of auth.resource, else at the listen
// address when it names a host; "" when neither says where browsers reach the proxy.
func defaultRedirectURL(cfg *Config) string {
	if cfg.Auth != nil && cfg.Auth.Resource != "" {
		if pu, err := url.Parse(cfg.Auth.Resource); err == nil && pu.Host != "" {
			return pu.Scheme + "://" + pu.Host + CallbackPath
		}
	}
	host, _, err := net.SplitHostPort(cfg.Listen[0].Address)
	if ip := net.ParseIP(host); err != nil || host == "" || (ip != nil && ip.IsUnspecified()) {
		return ""
	}
	return "http://" + cfg.Listen[0].Address + CallbackPath
}

// perUserSession checks and defaults the session of an upstream whose credentials act
// as each principal: one upstream session per principal, never one shared by two.
func perUserSession(e *evaluator, raw *rawUpstream, u *Upstream) {
	if !u.Credentials.PerUser() {
		return
	}
	if raw.Session == nil {
		u.Session = SessionPerPrincipal
		return
	}
	if u.Session != SessionPerPrincipal {
		e.errorf(raw.Session, "Session shared between principals",
			"Credentials mode %q acts as each principal, so no upstream session may carry two: session must be %q (the default with this mode), not %q.",
			u.Credentials.Mode, SessionPerPrincipal, u.Session)
	}
}
