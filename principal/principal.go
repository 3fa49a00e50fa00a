// Package principal is who a request is made for: the identity the front end
// authenticated (an API key's owner, a token's subject, the configured stdio user), with
// the groups and scopes that policy rules match on. It is data only, shared by the
// front end, the authenticator and the policy chain.
package principal

import (
	"context"
	"slices"
)

// Principal is one authenticated identity.
type Principal struct {
	Name   string   // unique: the API key's name, the token's subject, the stdio principal
	Groups []string // from the key's config or the token's groups claim
	Scopes []string // OAuth scopes granted to the token
	Via    string   // how it was established: "api_key", "jwt", "stdio", "anonymous"
}

// Anonymous is the principal of requests on a front end without authentication.
var Anonymous = &Principal{Name: "anonymous", Via: "anonymous"}

// InGroup reports whether p belongs to group g.
func (p *Principal) InGroup(g string) bool { return p != nil && slices.Contains(p.Groups, g) }

// HasScope reports whether p was granted scope s.
func (p *Principal) HasScope(s string) bool { return p != nil && slices.Contains(p.Scopes, s) }

type key struct{}

// With returns ctx carrying p.
func With(ctx context.Context, p *Principal) context.Context { return context.WithValue(ctx, key{}, p) }

// From returns the principal ctx carries, or nil.
func From(ctx context.Context) *Principal {
	p, _ := ctx.Value(key{}).(*Principal)
	return p
}
