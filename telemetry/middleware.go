package telemetry

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-proxy/mcp-proxy/router"
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
// HTTP request's headers), which is then linked when both are there and differ. When
// the span is sampled out and the client sent no trace context in _meta, the span's
// (unsampled) context still goes upstream, so that the upstream follows the decision.
func (t *Tracing) Request(next router.Handler) router.Handler {
	return func(ctx context.Context, c *router.Call, reply router.Reply) {
		start, opts := ctx, serverKind
		loc, isObject := locateMeta(c.Params)
		metaSC, fromMeta := metaContext(loc.meta)
		if fromMeta && !metaSC.IsSampled() && t.followParent {
			// The client's "not sampled" is the decision: no span would be recorded, and
			// its context goes upstream as it came.
			next(ctx, c, reply)
			return
		}
		if fromMeta {
			if ambient := trace.SpanContextFromContext(ctx); ambient.IsValid() && !ambient.Equal(metaSC) {
				opts = []trace.SpanStartOption{serverKind[0], trace.WithLinks(trace.Link{SpanContext: ambient})}
			}
			start = trace.ContextWithRemoteSpanContext(ctx, metaSC)
		}
		ctx, span := t.tracer.Start(start, c.Method, opts...)
		if !span.IsRecording() {
			if !fromMeta && isObject {
				c = c.WithParams(spliceMeta(c.Params, loc, span.SpanContext())) // the location found above: no second pass
			}
			next(ctx, c, reply)
			return
		}
		var buf [8]attribute.KeyValue
		attrs := append(buf[:0], keyMethod.String(c.Method))
		attrs = targetAttrs(attrs, c, false)
		attrs = requestAttrs(attrs, c.Request)
		span.SetAttributes(attrs...)
		if name := spanName(c.Method, c.Target, false); name != c.Method {
			span.SetName(name)
		}
		method := c.Method
		next(ctx, c, func(res json.RawMessage, err error) {
			finish(span, method, res, err)
			reply(res, err)
		})
	}
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

// propagate returns c with sc in its params._meta, or c itself when its params cannot
// take it (not an object: the upstream will refuse them anyway).
func propagate(c *router.Call, sc trace.SpanContext) *router.Call {
	params, err := injectMeta(c.Params, sc)
	if err != nil {
		return c
	}
	return c.WithParams(params)
}
