package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

// JWTConfig configures validation of OAuth 2.1 access tokens in JWT form (RFC 9068
// style) issued by one authorization server.
type JWTConfig struct {
	Issuer   string // required; the token's iss must equal it exactly
	JWKSURL  string // required; https, or http to a loopback host
	Audience string // the token's aud must contain it; default: Config.Resource

	PrincipalClaim string // the principal's name; default "sub"
	// GroupsClaim holds the principal's groups, an array of strings or a space-separated
	// string; default "groups". A dotted name ("realm_access.roles") is looked up as a
	// path through nested objects when no top-level claim has that exact name.
	GroupsClaim string

	// RequiredScopes must all be granted ("scope" or "scp" claim) or the request gets a
	// 403 insufficient_scope. They are also sent as scope="…" in every challenge.
	RequiredScopes []string
	// ScopesSupported is scopes_supported in the resource metadata; default RequiredScopes.
	ScopesSupported []string

	// Algorithms allowed in the token's alg header; default RS256, ES256, PS256, EdDSA.
	// Only asymmetric algorithms (RS*, PS*, ES*, EdDSA) may be configured.
	Algorithms []string
	// Leeway for exp, nbf and iat; 0 means the default 60s, a negative value means none.
	Leeway time.Duration

	// AuthorizationServers for the resource metadata; default [Issuer].
	AuthorizationServers []string

	HTTPClient *http.Client // for the JWKS; default: a client with a 10s timeout
	// RefreshInterval is how often the JWKS is refetched; default 10 minutes.
	RefreshInterval time.Duration
	// MinRefreshInterval bounds refetches triggered by a token with an unknown key id
	// (and retries after a failed fetch), so that bad tokens cannot hammer the issuer;
	// default 30s.
	MinRefreshInterval time.Duration
}

// Defaults.
const (
	DefaultLeeway             = 60 * time.Second
	DefaultRefreshInterval    = 10 * time.Minute
	DefaultMinRefreshInterval = 30 * time.Second
	DefaultJWKSTimeout        = 10 * time.Second
)

// DefaultAlgorithms are the token signature algorithms allowed when none are configured.
var DefaultAlgorithms = []string{"RS256", "ES256", "PS256", "EdDSA"}

// maxTokenLen bounds the JWTs we parse; real access tokens are a few KB at most.
const maxTokenLen = 32 << 10

var asymmetricAlgs = map[jose.SignatureAlgorithm]bool{
	jose.RS256: true, jose.RS384: true, jose.RS512: true,
	jose.PS256: true, jose.PS384: true, jose.PS512: true,
	jose.ES256: true, jose.ES384: true, jose.ES512: true,
	jose.EdDSA: true,
}

type jwtValidator struct {
	issuer, audience           string
	principalClaim, groupClaim string
	requiredScopes, scopesSup  []string
	authServers                []string
	algs                       []jose.SignatureAlgorithm
	leeway                     time.Duration
	keys                       *jwksCache

	// Verified tokens, by their SHA-256: a signature check costs 100–200 µs, and a
	// client sends the same token on every request. An entry lives until the token
	// expires, and at most verifiedTTL (a key the issuer withdraws stops being trusted
	// within that time).
	cacheMu       sync.Mutex
	cache         map[[32]byte]verifiedToken
	verifications atomic.Int64 // signature checks done (for tests and metrics)
}

type verifiedToken struct {
	p     *principal.Principal
	until time.Time
}

const (
	verifiedTTL = 5 * time.Minute
	maxVerified = 4096
)

// cached returns the principal of a token verified before and still fresh.
func (v *jwtValidator) cached(key [32]byte, now time.Time) *principal.Principal {
	v.cacheMu.Lock()
	defer v.cacheMu.Unlock()
	e, ok := v.cache[key]
	if !ok {
		return nil
	}
	if !now.Before(e.until) {
		delete(v.cache, key)
		return nil
	}
	return e.p
}

func (v *jwtValidator) remember(key [32]byte, p *principal.Principal, until time.Time) {
	v.cacheMu.Lock()
	defer v.cacheMu.Unlock()
	if v.cache == nil {
		v.cache = map[[32]byte]verifiedToken{}
	}
	if len(v.cache) >= maxVerified {
		now := time.Now()
		for k, e := range v.cache {
			if !now.Before(e.until) {
				delete(v.cache, k)
			}
		}
		for k := range v.cache { // still full: forget an arbitrary eighth
			if len(v.cache) < maxVerified*7/8 {
				break
			}
			delete(v.cache, k)
		}
	}
	v.cache[key] = verifiedToken{p: p, until: until}
}

