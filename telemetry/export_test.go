package telemetry

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/otlptest"
)

// TestExportOTLP: spans made by the middlewares reach a real OTLP receiver over both
// protocols, with the resource, headers and parentage the settings and the client asked
// for, and Shutdown flushes them.
func TestExportOTLP(t *testing.T) {
	for _, proto := range []string{ProtocolHTTP, ProtocolGRPC} {
		t.Run(proto, func(t *testing.T) {
			start := otlptest.StartHTTP
			if proto == ProtocolGRPC {
				start = otlptest.StartGRPC
			}
			recv, err := start()
			if err != nil {
				t.Fatal(err)
			}
			defer recv.Close()
			endpoint := recv.Endpoint
			if proto == ProtocolHTTP {
				endpoint = TracesURL(endpoint)
			}
			tr, err := Start(context.Background(), Settings{Endpoint: endpoint, Protocol: proto, Sampling: 1,
				Service: "proxy-under-test", Version: "1.2.3", Headers: map[string]string{"X-Collector-Key": "k1"}})
			if err != nil {
				t.Fatal(err)
			}
			h := chain((&upstreamEnd{result: json.RawMessage(`{"content":[]}`)}).handle, tr.Wrap(nil)...)
			call(t, h, context.Background(), toolCall(`{"name":"search","_meta":{"traceparent":"`+clientParent+`"}}`))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tr.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if err := tr.Shutdown(ctx); err != nil {
				t.Fatalf("second Shutdown: %v", err)
			}
			spans, err := recv.Wait(5*time.Second, func(s []otlptest.Span) bool { return len(s) == 2 })
			if err != nil {
				t.Fatal(err)
			}
			var server, leg otlptest.Span
			for _, s := range spans {
				switch s.Kind {
				case tracepb.Span_SPAN_KIND_SERVER:
					server = s
				case tracepb.Span_SPAN_KIND_CLIENT:
					leg = s
				}
			}
			if server.TraceID != clientTrace || server.ParentSpanID != clientSpan {
				t.Errorf("server span trace %s parent %s, want %s %s", server.TraceID, server.ParentSpanID, clientTrace, clientSpan)
			}
			if leg.TraceID != clientTrace || leg.ParentSpanID != server.SpanID {
				t.Errorf("upstream span trace %s parent %s, want %s %s", leg.TraceID, leg.ParentSpanID, clientTrace, server.SpanID)
			}
			if server.Service != "proxy-under-test" || server.Attributes["gen_ai.tool.name"] != "gh__search" {
				t.Errorf("server span %+v", server)
			}
			if server.Headers["x-collector-key"] != "k1" {
				t.Errorf("export headers %v, want X-Collector-Key", server.Headers)
			}
		})
	}
}
