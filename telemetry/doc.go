// Package telemetry traces the proxy's calls with OpenTelemetry and exports the spans
// over OTLP (gRPC or HTTP) to a collector.
//
// Two middlewares of the router's chain make the spans: Request, first in the chain, a
// server span per routed client request, whose parent is the W3C trace context the
// client sent in params._meta (traceparent, tracestate), else the one its HTTP request
// carried (HTTPContext); and Upstream, last in the chain, a client span per upstream leg,
// whose context replaces the client's in the params._meta that goes upstream (HTTP
// upstreams also get it as headers: package transport mirrors it). Policy and plugin time
// falls between the two. Request also makes the span of a request the proxy answers
// itself (initialize, the lists: the router's local chain), and Upstream a client span
// per input round of a legacy client's call to a modern upstream (upstream.RoundHook).
// Attributes follow the OpenTelemetry semantic conventions for
// MCP (mcp.method.name, gen_ai.tool.name, jsonrpc.request.id, mcp.session.id,
// rpc.response.status_code, error.type) with the proxy's own under mcp_proxy.
//
// Tracing off costs nothing: the middlewares are not installed. A call sampled out
// costs next to nothing and allocates nothing: without a trace context from the client
// and at ratio 0 no span is started (a quick search of the params rules out a
// traceparent in _meta without scanning them), and at a ratio above 0 the span the
// sampler drops is dropped at once; nothing goes upstream, as there is no trace to join.
// A client's unsampled context goes upstream as it came (a header's is copied into
// _meta) and stays in the call's context, so that its log lines carry the client's
// trace id (LogHook). Nothing is recorded or exported for either.
//
// LogHook and IDs name a traced call's trace in the log lines written with its context
// and in its audit record: trace_id whenever the call is traced (sampled, or the
// client's context), span_id only of a span the proxy records.
//
// The package never decides anything about a call: it reads, propagates and records.
// It keeps no global state (the OpenTelemetry global providers are left alone).
package telemetry
