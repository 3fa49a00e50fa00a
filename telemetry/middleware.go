package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Start options, made once: a variadic option list built per call would be allocated
// per call.
var (
	serverKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	clientKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
)

// Wrap returns the chain's stages with the tracing middlewares around them: Request
// first (outermost), Upstream last (innermost, just before the call goes upstream), so
// that the time the policy and plugins take falls between the two spans. On a nil
// *Tracing it returns stages unchanged.
func (t *Tracing) Wrap(stages []router.Middleware) []router.Middleware {
	if t == nil {
		return stages
	}
	out := make([]router.Middleware, 0, len(stages)+2)
	out = append(out, t.Request)
	out = append(out, stages...)
	return append(out, t.Upstream)
}

// Request is the outermost middleware: a server span per routed client request, from
// the moment the router resolved it to the answer the client gets. Its parent is the
// trace context of the request's params._meta, else the one in ctx (HTTPContext: the
// HTTP request's headers), which is then linked when both are there and differ.
//
// A call that is not sampled costs as little as the sampler allows: with no trace
// context from the client and a ratio of 0 no span is even started; one the ratio
// samples out is dropped at once. Either way nothing goes upstream: there is no trace
// to join (nothing is recorded or logged under the unsampled root's ids), and an
// upstream that traces on its own makes its own decision, as it would if called
// directly. A client's trace context is different: when the call is not sampled it
// goes upstream exactly as it came (in _meta, where an HTTP header's is copied), and
// stays in ctx so that the call's log lines carry its trace id (see LogHook).
func (t *Tracing) Request(next router.Handler) router.Handler {
	return func(ctx context.Context, c *router.Call, reply router.Reply) {
		in := clientContext(c.Params)
		ambient := trace.SpanContextFromContext(ctx)
		if !in.fromMeta && !ambient.IsValid() && t.ratio <= 0 {
			next(ctx, c, reply) // a root that cannot be sampled: the common sampled-out case
			return
		}
		parent := ambient
		if in.fromMeta {
			parent = in.sc
		}
		if t.followParent && parent.IsValid() && !parent.IsSampled() {
			// The client's "not sampled" is the decision: no span would be recorded.
			untraced(ctx, c, reply, next, &in, parent)
			return
		}
		start, opts := ctx, serverKind
		if in.fromMeta {
			if ambient.IsValid() && !ambient.Equal(in.sc) {
				opts = []trace.SpanStartOption{serverKind[0], trace.WithLinks(trace.Link{SpanContext: ambient})}
			}
			start = trace.ContextWithRemoteSpanContext(ctx, in.sc)
		}
		sctx, span := t.tracer.Start(start, c.Method, opts...)
		if !span.IsRecording() { // the ratio sampled it out (or overrode the client's decision)
			untraced(ctx, c, reply, next, &in, parent)
			return
		}
		var buf [10]attribute.KeyValue
		attrs := append(buf[:0], keyMethod.String(c.Method))
		attrs = targetAttrs(attrs, c, false)
		attrs = requestAttrs(attrs, c.Request)
		span.SetAttributes(attrs...)
		if name := spanName(c.Method, c.Target, false); name != c.Method {
			span.SetName(name)
		}
		method := c.Method
		next(sctx, c, func(res json.RawMessage, err error) {
			finish(span, method, res, err)
			reply(res, err)
		})
	}
}

// untraced passes on a call that is not sampled. The client's trace context (parent,
// when valid) goes upstream unchanged and stays in ctx for the log lines; without one
// the call passes as it came.
func untraced(ctx context.Context, c *router.Call, reply router.Reply, next router.Handler, in *inbound, parent trace.SpanContext) {
	switch {
	case in.fromMeta: // already in the params that go upstream
		ctx = trace.ContextWithRemoteSpanContext(ctx, in.sc)
	case parent.IsValid(): // the HTTP header's, which ctx has: _meta gets it too
		if !in.scanned {
			in.loc, in.isObject = locateMeta(c.Params)
		}
		if in.isObject {
			c = c.WithParams(spliceMeta(c.Params, in.loc, parent))
		}
	}
	next(ctx, c, reply)
}

// Upstream is the innermost middleware: a client span per upstream leg, whose context
// goes upstream in params._meta (traceparent, tracestate) in place of the client's. Under
// a request span that is not recorded it does nothing (the Request stage has already
// propagated what there is to propagate).
func (t *Tracing) Upstream(next router.Handler) router.Handler {
	return func(ctx context.Context, c *router.Call, reply router.Reply) {
		if !trace.SpanFromContext(ctx).IsRecording() {
			next(ctx, c, reply)
			return
		}
		ctx, span := t.tracer.Start(ctx, c.Method, clientKind...)
		ctx = upstream.WithRoundHook(ctx, t.round) // input rounds for a legacy client: a span each
		c = propagate(c, span.SpanContext())
		var buf [6]attribute.KeyValue
		attrs := append(buf[:0], keyMethod.String(c.Method))
		attrs = targetAttrs(attrs, c, true)
		span.SetAttributes(attrs...)
		if name := spanName(c.Method, c.Target, true); name != c.Method {
			span.SetName(name)
		}
		method := c.Method
		next(ctx, c, func(res json.RawMessage, err error) {
			finish(span, method, res, err)
			reply(res, err)
		})
	}
}

// keyRound is an input round's number (mcp_proxy.round).
const keyRound = attribute.Key("mcp_proxy.round")

// round is the upstream.RoundHook of a recorded upstream leg: a client span per input
// round ("{method} input round"), under the leg's span, from asking the client for the
// inputs to the retried request's answer.
func (t *Tracing) round(ctx context.Context, method string, n int) (context.Context, func(error)) {
	ctx, span := t.tracer.Start(ctx, method+" input round", clientKind...)
	span.SetAttributes(keyMethod.String(method), keyRound.Int(n))
	return ctx, func(err error) {
		var je *jsonrpc.Error
		switch {
		case err == nil:
		case errors.As(err, &je):
			code := strconv.FormatInt(je.Code, 10)
			span.SetAttributes(keyStatusCode.String(code), keyErrorType.String(code))
			span.SetStatus(codes.Error, je.Message)
		default:
			span.SetAttributes(keyErrorType.String("_OTHER"))
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// propagate returns c with sc in its params._meta, or c itself when its params cannot
// take it (not an object: the upstream will refuse them anyway).
func propagate(c *router.Call, sc trace.SpanContext) *router.Call {
	params, err := injectMeta(c.Params, sc)
	if err != nil {
		return c
	}
	return c.WithParams(params)
}
