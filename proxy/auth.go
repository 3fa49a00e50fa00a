package proxy

import (
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/auth"
	"github.com/mcp-proxy/mcp-proxy/config"
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
