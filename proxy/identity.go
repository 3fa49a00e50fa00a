package proxy

import (
	"fmt"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/admin"
	"github.com/mcp-proxy/mcp-proxy/config"
)

// Everything kept per principal is keyed by its identity (principal.ID), which says how
// it was established: "api_key:alice" and "jwt:https://idp.example.com#alice" are two
// people. People name principals more briefly (the CLI's --principal, the keys of a
// secrets file); identities turns what they write into an identity, by what the
// configuration can authenticate.

// identities is what of a configuration decides whose a name is (its auth block and
// stdio principal; config.Config.IdentitiesNamed, CanonicalIdentity).
type identities struct {
	cfg config.Config
}

func identitiesOf(cfg *config.Config) *identities {
	return &identities{cfg: config.Config{Auth: cfg.Auth, Proxy: config.Proxy{Principal: cfg.Proxy.Principal}}}
}

// canonical is the identity s names when it is written as one: as it is, with the jwt
// block's issuer for "jwt:NAME". ok is false for a bare name.
func (ids *identities) canonical(s string) (string, bool) { return ids.cfg.CanonicalIdentity(s) }

// resolve is the identity an operator means by s (the CLI's --principal): an identity
// as canonical reads it, else a bare name that exactly one way of authenticating of the
// configuration could establish (an API key of that name, a JWT's subject with a jwt
// block, the stdio user). A bare name two ways could establish is ambiguous: the error
// (an *admin.InputError) lists the identities to choose from.
func (ids *identities) resolve(s string) (string, error) {
	if id, ok := ids.canonical(s); ok {
		return id, nil
	}
	cands := ids.cfg.IdentitiesNamed(s)
	switch len(cands) {
	case 1:
		return cands[0], nil
	case 0:
		return "", &admin.InputError{Msg: fmt.Sprintf("no API key, jwt block or stdio principal of this proxy establishes a principal named %q: "+
			"name it by its identity, as credentials list shows it (api_key:%s, jwt:%s, stdio:%s)", s, s, s, s)}
	}
	return "", &admin.InputError{Msg: fmt.Sprintf("principal %q is ambiguous: say which, %s", s, strings.Join(cands, " or "))}
}

// secretsKey is the identity a key of a secrets file names: an identity (canonical);
// a bare name is refused, since it could mean the API key or the token of that name.
func (ids *identities) secretsKey(key string) (string, error) {
	if id, ok := ids.canonical(key); ok {
		return id, nil
	}
	return "", fmt.Errorf("principal %q is not an identity: write \"api_key:%s\", \"jwt:%s\" (the jwt block's issuer) or \"stdio:%s\"", key, key, key, key)
}
