package telemetry

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// W3C trace context: a version-00 traceparent is 55 characters, a tracestate at most
// 512 as the specification advises.
const (
	traceparentLen = 55
	maxTracestate  = 512
)

// HTTPContext returns ctx with the W3C trace context of r's traceparent and tracestate
// headers as its remote parent, or ctx itself when r carries none (or a malformed one):
// the hook server.HTTPOptions.RequestContext takes. A request's params._meta, when it
// carries trace context, wins over it; the header's is then linked.
func (t *Tracing) HTTPContext(ctx context.Context, r *http.Request) context.Context {
	if r.Header.Get("Traceparent") == "" {
		return ctx // the usual case, without building a carrier
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
}

// metaContext reads the trace context a request carries in params._meta. ok is false
// when it has none, or a malformed traceparent; a malformed tracestate alone is dropped.
func metaContext(params json.RawMessage) (sc trace.SpanContext, ok bool) {
	meta, found, _ := jsonx.Get(params, "_meta")
	if !found || len(meta) == 0 || meta[0] != '{' {
		return trace.SpanContext{}, false
	}
	tp, found, _ := jsonx.GetString(meta, mcp.MetaTraceparent)
	if !found {
		return trace.SpanContext{}, false
	}
	cfg, ok := parseTraceparent(tp)
	if !ok {
		return trace.SpanContext{}, false
	}
	if ts, found, _ := jsonx.GetString(meta, mcp.MetaTracestate); found && ts != "" && len(ts) <= maxTracestate {
		if state, err := trace.ParseTraceState(ts); err == nil {
			cfg.TraceState = state
		}
	}
	cfg.Remote = true
	return trace.NewSpanContext(cfg), true
}

// parseTraceparent reads version-traceid-parentid-flags. Version ff is invalid; a
// version above 00 may append fields after a dash, which are ignored; ids of zeros are
// invalid.
func parseTraceparent(s string) (trace.SpanContextConfig, bool) {
	var cfg trace.SpanContextConfig
	if len(s) < traceparentLen || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return cfg, false
	}
	var version, flags [1]byte
	if !decodeHex(version[:], s[0:2]) || version[0] == 0xff || !decodeHex(cfg.TraceID[:], s[3:35]) ||
		!decodeHex(cfg.SpanID[:], s[36:52]) || !decodeHex(flags[:], s[53:55]) {
		return cfg, false
	}
	if len(s) > traceparentLen && (version[0] == 0 || s[traceparentLen] != '-') {
		return cfg, false
	}
	if !cfg.TraceID.IsValid() || !cfg.SpanID.IsValid() {
		return cfg, false
	}
	cfg.TraceFlags = trace.TraceFlags(flags[0]) & trace.FlagsSampled
	return cfg, true
}

// decodeHex decodes lowercase hex (the W3C format has no uppercase) into dst.
func decodeHex(dst []byte, s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, []byte(s))
	return err == nil
}

// appendTraceparent appends sc as a quoted JSON string: "00-traceid-spanid-flags".
func appendTraceparent(b []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	b = append(b, `"00-`...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, []byte{byte(sc.TraceFlags() & trace.FlagsSampled)})
	return append(b, '"')
}

// injectMeta returns params with sc as params._meta.traceparent (and its tracestate, or
// none), every other byte as it was: a new slice, params is not modified.
func injectMeta(params json.RawMessage, sc trace.SpanContext) (json.RawMessage, error) {
	var meta []byte
	found := false
	if len(bytes.TrimSpace(params)) > 0 { // none: jsonx.Set starts from {}
		var err error
		if meta, found, err = jsonx.Get(params, "_meta"); err != nil {
			return nil, err
		}
	}
	if !found || len(meta) == 0 || meta[0] != '{' {
		meta = nil // jsonx.Edit starts from {}; a _meta that is not an object is replaced
	}
	var buf [2 + traceparentLen]byte
	changes := [2]jsonx.Change{{Key: mcp.MetaTraceparent, Value: appendTraceparent(buf[:0], sc)}, {Key: mcp.MetaTracestate, Delete: true}}
	if ts := sc.TraceState().String(); ts != "" {
		changes[1] = jsonx.Change{Key: mcp.MetaTracestate, Value: jsonrpc.AppendString(nil, ts)}
	}
	newMeta, err := jsonx.Edit(meta, changes[:])
	if err != nil {
		return nil, err
	}
	return jsonx.Set(params, "_meta", newMeta)
}
