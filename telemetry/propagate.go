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

// metaLoc is where a request's params._meta is.
type metaLoc struct {
	meta       []byte // the _meta value as sent; nil when absent
	start, end int    // the value's offsets in params; when absent, both where a new member goes (the closing brace)
	empty      bool   // params has no members: a new one needs no comma
}

// locateMeta finds params._meta in one pass over params. ok is false when params is not
// an object.
func locateMeta(params []byte) (loc metaLoc, ok bool) {
	n := 0
	err := jsonx.Each(params, func(f jsonx.Field) bool {
		n++
		if jsonx.KeyIs(f.RawKey, "_meta") {
			loc.meta, loc.start, loc.end = f.Value, f.End-len(f.Value), f.End
			return false
		}
		return true
	})
	if err != nil {
		return metaLoc{}, false
	}
	if loc.meta == nil {
		i := bytes.LastIndexByte(params, '}')
		loc.start, loc.end, loc.empty = i, i, n == 0
	}
	return loc, true
}

// inbound is the trace context a request's params carry, and where their _meta is.
type inbound struct {
	sc       trace.SpanContext // valid when fromMeta
	fromMeta bool              // params._meta holds a well-formed traceparent
	scanned  bool              // loc and isObject are set (the quick check did not rule out a traceparent)
	isObject bool
	loc      metaLoc
}

// clientContext reads the trace context of params._meta. Most requests carry none, and
// a quick search rules that out without scanning the params' members: the text `_meta"`
// (a key, or a string that ends so: in JSON text a quote that is part of a string is
// escaped), then after its first occurrence `parent"` (the end of a traceparent key),
// unless a \u escape could spell either.
func clientContext(params []byte) inbound {
	if !bytes.Contains(params, escapeU) {
		i := bytes.Index(params, metaKey)
		if i < 0 || !bytes.Contains(params[i+len(metaKey):], parentKeyEnd) {
			return inbound{}
		}
	}
	in := inbound{scanned: true}
	in.loc, in.isObject = locateMeta(params)
	in.sc, in.fromMeta = metaContext(in.loc.meta)
	return in
}

var (
	metaKey      = []byte(`_meta"`)
	parentKeyEnd = []byte(`parent"`)
	escapeU      = []byte(`\u`)
)

// metaContext reads the trace context a request carries in its _meta value (nil: none),
// in one pass over it. ok is false when it has none, or a malformed traceparent; a
// malformed tracestate alone is dropped.
func metaContext(meta []byte) (sc trace.SpanContext, ok bool) {
	if len(meta) == 0 || meta[0] != '{' {
		return trace.SpanContext{}, false
	}
	var parent, state []byte
	_ = jsonx.Each(meta, func(f jsonx.Field) bool {
		switch {
		case jsonx.KeyIs(f.RawKey, mcp.MetaTraceparent):
			parent = f.Value
		case jsonx.KeyIs(f.RawKey, mcp.MetaTracestate):
			state = f.Value
		}
		return parent == nil || state == nil
	})
	cfg, ok := parseTraceparent(unquoted(parent))
	if !ok {
		return trace.SpanContext{}, false
	}
	if len(state) > 2 && len(state) <= maxTracestate+2 {
		if ts, err := trace.ParseTraceState(string(unquoted(state))); err == nil {
			cfg.TraceState = ts
		}
	}
	cfg.Remote = true
	return trace.NewSpanContext(cfg), true
}

// unquoted is the text of a JSON string, without copying it when it has no escapes
// (a traceparent never has); nil for anything but a string.
func unquoted(v []byte) []byte {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1]
	}
	s, err := jsonx.Unquote(v)
	if err != nil {
		return nil
	}
	return []byte(s)
}

// paramsContext is metaContext of params' _meta.
func paramsContext(params []byte) (trace.SpanContext, bool) {
	loc, _ := locateMeta(params)
	return metaContext(loc.meta)
}

// parseTraceparent reads version-traceid-parentid-flags. Version ff is invalid; a
// version above 00 may append fields after a dash, which are ignored; ids of zeros are
// invalid.
func parseTraceparent(s []byte) (trace.SpanContextConfig, bool) {
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

// decodeHex decodes lowercase hex (the W3C format has no uppercase) into dst, which
// holds len(s)/2 bytes.
func decodeHex(dst, s []byte) bool {
	for i := 0; i+1 < len(s); i += 2 {
		hi, ok1 := hexDigit(s[i])
		lo, ok2 := hexDigit(s[i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i/2] = hi<<4 | lo
	}
	return true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
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
	if len(bytes.TrimSpace(params)) == 0 {
		params = json.RawMessage(`{}`)
	}
	loc, ok := locateMeta(params)
	if !ok {
		return nil, jsonx.ErrNotObject
	}
	return spliceMeta(params, loc, sc), nil
}

// spliceMeta builds, in one buffer, params with the _meta at loc holding sc in place of
// any trace context it had; a _meta that is not an object is replaced.
func spliceMeta(params []byte, loc metaLoc, sc trace.SpanContext) []byte {
	ts := sc.TraceState().String()
	out := make([]byte, 0, len(params)+len(loc.meta)/8+96+2*len(ts))
	out = append(out, params[:loc.start]...)
	if loc.meta == nil {
		if !loc.empty {
			out = append(out, ',')
		}
		out = append(out, `"_meta":`...)
	}
	out = append(out, '{')
	n := 0
	if len(loc.meta) > 0 && loc.meta[0] == '{' {
		_ = jsonx.Each(loc.meta, func(f jsonx.Field) bool { // loc.meta was scanned whole: it is well formed
			if jsonx.KeyIs(f.RawKey, mcp.MetaTraceparent) || jsonx.KeyIs(f.RawKey, mcp.MetaTracestate) {
				return true
			}
			if n > 0 {
				out = append(out, ',')
			}
			out = append(out, loc.meta[f.Start:f.End]...)
			n++
			return true
		})
	}
	if n > 0 {
		out = append(out, ',')
	}
	out = append(out, `"`+mcp.MetaTraceparent+`":`...)
	out = appendTraceparent(out, sc)
	if ts != "" {
		out = append(out, `,"`+mcp.MetaTracestate+`":`...)
		out = jsonrpc.AppendString(out, ts)
	}
	out = append(out, '}')
	return append(out, params[loc.end:]...)
}
