package transport

import (
	"context"
	"net/http"
)

// Authorizer gives each request of an HTTP link its Authorization header, and renews
// the token the upstream refuses. The upstream's shared OAuth client is one; a
// principal's own credential (package credential: an exchanged token, a per-user
// grant) is another, which makes a link carry one principal's token and no one else's.
// Implementations are safe for concurrent use.
type Authorizer interface {
	// Authorization returns the token the next request carries, obtained or refreshed
	// first when needed. Nil and no error: none, the request goes without (an upstream
	// that has not asked for one). An error fails the request without sending it; a
	// *jsonrpc.Error is the call's answer as it is.
	Authorization(ctx context.Context) (*Bearer, error)
	// Renew is told that the upstream refused sent (status 401, or 403 with h's
	// insufficient_scope challenge): it obtains another token, once however many
	// requests were refused with sent, and returns nil when sending again is worth it
	// (once).
	Renew(ctx context.Context, status int, h http.Header, sent *Bearer) error
	// Accepted is told that the upstream accepted a renewed token.
	Accepted()
}

// Bearer is one access token as a request carries it. A Bearer is never modified: a
// new token is a new Bearer, so that a refusal names the one that was sent.
type Bearer struct {
	// Header is the Authorization field's value, {"Bearer <token>"}, shared by every
	// request that carries it.
	Header []string
	oauth  *oauthToken // the shared OAuth client's token it is, or nil
}

// NewBearer returns the Bearer of access token tok.
func NewBearer(tok string) *Bearer { return &Bearer{Header: []string{"Bearer " + tok}} }

// String never shows the token.
func (b *Bearer) String() string { return "bearer token (redacted)" }

var (
	_ Authorizer = (*OAuth)(nil)
)
