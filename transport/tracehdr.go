package transport

import (
	"net/http"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// W3C trace context limits: a version-00 traceparent is 55 characters; a tracestate
// holds at most 32 members, which fit in 512 characters as the specification advises.
const (
	traceparentLen = 55
	maxTracestate  = 512
)

// setTraceHeaders mirrors the W3C trace context that request m carries in
// params._meta (traceparent, tracestate: where MCP puts it, and where the proxy's
// tracing writes its own) into the HTTP headers of the same names, so that an HTTP
// server's own instrumentation finds it too. A value that is not well formed is left
// out: it must not break the request (a line break in a header is refused by the HTTP
// client).
func setTraceHeaders(h http.Header, m *jsonrpc.Message) {
	tp, ts := traceContext(m)
	if tp != "" {
		h.Set("Traceparent", tp)
	}
	if ts != "" {
		h.Set("Tracestate", ts)
	}
}

// appendTraceFields is setTraceHeaders for a request head written by hand (the lean
// client's): the fields are appended to b.
func appendTraceFields(b []byte, m *jsonrpc.Message) []byte {
	tp, ts := traceContext(m)
	// What an HTTP client writes of them: without surrounding space.
	if tp = strings.Trim(tp, " "); tp != "" {
		b = append(append(append(b, "Traceparent: "...), tp...), "\r\n"...)
	}
	if ts = strings.Trim(ts, " "); ts != "" {
		b = append(append(append(b, "Tracestate: "...), ts...), "\r\n"...)
	}
	return b
}

// traceContext returns the well-formed traceparent and tracestate of request m's
// params._meta ("" for what it lacks or is malformed; no tracestate without a
// traceparent). Both are printable ASCII; the traceparent has no space, the tracestate may
// have some around it (appendTraceFields trims it, as net/http does).
func traceContext(m *jsonrpc.Message) (traceparent, tracestate string) {
	if !m.IsRequest() || len(m.Params) == 0 {
		return "", ""
	}
	meta, ok, _ := jsonx.Get(m.Params, "_meta")
	if !ok || len(meta) == 0 || meta[0] != '{' {
		return "", ""
	}
	tp, ok, _ := jsonx.GetString(meta, mcp.MetaTraceparent)
	if !ok || !wellFormedTraceparent(tp) {
		return "", ""
	}
	if ts, ok, _ := jsonx.GetString(meta, mcp.MetaTracestate); ok && ts != "" && len(ts) <= maxTracestate && printable(ts) {
		return tp, ts
	}
	return tp, ""
}

// wellFormedTraceparent checks the shape of a traceparent: version-traceid-parentid-flags
// in lowercase hex (a later version may append fields after a dash).
func wellFormedTraceparent(s string) bool {
	if len(s) < traceparentLen || (len(s) > traceparentLen && s[traceparentLen] != '-') {
		return false
	}
	for i := 0; i < traceparentLen; i++ {
		c := s[i]
		switch i {
		case 2, 35, 52:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return printable(s)
}

// printable reports whether s is printable ASCII (what a header value may safely hold).
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
