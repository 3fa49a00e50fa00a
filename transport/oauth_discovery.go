package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// challenge is what a 401 or 403 answer's WWW-Authenticate header says (RFC 6750 §3,
// RFC 9728 §5.1).
type challenge struct {
	bearer           bool   // the answer had a Bearer challenge at all
	resourceMetadata string // URL of the protected resource metadata
	scope            string // space-separated scopes the resource wants
	err              string // "invalid_token", "insufficient_scope", ...
}

// parseChallenge reads the Bearer challenge of a WWW-Authenticate header (other schemes
// and unknown parameters are ignored).
func parseChallenge(h http.Header) challenge {
	var c challenge
	for _, v := range h.Values("WWW-Authenticate") {
		s := strings.TrimSpace(v)
		if len(s) < 6 || !strings.EqualFold(s[:6], "bearer") {
			continue
		}
		c.bearer = true
		for k, val := range authParams(s[6:]) {
			switch k {
			case "resource_metadata":
				c.resourceMetadata = val
			case "scope":
				c.scope = val
			case "error":
				c.err = val
			}
		}
		break
	}
	return c
}

// authParams parses `k=v, k="quoted \" v"` auth-params.
func authParams(s string) map[string]string {
	out := map[string]string{}
	for {
		s = strings.TrimLeft(s, " \t,")
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return out
		}
		key := strings.ToLower(strings.TrimSpace(s[:eq]))
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			val, s = b.String(), s[min(i+1, len(s)):]
		} else {
			end := strings.IndexAny(s, ", \t")
			if end < 0 {
				end = len(s)
			}
			val, s = s[:end], s[end:]
		}
		out[key] = val
	}
}

// resourceMetadata is the protected resource metadata (RFC 9728) the proxy reads.
type resourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// asMetadata is the authorization server metadata (RFC 8414, OpenID Connect Discovery)
// the proxy reads.
type asMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	CIMDSupported                     bool     `json:"client_id_metadata_document_supported"`
	IssParameterSupported             bool     `json:"authorization_response_iss_parameter_supported"`
}

// errNotFound marks a metadata document that is not there (any 4xx), so the next
// well-known location is tried.
var errNotFound = errors.New("not found")

// maxMetadata bounds a metadata document or token response.
const maxMetadata = 1 << 20

// getJSON fetches url and decodes a JSON object into v.
func getJSON(ctx context.Context, hc *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadata))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return fmt.Errorf("GET %s: HTTP %d: %w", u, resp.StatusCode, errNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: not a JSON metadata document: %w", u, err)
	}
	return nil
}

// fetchResourceMetadata finds the protected resource metadata of resource: at the URL
// the challenge named, else at the path-aware well-known URI, else at the root one
// (RFC 9728 §3.1). It returns nil without error when there is none (a 2025-03-26
// server). The metadata's resource must be the resource itself or a parent of it on
// the same origin: otherwise the document speaks for someone else, and its
// authorization server must not be given our grant.
func (o *OAuth) fetchResourceMetadata(ctx context.Context, ch challenge, resource *url.URL) (*resourceMetadata, error) {
	var tries []string
	if ch.resourceMetadata != "" {
		tries = append(tries, ch.resourceMetadata)
	}
	base := resource.Scheme + "://" + resource.Host
	if p := strings.TrimSuffix(resource.EscapedPath(), "/"); p != "" {
		tries = append(tries, base+"/.well-known/oauth-protected-resource"+p)
	}
	tries = append(tries, base+"/.well-known/oauth-protected-resource")
	var last error
	for _, u := range tries {
		var m resourceMetadata
		err := getJSON(ctx, o.http, u, &m)
		if errors.Is(err, errNotFound) {
			last = err
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("fetching protected resource metadata: %w", err)
		}
		if err := checkResource(m.Resource, resource); err != nil {
			return nil, err
		}
		if len(m.AuthorizationServers) == 0 {
			return nil, fmt.Errorf("the protected resource metadata at %s names no authorization server", u)
		}
		return &m, nil
	}
	if ch.resourceMetadata != "" {
		// The server pointed at a document that is not there: say so rather than guess.
		return nil, fmt.Errorf("fetching protected resource metadata: %w", last)
	}
	return nil, nil
}

// checkResource verifies that the metadata's resource identifier covers the upstream's
// URL: the same scheme and host, and a path that is the URL's path or a parent of it.
func checkResource(got string, resource *url.URL) error {
	u, err := url.Parse(got)
	if got == "" || err != nil {
		return fmt.Errorf("the protected resource metadata has no valid resource identifier (%q)", got)
	}
	p, want := strings.TrimSuffix(u.Path, "/"), strings.TrimSuffix(resource.Path, "/")
	if !strings.EqualFold(u.Scheme, resource.Scheme) || !strings.EqualFold(u.Host, resource.Host) ||
		(p != want && !strings.HasPrefix(want, p+"/")) {
		return fmt.Errorf("the protected resource metadata is for %q, not for %s: refusing to authorize", got, resource)
	}
	return nil
}