func newJWTValidator(c JWTConfig, resource string, log zerolog.Logger) (*jwtValidator, error) {
	v := &jwtValidator{
		issuer:         c.Issuer,
		audience:       c.Audience,
		principalClaim: c.PrincipalClaim,
		groupClaim:     c.GroupsClaim,
		requiredScopes: slices.Clone(c.RequiredScopes),
		scopesSup:      slices.Clone(c.ScopesSupported),
		authServers:    slices.Clone(c.AuthorizationServers),
		leeway:         c.Leeway,
	}
	if v.issuer == "" {
		return nil, errors.New("auth: jwt: issuer is required")
	}
	if v.audience == "" {
		v.audience = resource
	}
	if v.principalClaim == "" {
		v.principalClaim = "sub"
	}
	if v.groupClaim == "" {
		v.groupClaim = "groups"
	}
	for _, s := range v.requiredScopes {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			return nil, fmt.Errorf("auth: jwt: required scope %q is not a valid scope token", s)
		}
	}
	if len(v.scopesSup) == 0 {
		v.scopesSup = v.requiredScopes
	}
	if len(v.authServers) == 0 {
		v.authServers = []string{v.issuer}
	}
	switch {
	case v.leeway == 0:
		v.leeway = DefaultLeeway
	case v.leeway < 0:
		v.leeway = 0
	}
	algs := c.Algorithms
	if len(algs) == 0 {
		algs = DefaultAlgorithms
	}
	for _, a := range algs {
		alg := jose.SignatureAlgorithm(a)
		if !asymmetricAlgs[alg] {
			return nil, fmt.Errorf("auth: jwt: algorithm %q is not allowed (only RS256/384/512, PS256/384/512, ES256/384/512 and EdDSA; never none or HMAC)", a)
		}
		if !slices.Contains(v.algs, alg) {
			v.algs = append(v.algs, alg)
		}
	}
	if err := checkJWKSURL(c.JWKSURL); err != nil {
		return nil, err
	}
	client := c.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: DefaultJWKSTimeout}
	}
	every, minEvery := c.RefreshInterval, c.MinRefreshInterval
	if every <= 0 {
		every = DefaultRefreshInterval
	}
	if minEvery <= 0 {
		minEvery = DefaultMinRefreshInterval
	}
	v.keys = newJWKSCache(c.JWKSURL, client, every, minEvery, log)
	return v, nil
}

