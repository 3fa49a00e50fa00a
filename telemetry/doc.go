// Package telemetry traces the proxy's calls with OpenTelemetry and exports the spans
// over OTLP (gRPC or HTTP) to a collector.
//
// Two middlewares of the router's chain make the spans: Request, first in the chain, a
// server span per routed client request, whose parent is the W3C trace context the
// client sent in params._meta (traceparent, tracestate), else the one its HTTP request
// carried (HTTPContext); and Upstream, last in the chain, a client span per upstream leg,
// whose context replaces the client's in the params._meta that goes upstream (HTTP
// upstreams also get it as headers: package transport mirrors it). Policy and plugin time
// falls between the two. Attributes follow the OpenTelemetry semantic conventions for
// MCP (mcp.method.name, gen_ai.tool.name, jsonrpc.request.id, mcp.session.id,
// rpc.response.status_code, error.type) with the proxy's own under mcp_proxy.
//
// Tracing off costs nothing: the middlewares are not installed. A sampled-out call costs
// one non-recording span and the propagation of its (unsampled) context in _meta; one
// whose client sent an unsampled context costs reading it, and that context goes
// upstream as it came. Nothing is recorded or exported for either.
//
// The package never decides anything about a call: it reads, propagates and records.
// It keeps no global state (the OpenTelemetry global providers are left alone).
package telemetry
