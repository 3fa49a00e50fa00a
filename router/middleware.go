package router

import (
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// The middleware chain is the one seam every routed request passes through on its way to
// its upstream (tools/call, prompts/get, resources/read|subscribe|unsubscribe,
// completion/complete, tasks/get|result|cancel), after the router has resolved what it is
// about and before anything reaches the upstream. The policy's stages (audit, rules,
// limits) are middlewares; plugins, metrics and tracing attach here too. Served locally
// (lists, ping, logging/setLevel) is not routed and does not pass through it; lists, and
// the front end's initialize, pass through the local chain instead (UseLocal, Local):
// what counts and traces every request, not the policy or the plugins.
//
// A middleware may refuse (reply with an error without calling next), replace the call
// (call next with a new Call built from the one it was given: never edit that one) and
// see or replace the result (call next with its own reply that calls the one it was
// given). The chain is asynchronous like Dispatch: reply is called exactly once, possibly
// later and from another goroutine, so a call costs no goroutine hand-off.

// Call is one routed request as middlewares see it.
type Call struct {
	// Method is the request's method (an mcp.Method… constant).
	Method string
	// Params are what goes upstream: the client's params with the exposed name or URI
	// already mapped to the upstream's own. Raw JSON: decode only what you need.
	Params json.RawMessage
	// Target is what the request resolved to. For tasks/* it is the task (Kind
	// TargetTask, Name the task id).
	Target *Target
	// Request is the client's request: principal, client meta, progress and input
	// channels. Read-only for middlewares.
	Request *Request

	owner *backend   // where the call goes; kept by WithParams
	local Answer     // a local call's answer (see Local); kept by WithParams
	spare *sendSpare // room for the upstream request, allocated with the call; may be nil
}

// Answer answers a request the proxy serves itself (see Local).
type Answer func(ctx context.Context, req *Request) (json.RawMessage, error)

// WithParams returns a new Call like c with other params: how a middleware rewrites a
// request.
func (c *Call) WithParams(params json.RawMessage) *Call {
	n := *c
	n.Params = params
	return &n
}

// Handler serves a routed call and calls reply exactly once with the outcome: the result,
// the error for the client (an upstream's error passes through unchanged), or
// ErrCancelled.
type Handler func(ctx context.Context, c *Call, reply Reply)

// Middleware wraps a Handler in another.
type Middleware func(next Handler) Handler

// Use installs the middleware chain, outermost first, replacing the one installed before.
// It is safe while requests are served: a call keeps the chain it started with, the next
// takes the new one (a reload switches between two calls).
func (r *Router) Use(mws ...Middleware) {
	h := chainOf(r.deliver, mws)
	r.chain.Store(&h)
}

// chainOf wraps end in mws, the first outermost.
func chainOf(end Handler, mws []Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		end = mws[i](end)
	}
	return end
}

// UseLocal installs the local chain, outermost first, replacing the one installed before:
// the stages every request the proxy answers itself passes through (Local). Its calls
// have no Target; the chain's end answers them. Like Use, it is safe while requests are
// served.
func (r *Router) UseLocal(mws ...Middleware) {
	h := chainOf(answerLocal, mws)
	r.local.Store(&h)
}

// Local answers req, which the proxy serves itself (a list; the front end's initialize),
// with answer, through the local chain when one is installed; reply gets the outcome.
// Without a chain it costs nothing beyond answer.
func (r *Router) Local(ctx context.Context, req *Request, answer Answer, reply Reply) {
	h := r.local.Load()
	if h == nil {
		reply(answer(ctx, req))
		return
	}
	(*h)(ctx, &Call{Method: req.Method, Params: req.Params, Request: req, local: answer}, reply)
}

// UseLocalTools installs the chain of the tools the proxy serves itself (an endpoint's
// search_tools), outermost first, replacing the one installed before; like Use, it is
// safe while requests are served. Its calls have a Target with Proxy set (no upstream);
// the chain's end answers them. The wiring makes it the local chain's stages and the
// policy's, so that a search is counted and traced like a list and audited and decided
// on like a call. Without it those calls pass through the local chain.
func (r *Router) UseLocalTools(mws ...Middleware) {
	h := chainOf(answerLocal, mws)
	r.localTools.Store(&h)
}

// localTool answers a tools/call of a tool the proxy itself serves (an endpoint's
// search_tools) through the local tools' chain (UseLocalTools), else the local chain,
// with the tool as the call's Target so that what counts, traces, audits and decides on
// the call names it.
func (r *Router) localTool(ctx context.Context, req *Request, name string, answer Answer, reply Reply) {
	h := r.localTools.Load()
	if h == nil {
		h = r.local.Load()
	}
	if h == nil {
		reply(answer(ctx, req))
		return
	}
	(*h)(ctx, &Call{Method: req.Method, Params: req.Params, Request: req, local: answer,
		Target: &Target{Kind: TargetTool, Name: name, Original: name, Proxy: true}}, reply)
}

// answerLocal is the end of the local chain.
func answerLocal(ctx context.Context, c *Call, reply Reply) {
	reply(c.local(ctx, c.Request))
}

// route sends c through the middleware chain to its upstream.
func (r *Router) routeCall(ctx context.Context, c *Call, reply Reply) {
	if h := r.chain.Load(); h != nil {
		(*h)(ctx, c, reply)
		return
	}
	r.deliver(ctx, c, reply)
}

// deliver is the end of the chain: the call goes to its upstream.
func (r *Router) deliver(ctx context.Context, c *Call, reply Reply) {
	if c.owner.stopped.Load() { // resolved before a reload removed it, delivered after it stopped
		reply(nil, mcp.ProxyError(mcp.CodeUpstreamUnavailable, c.owner.name, "upstream removed from the configuration by a reload"))
		return
	}
	r.forward(ctx, c.owner, c.Request, c.Params, c.spare, reply)
}

// sendSpare is room for the upstream.Request of a call, allocated with the call (see
// callEntry) so that sending it allocates no request of its own. Its first taker has it:
// a call that a middleware delivers twice (or a copy of it made by WithParams, which
// shares it) allocates for the second sending, whose first may still be in use.
type sendSpare struct {
	taken atomic.Bool
	req   upstream.Request
}

// take returns the room, or nil when s is nil or taken.
func (s *sendSpare) take() *upstream.Request {
	if s == nil || !s.taken.CompareAndSwap(false, true) {
		return nil
	}
	return &s.req
}
