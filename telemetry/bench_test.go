//go:build unix

package telemetry

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// The params of a typical tools/call (those of router.BenchmarkHotPath).
const benchParams = `{"name":"tool_ab","arguments":{"owner":"modelcontextprotocol","repo":"go-sdk","title":"A bug report","body":"Steps to reproduce: run the proxy, call a tool, observe the result."},"_meta":{"progressToken":"abc"}}`

// The same with an unsampled trace context from the client.
const benchParamsUnsampled = `{"name":"tool_ab","arguments":{"owner":"modelcontextprotocol","repo":"go-sdk","title":"A bug report","body":"Steps to reproduce: run the proxy, call a tool, observe the result."},"_meta":{"progressToken":"abc","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}}`

// BenchmarkTracing measures what tracing adds to one routed call: the chain around an
// upstream that answers at once, with tracing off (no middlewares: the baseline), on but
// sampled out (with and without the client's own unsampled context), and sampled at 100%
// (batch processor; spans dropped by a no-op exporter, or exported over OTLP/HTTP to a
// local endpoint that discards them). cpu-ns/op is the process's CPU time per call,
// the batch processor's and exporter's goroutines included.
func BenchmarkTracing(b *testing.B) {
	result := json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
	final := func(_ context.Context, _ *router.Call, reply router.Reply) { reply(result, nil) }
	run := func(b *testing.B, tr *Tracing, params string) {
		h := router.Handler(final)
		if tr != nil {
			h = chain(final, tr.Wrap(nil)...)
		}
		target := &router.Target{Kind: router.TargetTool, Name: "github__tool_ab", Original: "tool_ab", Upstream: "github"}
		ctx := context.Background()
		reply := func(json.RawMessage, error) {}
		// One call, reused: the middlewares never modify the call they are given (they
		// pass on a copy), so each iteration is a fresh call to them.
		req := &router.Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(params), ID: jsonrpc.StringID("req-12345")}
		c := &router.Call{Method: mcp.MethodToolsCall, Params: req.Params, Target: target, Request: req}
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := cpuTime()
		for i := 0; i < b.N; i++ {
			h(ctx, c, reply)
		}
		if tr != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := tr.Shutdown(sctx); err != nil { // what is buffered is exported: its CPU counts
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	}
	batched := func(exp sdktrace.SpanExporter, sampling float64) *Tracing {
		s := Settings{Sampling: sampling}
		return newTracing(sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(Sampler(s))), s)
	}
	b.Run("off", func(b *testing.B) { run(b, nil, benchParams) })
	b.Run("sampled-out", func(b *testing.B) { run(b, batched(tracetest.NewNoopExporter(), 0), benchParams) })
	b.Run("sampled-out-client-context", func(b *testing.B) {
		run(b, batched(tracetest.NewNoopExporter(), 1), benchParamsUnsampled) // parent-based: the client's "no" wins
	})
	b.Run("sampled-noop-exporter", func(b *testing.B) { run(b, batched(tracetest.NewNoopExporter(), 1), benchParams) })
	b.Run("sampled-otlp-http", func(b *testing.B) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		defer srv.Close()
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"))
		if err != nil {
			b.Fatal(err)
		}
		run(b, batched(exp, 1), benchParams)
	})
}

// cpuTime is the CPU time (user and system) the process has used, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
