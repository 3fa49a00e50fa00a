package proxy

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/auth"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// newAuthenticator builds the HTTP front end's authentication from the auth block; nil
// when there is none. A listener bound beyond loopback without authentication is
// refused unless insecure_no_auth says otherwise.
func newAuthenticator(cfg *config.Config, l config.Listen, log zerolog.Logger) (*auth.Authenticator, error) {
	if cfg.Auth == nil {
		if problem := config.Unauthenticated(l); problem != "" { // a file's is reported by config at file:line; the bridge's flags reach this
			return nil, errors.New(problem)
		}
		return nil, nil
	}
	ac := auth.Config{Resource: cfg.Auth.Resource}
	for _, k := range cfg.Auth.APIKeys {
		ac.APIKeys = append(ac.APIKeys, auth.APIKey{Name: k.Name, Groups: k.Groups, SHA256: k.SHA256, Token: k.Token})
	}
	if j := cfg.Auth.JWT; j != nil {
		ac.JWT = &auth.JWTConfig{Issuer: j.Issuer, JWKSURL: j.JWKSURL, Audience: j.Audience, PrincipalClaim: j.PrincipalClaim,
			GroupsClaim: j.GroupsClaim, RequiredScopes: j.RequiredScopes, Algorithms: j.Algorithms, Leeway: j.Leeway,
			AuthorizationServers: j.AuthorizationServers}
	}
	a, err := auth.New(ac, log)
	if err != nil {
		return nil, fmt.Errorf("%s: auth: %w", cfg.Filename, err)
	}
	return a, nil
}

// VisibleTools is the merged tool catalogue as the principal name sees it under the
// policy (what `mcp-proxy tools --as` prints). name is an identity ("api_key:alice",
// "jwt:alice" for the jwt block's issuer) or a bare name, taken as the one principal of
// that name the configuration can establish (see PrincipalIdentities; a name none or
// several could be is shown as a principal of no known way: only the rules about names
// and groups apply to it). Its groups are those given, plus the auth block's API key's
// of that name and the proxy block's principal_groups for its stdio principal.
func (p *Proxy) VisibleTools(name string, groups ...string) []router.Tool {
	return visibleTools(p.e.r, principalFor(p.cfg, name, groups), "", p.e.r.Tools())
}

// PrincipalIdentities lists the identities an operator may mean by name (`tools
// --as`): the identity as written ("jwt:NAME" with the jwt block's issuer), or those of
// the principals of that bare name the configuration can establish (an API key, a jwt
// block's subject, the stdio principal). More than one: the name is ambiguous.
func (p *Proxy) PrincipalIdentities(name string) []string {
	if id, ok := p.cfg.CanonicalIdentity(name); ok {
		return []string{id}
	}
	return p.cfg.IdentitiesNamed(name)
}

// EndpointTools is the catalogue of the endpoint named endpoint (in search mode: every
// tool its search may find, not what a session lists), as the principal name sees it
// under the policy ("": everything), as VisibleTools finds the principal. Nil for an
// endpoint the configuration does not have.
func (p *Proxy) EndpointTools(endpoint, name string, groups ...string) []router.Tool {
	tools, ok := p.e.r.EndpointTools(endpoint)
	if !ok || name == "" {
		return tools
	}
	return visibleTools(p.e.r, principalFor(p.cfg, name, groups), endpoint, tools)
}

// principalFor is the principal `tools --as NAME` shows the catalogue for (see
// VisibleTools), with its API key's groups or the stdio principal's, plus the groups
// given.
func principalFor(cfg *config.Config, name string, groups []string) *principal.Principal {
	p := &principal.Principal{Name: name, Groups: slices.Clone(groups)}
	id, ok := cfg.CanonicalIdentity(name)
	if !ok {
		if ids := cfg.IdentitiesNamed(name); len(ids) == 1 {
			id, ok = ids[0], true
		}
	}
	if ok {
		p.Via, p.Issuer, p.Name, _ = principal.ParseIdentity(id)
	}
	if p.Via == "" || p.Via == principal.ViaAPIKey {
		if cfg.Auth != nil {
			for _, k := range cfg.Auth.APIKeys {
				if k.Name == p.Name {
					p.Groups = append(p.Groups, k.Groups...)
				}
			}
		}
	}
	if (p.Via == "" || p.Via == principal.ViaStdio) && p.Name == cfg.Proxy.Principal {
		p.Groups = append(p.Groups, cfg.Proxy.PrincipalGroups...)
	}
	return p.Identify()
}

// visibleTools filters the catalogue to what p may see under r's policy, through
// endpoint ("": none).
func visibleTools(r *router.Router, p *principal.Principal, endpoint string, tools []router.Tool) []router.Tool {
	g := r.Guard()
	if g == nil {
		return tools
	}
	req := &router.Request{Principal: p, Endpoint: endpoint}
	out := tools[:0:0]
	for _, t := range tools {
		if g.Visible(req, &router.Target{Kind: router.TargetTool, Name: t.Name, Original: t.OriginalName, Upstream: t.Upstream, Raw: t.Raw}) {
			out = append(out, t)
		}
	}
	return out
}