// checkJWKSURL requires https, except to a loopback host (a local issuer, tests): keys
// fetched over plain HTTP from elsewhere could be replaced in transit.
func checkJWKSURL(s string) error {
	if s == "" {
		return errors.New("auth: jwt: jwks_url is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("auth: jwt: jwks_url %q: %v", s, err)
	}
	if u.Host == "" {
		return fmt.Errorf("auth: jwt: jwks_url %q is not an absolute URL", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		h := u.Hostname()
		if ip := net.ParseIP(h); h == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return fmt.Errorf("auth: jwt: jwks_url %q must use https (http is allowed only to a loopback host)", s)
	}
	return fmt.Errorf("auth: jwt: jwks_url %q must be an https URL", s)
}

// tokenError is why a JWT was rejected: msg for the client, reason for the log.
type tokenError struct{ msg, reason string }

func tokErr(msg, reason string) *tokenError { return &tokenError{msg, reason} }

// validate checks tok's signature, issuer, audience and lifetime and returns its principal.
func (v *jwtValidator) validate(tok string) (*principal.Principal, *tokenError) {
	if len(tok) > maxTokenLen {
		return nil, tokErr("invalid token", fmt.Sprintf("token of %d bytes exceeds %d", len(tok), maxTokenLen))
	}
	key := sha256.Sum256([]byte(tok))
	now := time.Now()
	if p := v.cached(key, now); p != nil {
		return p, nil
	}
	p, terr := v.verify(tok, now)
	if terr == nil {
		until := now.Add(verifiedTTL)
		if p.exp.Before(until) {
			until = p.exp
		}
		v.remember(key, p.p, until)
		return p.p, nil
	}
	return nil, terr
}

type verifiedClaims struct {
	p   *principal.Principal
	exp time.Time
}

// verify checks a token's signature and claims.
func (v *jwtValidator) verify(tok string, now time.Time) (verifiedClaims, *tokenError) {
	v.verifications.Add(1)
	fail := func(e *tokenError) (verifiedClaims, *tokenError) { return verifiedClaims{}, e }
	jws, err := jose.ParseSignedCompact(tok, v.algs)
	if err != nil {
		var bad *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &bad) {
			return fail(tokErr("token signing algorithm not allowed", err.Error()))
		}
		return fail(tokErr("malformed token", err.Error()))
	}
	if len(jws.Signatures) != 1 {
		return fail(tokErr("malformed token", "not exactly one signature"))
	}
	h := jws.Signatures[0].Protected
	alg := jose.SignatureAlgorithm(h.Algorithm)
	if !slices.Contains(v.algs, alg) { // ParseSignedCompact checked this; be explicit
		return fail(tokErr("token signing algorithm not allowed", "alg "+h.Algorithm))
	}

	cands := v.keys.candidates(h.KeyID, alg)
	if len(cands) == 0 {
		// A key we have not seen: the issuer may have rotated. Refetch (rate-limited).
		v.keys.refresh(true)
		cands = v.keys.candidates(h.KeyID, alg)
	}
	if len(cands) == 0 {
		return fail(tokErr("token signed by an unknown key", fmt.Sprintf("no %s key with kid %q in the issuer's JWKS", alg, h.KeyID)))
	}
	var payload []byte
	for _, k := range cands {
		if payload, err = jws.Verify(k.Key); err == nil {
			break
		}
	}
	if err != nil {
		return fail(tokErr("invalid token signature", fmt.Sprintf("kid %q: %v", h.KeyID, err)))
	}

	var std jwt.Claims
	var all map[string]any
	if err := json.Unmarshal(payload, &std); err != nil {
		return fail(tokErr("malformed token claims", err.Error()))
	}
	if err := json.Unmarshal(payload, &all); err != nil {
		return fail(tokErr("malformed token claims", err.Error()))
	}
	if std.Expiry == nil {
		return fail(tokErr("token has no expiry", "no exp claim"))
	}
	err = std.ValidateWithLeeway(jwt.Expected{Issuer: v.issuer, AnyAudience: jwt.Audience{v.audience}, Time: now}, v.leeway)
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return fail(tokErr("token issuer not accepted", fmt.Sprintf("iss %q, want %q", std.Issuer, v.issuer)))
	case errors.Is(err, jwt.ErrInvalidAudience):
		return fail(tokErr("token audience does not include this resource", fmt.Sprintf("aud %q, want %q", []string(std.Audience), v.audience)))
	case errors.Is(err, jwt.ErrExpired):
		return fail(tokErr("token expired", "expired at "+std.Expiry.Time().UTC().Format(time.RFC3339)))
	case errors.Is(err, jwt.ErrNotValidYet):
		return fail(tokErr("token not yet valid", "nbf "+std.NotBefore.Time().UTC().Format(time.RFC3339)))
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return fail(tokErr("token issued in the future", "iat "+std.IssuedAt.Time().UTC().Format(time.RFC3339)))
	default:
		return fail(tokErr("invalid token", err.Error()))
	}

	name, _ := lookupClaim(all, v.principalClaim).(string)
	if name == "" {
		return fail(tokErr("token has no subject", fmt.Sprintf("claim %q missing, empty or not a string", v.principalClaim)))
	}
	p := &principal.Principal{Name: name, Via: principal.ViaJWT, Issuer: v.issuer, Token: principal.NewSecret(tok), TokenExpiry: std.Expiry.Time()}
	p.Groups = claimStrings(lookupClaim(all, v.groupClaim))
	for _, c := range []string{"scope", "scp"} {
		for _, s := range claimStrings(all[c]) {
			if !slices.Contains(p.Scopes, s) {
				p.Scopes = append(p.Scopes, s)
			}
		}
	}
	p.Identify()
	return verifiedClaims{p: p, exp: std.Expiry.Time()}, nil
}

// lookupClaim returns claims[name], or for a dotted name with no such top-level claim,
// the value at that path through nested objects.
func lookupClaim(claims map[string]any, name string) any {
	if v, ok := claims[name]; ok || !strings.Contains(name, ".") {
		return v
	}
	var cur any = claims
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

// claimStrings reads a claim that is an array of strings or a space-separated string.
// Non-string array elements are ignored.
func claimStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// keyFits reports whether k may verify a signature made with alg: the right key type
// (and curve), and no conflicting alg or use in the JWK.
func keyFits(k *jose.JSONWebKey, alg jose.SignatureAlgorithm) bool {
	if k.Algorithm != "" && k.Algorithm != string(alg) {
		return false
	}
	switch key := k.Key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(string(alg), "RS") || strings.HasPrefix(string(alg), "PS")
	case *ecdsa.PublicKey:
		switch alg {
		case jose.ES256:
			return key.Curve == elliptic.P256()
		case jose.ES384:
			return key.Curve == elliptic.P384()
		case jose.ES512:
			return key.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == jose.EdDSA
	}
	return false
}

// metadataDocument is the RFC 9728 protected resource metadata.
func (v *jwtValidator) metadataDocument(resource string) []byte {
	doc := struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
		ScopesSupported        []string `json:"scopes_supported,omitempty"`
	}{resource, v.authServers, []string{"header"}, v.scopesSup}
	b, _ := json.Marshal(doc)
	return b
}
