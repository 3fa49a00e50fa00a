// Package auth authenticates requests on the proxy's HTTP front end. It turns the
// credentials of a request into a principal.Principal or a Failure that the front end
// writes back (401 or 403, never "allowed").
//
// Two kinds of credential are understood:
//
//   - static API keys, presented as "Authorization: Bearer <key>" or "X-API-Key: <key>",
//     configured by the SHA-256 of the key (so the config need not hold the secret) or by
//     the key itself (typically read from the environment);
//   - OAuth 2.1 access tokens in JWT form, for which the proxy is a resource server: the
//     signature is checked against the issuer's JWKS (fetched and cached here), and the
//     issuer, audience (RFC 8707: this proxy's resource URI) and lifetime are validated.
//
// With OAuth configured the package also serves the RFC 9728 protected resource metadata
// and advertises it in every 401 challenge, as the MCP authorization spec requires.
// Tokens are never logged, and the middleware strips them from the request it hands on
// so that they cannot be passed through to an upstream.
package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

// Config is the front end's authentication configuration. At least one API key or a JWT
// configuration is required.
type Config struct {
	// Resource is this proxy's resource URI as clients address it, e.g.
	// https://mcp.example.com/mcp. Required when JWT is set: it is the default audience
	// and locates the protected resource metadata.
	Resource string
	APIKeys  []APIKey
	JWT      *JWTConfig // nil: no OAuth
}

// APIKey is one static key. Exactly one of SHA256 and Token is set.
type APIKey struct {
	Name   string   // the principal's name; unique among the keys
	Groups []string // the principal's groups
	SHA256 string   // hex SHA-256 of the key (see HashToken); upper or lower case
	Token  string   // the key itself
}

// Failure is why a request was not authenticated. Status is 401 (no credentials, or
// invalid ones) or 403 (valid credentials lacking a required scope).
type Failure struct {
	Status          int
	WWWAuthenticate string // the challenge to send in the WWW-Authenticate header
	Message         string // for the client: the error_description and the JSON-RPC message
	// Reason is for the log only: it may carry internal detail (a JWKS error, the key id
	// of an unknown key) but never the token. It is not sent to the client.
	Reason string
}

func (f *Failure) Error() string { return f.Message }

// Authenticator authenticates requests. It is safe for concurrent use.
type Authenticator struct {
	log      zerolog.Logger
	keys     []apiKeyEntry
	jwt      *jwtValidator // nil without OAuth
	resource string
	metaURL  string // absolute URL of the protected resource metadata ("" without OAuth)
	metaPath string // its path (the path-suffixed form)
	metaDoc  []byte // the metadata document
}

// New validates cfg and returns an Authenticator. With JWT set it starts fetching the
// issuer's JWKS in the background (an unreachable issuer is not an error here: tokens are
// rejected until keys arrive); call Close to stop.
func New(cfg Config, log zerolog.Logger) (*Authenticator, error) {
	a := &Authenticator{log: log}
	if len(cfg.APIKeys) == 0 && cfg.JWT == nil {
		return nil, errors.New("auth: no API keys and no JWT configuration: nothing to authenticate with")
	}
	keys, err := buildAPIKeys(cfg.APIKeys, log)
	if err != nil {
		return nil, err
	}
	a.keys = keys
	if cfg.Resource != "" || cfg.JWT != nil {
		if err := a.setResource(cfg.Resource); err != nil {
			return nil, err
		}
	}
	if cfg.JWT != nil {
		v, err := newJWTValidator(*cfg.JWT, a.resource, log)
		if err != nil {
			return nil, err
		}
		a.jwt = v
		a.metaDoc = v.metadataDocument(a.resource)
	}
	return a, nil
}

