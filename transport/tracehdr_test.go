package transport

import (
	"net/http"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

func TestSetTraceHeaders(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name          string
		msg           *jsonrpc.Message
		parent, state string
	}{
		{"both", jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/call",
			[]byte(`{"name":"x","_meta":{"progressToken":1,"traceparent":"`+tp+`","tracestate":"a=1,b=2"}}`)), tp, "a=1,b=2"},
		{"parent only", jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/call", []byte(`{"_meta":{"traceparent":"`+tp+`"}}`)), tp, ""},
		{"future version with more fields", jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/call",
			[]byte(`{"_meta":{"traceparent":"`+tp+`-what"}}`)), tp + "-what", ""},
		{"no _meta", jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/call", []byte(`{"name":"x"}`)), "", ""},
		{"no params", jsonrpc.NewRequest(jsonrpc.IntID(1), "ping", nil), "", ""},
		{"_meta not an object", jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/call", []byte(`{"_meta":"x"}`)), "", ""},
		{"uppercase hex", jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/call",
			[]byte(`{"_meta":{"traceparent":"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}}`)), "", ""},
		{"line break", jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/call",
			[]byte(`{"_meta":{"traceparent":"`+tp+`-\r\nX-Evil: 1"}}`)), "", ""},
		{"tracestate with a line break", jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/call",
			[]byte(`{"_meta":{"traceparent":"`+tp+`","tracestate":"a=1\nb"}}`)), tp, ""},
		{"short", jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/call", []byte(`{"_meta":{"traceparent":"00-4bf9-00f0-01"}}`)), "", ""},
		{"notification", jsonrpc.NewNotification("notifications/progress", []byte(`{"_meta":{"traceparent":"`+tp+`"}}`)), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			setTraceHeaders(h, tt.msg)
			if got := h.Get("traceparent"); got != tt.parent {
				t.Errorf("traceparent = %q, want %q", got, tt.parent)
			}
			if got := h.Get("tracestate"); got != tt.state {
				t.Errorf("tracestate = %q, want %q", got, tt.state)
			}
		})
	}
}
