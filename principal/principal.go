// Package principal is who a request is made for: the identity the front end
// authenticated (an API key's owner, a token's subject, the configured stdio user), with
// the groups and scopes that policy rules match on. It is data only, shared by the
// front end, the authenticator and the policy chain.
package principal

import (
	"context"
	"fmt"
	"slices"
)

// Principal is one authenticated identity.
type Principal struct {
	Name   string   // unique: the API key's name, the token's subject, the stdio principal
	Groups []string // from the key's config or the token's groups claim
	Scopes []string // OAuth scopes granted to the token
	Via    string   // how it was established: "api_key", "jwt", "stdio", "anonymous"
	// Token is the access token the principal was authenticated with (a validated JWT;
	// empty for API keys and the stdio user), for one use: a token exchange for an
	// upstream in credentials mode "exchange". It prints, marshals and logs as
	// "[redacted]"; only Reveal gives its value.
	Token Secret
}

// Secret is a credential that must not be shown: every way of printing or encoding it
// (fmt's verbs, JSON, text, zerolog's Interface and Stringer) gives "[redacted]", or ""
// when it is empty. Reveal returns the value, for the one place that sends it.
type Secret struct{ v string }

// NewSecret wraps v.
func NewSecret(v string) Secret { return Secret{v} }

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.v == "" }

const redacted = "[redacted]"

func (s Secret) shown() string {
	if s.v == "" {
		return ""
	}
	return redacted
}

// String implements fmt.Stringer: never the value.
func (s Secret) String() string { return s.shown() }

// GoString implements fmt.GoStringer (%#v): never the value.
func (s Secret) GoString() string { return `principal.Secret("` + s.shown() + `")` }

// Format implements fmt.Formatter: every verb prints what String does.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(s.shown())) }

// MarshalJSON never encodes the value.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.shown() + `"`), nil }

// MarshalText never encodes the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.shown()), nil }

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