// setResource validates the resource URI and derives the metadata URL from it (RFC 9728
// §3.1: the well-known suffix goes between the host and the path, without a trailing
// slash of the path).
func (a *Authenticator) setResource(resource string) error {
	if resource == "" {
		return errors.New("auth: resource (this proxy's resource URI, e.g. https://mcp.example.com/mcp) is required with JWT")
	}
	u, err := url.Parse(resource)
	if err != nil {
		return fmt.Errorf("auth: resource %q: %v", resource, err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("auth: resource %q must be an absolute http(s) URI without user info or fragment", resource)
	}
	a.resource = resource
	a.metaPath = WellKnownPath + strings.TrimSuffix(u.EscapedPath(), "/")
	a.metaURL = u.Scheme + "://" + u.Host + a.metaPath
	if u.RawQuery != "" {
		a.metaURL += "?" + u.RawQuery
	}
	return nil
}

// Close stops the background JWKS refresh. It is safe to call more than once.
func (a *Authenticator) Close() {
	if a.jwt != nil {
		a.jwt.keys.close()
	}
}

// HashToken returns the lower-case hex SHA-256 of token, the form APIKey.SHA256 takes.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// Authenticate returns the principal r's credentials establish, or why it has none.
// It never returns (nil, nil).
func (a *Authenticator) Authenticate(r *http.Request) (*principal.Principal, *Failure) {
	tok, fromAPIKeyHeader, f := a.credentials(r)
	if f != nil {
		return nil, f
	}
	if p := a.matchAPIKey(tok); p != nil {
		return p, nil
	}
	if fromAPIKeyHeader {
		return nil, a.invalid("invalid_token", "unknown API key", "X-API-Key matches no configured key")
	}
	if a.jwt == nil {
		return nil, a.invalid("invalid_token", "unknown API key", "bearer token matches no configured key (OAuth not configured)")
	}
	if strings.Count(tok, ".") != 2 {
		return nil, a.invalid("invalid_token", "invalid token", "bearer token is neither a configured API key nor a JWT")
	}
	p, terr := a.jwt.validate(tok)
	if terr != nil {
		return nil, a.invalid("invalid_token", terr.msg, terr.reason)
	}
	if missing := missingScopes(p, a.jwt.requiredScopes); len(missing) > 0 {
		return nil, &Failure{
			Status:          http.StatusForbidden,
			WWWAuthenticate: a.challenge("insufficient_scope", "insufficient scope", a.jwt.requiredScopes),
			Message:         "insufficient scope",
			Reason:          fmt.Sprintf("principal %q lacks required scopes %s", p.Name, strings.Join(missing, " ")),
		}
	}
	return p, nil
}

// credentials extracts the presented token. RFC 6750: a request with no credentials we
// understand (none at all, or another scheme) gets a bare challenge; a malformed bearer
// request gets invalid_request.
func (a *Authenticator) credentials(r *http.Request) (tok string, fromAPIKeyHeader bool, f *Failure) {
	authz := r.Header.Values("Authorization")
	xkey := r.Header.Values("X-Api-Key")
	if len(authz) > 1 || len(xkey) > 1 {
		return "", false, a.invalid("invalid_request", "more than one credential presented", "repeated Authorization or X-API-Key header")
	}
	if len(authz) == 1 {
		if len(xkey) == 1 {
			return "", false, a.invalid("invalid_request", "more than one credential presented", "both Authorization and X-API-Key headers")
		}
		scheme, rest, _ := strings.Cut(strings.TrimSpace(authz[0]), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return "", false, a.missing("unsupported authorization scheme")
		}
		tok = strings.TrimSpace(rest)
		if tok == "" {
			return "", false, a.invalid("invalid_request", "empty bearer token", "Authorization: Bearer without a token")
		}
		return tok, false, nil
	}
	if len(xkey) == 1 {
		if len(a.keys) == 0 {
			return "", false, a.missing("X-API-Key presented but no API keys are configured")
		}
		tok = strings.TrimSpace(xkey[0])
		if tok == "" {
			return "", false, a.invalid("invalid_request", "empty API key", "empty X-API-Key header")
		}
		return tok, true, nil
	}
	return "", false, a.missing("no credentials")
}

// missing is the 401 for a request without usable credentials: no error code.
func (a *Authenticator) missing(reason string) *Failure {
	var scopes []string
	if a.jwt != nil {
		scopes = a.jwt.requiredScopes
	}
	return &Failure{
		Status:          http.StatusUnauthorized,
		WWWAuthenticate: a.challenge("", "", scopes),
		Message:         "authentication required",
		Reason:          reason,
	}
}

// invalid is the 401 for credentials that were presented but are not good.
func (a *Authenticator) invalid(code, msg, reason string) *Failure {
	var scopes []string
	if a.jwt != nil {
		scopes = a.jwt.requiredScopes
	}
	return &Failure{
		Status:          http.StatusUnauthorized,
		WWWAuthenticate: a.challenge(code, msg, scopes),
		Message:         msg,
		Reason:          reason,
	}
}

// challenge formats a Bearer challenge (RFC 6750 §3, RFC 9728 §5.1).
func (a *Authenticator) challenge(code, desc string, scopes []string) string {
	var params []string
	if code != "" {
		params = append(params, "error="+quote(code))
		if desc != "" {
			params = append(params, "error_description="+quote(desc))
		}
	}
	if len(scopes) > 0 {
		params = append(params, "scope="+quote(strings.Join(scopes, " ")))
	}
	if a.metaURL != "" && a.jwt != nil {
		params = append(params, "resource_metadata="+quote(a.metaURL))
	} else {
		params = append([]string{`realm="mcp-proxy"`}, params...)
	}
	return "Bearer " + strings.Join(params, ", ")
}

// quote makes s a quoted-string. The values we send are ASCII; anything else is dropped
// rather than risk a malformed header.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func missingScopes(p *principal.Principal, required []string) []string {
	var missing []string
	for _, s := range required {
		if !slices.Contains(p.Scopes, s) {
			missing = append(missing, s)
		}
	}
	return missing
}
