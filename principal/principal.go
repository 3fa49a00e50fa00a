// Package principal is who a request is made for: the identity the front end
// authenticated (an API key's owner, a token's subject, the configured stdio user), with
// the groups and scopes that policy rules match on. It is data only, shared by the
// front end, the authenticator and the policy chain.
package principal

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Ways a principal is established (Principal.Via).
const (
	ViaAPIKey    = "api_key"
	ViaJWT       = "jwt"
	ViaStdio     = "stdio"
	ViaAnonymous = "anonymous"
)

// Principal is one authenticated identity.
type Principal struct {
	Name   string   // the API key's name, the token's subject (or principal claim), the stdio principal
	Groups []string // from the key's config or the token's groups claim
	Scopes []string // OAuth scopes granted to the token
	Via    string   // how it was established: ViaAPIKey, ViaJWT, ViaStdio, ViaAnonymous
	// Issuer is the authorization server that issued the principal's token (Via
	// ViaJWT): part of its identity, so that two issuers' subjects never meet.
	Issuer string
	// Token is the access token the principal was authenticated with (a validated JWT;
	// empty for API keys and the stdio user), for one use: a token exchange for an
	// upstream in credentials mode "exchange". It prints, marshals and logs as
	// "[redacted]"; only Reveal gives its value.
	Token Secret
	// TokenExpiry is when Token expires (its exp claim); zero without a token. What is
	// obtained with the token (an exchange) is not used past it.
	TokenExpiry time.Time

	id string // ID, when Identify computed it
}

// ID is the principal's identity: its name qualified by how it was established, so that
// names given by two ways of authenticating never meet (an API key named "alice" is not
// a token whose subject is "alice"): "api_key:alice", "jwt:https://idp.example.com#alice"
// (the issuer, then the name), "stdio:me", "anonymous:anonymous". Everything the proxy
// keeps per principal (credentials, per-principal upstream sessions, tasks, sessions'
// owners) is keyed by it. It allocates nothing once Identify ran.
func (p *Principal) ID() string {
	if p.id != "" {
		return p.id
	}
	return Identity(p.Via, p.Issuer, p.Name)
}

// Identify computes p's ID once, so that ID is free per call; authenticators call it
// before they share p. It returns p.
func (p *Principal) Identify() *Principal {
	p.id = Identity(p.Via, p.Issuer, p.Name)
	return p
}

// Identity is the ID of the principal named name, established via (from issuer, for
// ViaJWT). A principal established no known way (Via ""; made up by a test, or the CLI's
// `tools --as`) is its name.
func Identity(via, issuer, name string) string {
	switch {
	case via == "":
		return name
	case issuer != "":
		return via + ":" + issuer + "#" + name
	}
	return via + ":" + name
}

// ParseIdentity reads an ID: the way it was established (one of the Via* constants)
// before the first colon, then for ViaJWT the issuer up to the first '#' (an issuer has
// no fragment) when there is one, then the name. ok is false when s does not begin
// with a known way: a bare name.
func ParseIdentity(s string) (via, issuer, name string, ok bool) {
	via, rest, found := strings.Cut(s, ":")
	if !found || rest == "" {
		return "", "", "", false
	}
	switch via {
	case ViaAPIKey, ViaStdio, ViaAnonymous:
		return via, "", rest, true
	case ViaJWT:
		if iss, n, hasIss := strings.Cut(rest, "#"); hasIss && strings.Contains(iss, ":") && n != "" {
			return via, iss, n, true
		}
		return via, "", rest, true
	}
	return "", "", "", false
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
var Anonymous = (&Principal{Name: "anonymous", Via: ViaAnonymous}).Identify()

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