// fetchASMetadata reads the metadata of the authorization server with this issuer
// identifier from the well-known URIs the MCP specification lists, in its order
// (RFC 8414 §3.1 path insertion, then OpenID Connect discovery both ways). The issuer
// in the document must be the identifier exactly (RFC 8414 §3.3). It returns nil without
// error when no document exists.
func fetchASMetadata(ctx context.Context, hc *http.Client, issuer string) (*asMetadata, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("invalid authorization server %q", issuer)
	}
	if err := checkSecure(issuer); err != nil {
		return nil, err
	}
	base := u.Scheme + "://" + u.Host
	var tries []string
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		tries = []string{
			base + "/.well-known/oauth-authorization-server" + p,
			base + "/.well-known/openid-configuration" + p,
			base + p + "/.well-known/openid-configuration",
		}
	} else {
		tries = []string{base + "/.well-known/oauth-authorization-server", base + "/.well-known/openid-configuration"}
	}
	for _, t := range tries {
		var m asMetadata
		err := getJSON(ctx, hc, t, &m)
		if errors.Is(err, errNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("fetching authorization server metadata: %w", err)
		}
		if m.Issuer != issuer {
			return nil, fmt.Errorf("the authorization server metadata at %s names issuer %q, not %q: refusing to use it", t, m.Issuer, issuer)
		}
		if m.AuthorizationEndpoint == "" && m.TokenEndpoint == "" {
			return nil, fmt.Errorf("the authorization server metadata at %s has no endpoints", t)
		}
		for _, e := range []string{m.AuthorizationEndpoint, m.TokenEndpoint, m.RegistrationEndpoint} {
			if err := checkSecure(e); err != nil {
				return nil, fmt.Errorf("the authorization server metadata at %s: %w", t, err)
			}
		}
		return &m, nil
	}
	return nil, nil
}

// TokenEndpointOf reads the metadata of the authorization server with this issuer
// identifier (RFC 8414, then OpenID Connect discovery, as fetchASMetadata: the document
// must name the issuer exactly, its endpoints be https or on a loopback address) for its
// token endpoint: where an ID-JAG is presented.
func TokenEndpointOf(ctx context.Context, hc *http.Client, issuer string) (string, error) {
	as, err := fetchASMetadata(ctx, hc, issuer)
	if err != nil {
		return "", err
	}
	if as == nil || as.TokenEndpoint == "" {
		return "", fmt.Errorf("no authorization server metadata with a token endpoint for %s", issuer)
	}
	return as.TokenEndpoint, nil
}

// checkSecure refuses an authorization server URL that is not https, unless it is on a
// loopback address (OAuth 2.1 §1.5: codes, secrets and tokens travel only over TLS).
func checkSecure(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("invalid URL %q", raw)
	}
	if u.Scheme == "https" {
		return nil
	}
	h := u.Hostname()
	if ip := net.ParseIP(h); u.Scheme == "http" && (h == "localhost" || (ip != nil && ip.IsLoopback())) {
		return nil
	}
	return fmt.Errorf("refusing the non-https authorization server URL %q", raw)
}

// AuthServer is an upstream's authorization server as the proxy found it, for the
// per-user authorizations of package credential (DiscoverAuthServer).
type AuthServer struct {
	Issuer                string
	AuthorizationEndpoint string
	TokenEndpoint         string
	RevocationEndpoint    string // "" when it has none
	// Resource is the resource identifier to ask tokens for (RFC 8707): the protected
	// resource metadata's, else the upstream's URL.
	Resource              string
	ScopesSupported       []string
	IssParameterSupported bool // RFC 9207: an authorization response must carry iss
	// PKCE says the server advertises S256 (code_challenge_methods_supported).
	PKCE bool
	meta *asMetadata
}

// DiscoverAuthServer finds the authorization server of the upstream o is for, as the
// MCP authorization specification has clients do it, without a 401 to start from: the
// protected resource metadata at its well-known URIs (RFC 9728), else the 2025-03-26
// fallback of the upstream's origin, then the server's metadata (RFC 8414, OpenID
// Connect discovery).
func (o *OAuth) DiscoverAuthServer(ctx context.Context) (*AuthServer, error) {
	prm, err := o.fetchResourceMetadata(ctx, challenge{}, o.resource)
	if err != nil {
		return nil, err
	}
	issuer, target := o.resource.Scheme+"://"+o.resource.Host, canonicalResource(o.resource)
	if prm != nil {
		issuer, target = prm.AuthorizationServers[0], prm.Resource
	}
	as, err := fetchASMetadata(ctx, o.http, issuer)
	if err != nil {
		return nil, err
	}
	if as == nil {
		return nil, fmt.Errorf("no authorization server metadata for %s", issuer)
	}
	if as.AuthorizationEndpoint == "" || as.TokenEndpoint == "" {
		return nil, fmt.Errorf("the authorization server %s has no authorization or token endpoint", as.Issuer)
	}
	if err := checkSecure(as.RevocationEndpoint); err != nil {
		return nil, err
	}
	a := &AuthServer{Issuer: as.Issuer, AuthorizationEndpoint: as.AuthorizationEndpoint, TokenEndpoint: as.TokenEndpoint,
		RevocationEndpoint: as.RevocationEndpoint, Resource: target, ScopesSupported: as.ScopesSupported,
		IssParameterSupported: as.IssParameterSupported, meta: as}
	for _, m := range as.CodeChallengeMethodsSupported {
		a.PKCE = a.PKCE || m == "S256"
	}
	return a, nil
}

// RegisteredClient is the proxy's identity at an authorization server.
type RegisteredClient struct {
	ID, Secret string
	AuthMethod string // client_secret_basic, client_secret_post or none
}

// RegisterClient returns the proxy's client at as for redirectURI: the configured
// client_id, a Client ID Metadata Document where supported, else a dynamic registration
// (RFC 7591), kept per authorization server.
func (o *OAuth) RegisterClient(ctx context.Context, as *AuthServer, redirectURI string) (RegisteredClient, error) {
	c, err := o.clientFor(ctx, as.meta, redirectURI)
	if err != nil {
		return RegisteredClient{}, err
	}
	return RegisteredClient{ID: c.id, Secret: c.secret, AuthMethod: c.authMethod}, nil
}
