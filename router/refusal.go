package router

import (
	"context"
	"encoding/json"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

// A Refusal is a request refused before it was routed: the front end could not take it
// as a request (duplicate member names, a body over the size limit, a malformed
// envelope, a 2026-07-28 request whose headers or _meta are wrong, a request outside
// its session's rules) or the router could not resolve its params. It never reaches
// the middleware chain, so the policy's audit learns of it here (UseRefusals). Nothing
// in it is decoded beyond what the refusal needed: the request is not interpreted.
type Refusal struct {
	// Methods are the methods the refused bytes name (see jsonrpc.Refused: usually one;
	// several when the request named more than one, which is itself why it was refused).
	Methods []string
	// Principal is who sent it, when the front end authenticated the sender.
	Principal *principal.Principal
	// Client is the name the client gave itself, when its session has one.
	Client string
	// Reason is what the client was told (the refusal's error message).
	Reason string
	// Arguments are the request's params.arguments exactly as received, when they could
	// be found; nil otherwise. Raw bytes of a refused request: never to be recorded as
	// they are (they cannot be redacted reliably), only as the audit's arguments mode
	// allows of what it cannot interpret (a hash).
	Arguments json.RawMessage
}

// RefusalHook is told of each refused request (see Refusal); it must be quick.
type RefusalHook func(ctx context.Context, ref *Refusal)

// UseRefusals installs the hook told of refused requests (nil: none), replacing the one
// installed before. Like Use, it is safe while requests are served.
func (r *Router) UseRefusals(h RefusalHook) {
	if h == nil {
		r.refusals.Store(nil)
		return
	}
	r.refusals.Store(&h)
}

// Refused tells the refusal hook, if any, of ref.
func (r *Router) Refused(ctx context.Context, ref *Refusal) {
	if h := r.refusals.Load(); h != nil {
		(*h)(ctx, ref)
	}
}

// WantsRefusals reports whether a refusal hook is installed, so that a front end reads
// nothing of what it refuses when no one is told.
func (r *Router) WantsRefusals() bool { return r.refusals.Load() != nil }

// refuse answers req, refused before routing because its params do not say what it is
// about, with e, and tells the refusal hook.
func (r *Router) refuse(ctx context.Context, req *Request, e *jsonrpc.Error, reply Reply) {
	if h := r.refusals.Load(); h != nil {
		ref := &Refusal{Methods: []string{req.Method}, Principal: req.Principal, Reason: e.Message}
		if len(req.Params) > 0 && req.Params[0] == '{' {
			ref.Arguments, _, _ = jsonx.Get(req.Params, "arguments")
		}
		if req.Meta != nil && len(req.Meta.Info) > 0 {
			ref.Client, _, _ = jsonx.GetString(req.Meta.Info, "name")
		}
		(*h)(ctx, ref)
	}
	reply(nil, e)
}
