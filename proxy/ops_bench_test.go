//go:build unix

package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// BenchmarkOpsChain is what the operations config (an admin block: metrics; a telemetry
// block: tracing) adds to one routed tools/call, with the stages wired exactly as
// buildEngine wires them (metrics outermost and innermost, tracing inside them) around an
// upstream that answers at once: none (the baseline), metrics alone, metrics with
// tracing sampled out (sampling = 0, the client sending no trace context), and metrics
// with every call traced (sampling = 1, exported over OTLP/HTTP to a local endpoint that
// discards them). cpu-ns/op is the process's CPU time per call, the batch span
// processor's and exporter's goroutines included (the spans still buffered are exported
// before it is read).
func BenchmarkOpsChain(b *testing.B) {
	result := json.RawMessage(`{"content":[{"type":"text","text":"hello from the upstream"}]}`)
	final := func(_ context.Context, _ *router.Call, reply router.Reply) { reply(result, nil) }
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hello"},"_meta":{"progressToken":1}}`)
	req := &router.Request{Method: mcp.MethodToolsCall, Params: params, ID: jsonrpc.IntID(12345)}
	c := &router.Call{Method: mcp.MethodToolsCall, Params: params, Request: req,
		Target: &router.Target{Kind: router.TargetTool, Name: "fast__echo", Original: "echo", Upstream: "fast"}}

	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()

	run := func(b *testing.B, admin bool, sampling float64) {
		cfg := &config.Config{Upstreams: []config.Upstream{{Name: "fast"}}}
		if admin {
			cfg.Admin = &config.Admin{Address: "127.0.0.1:0"}
		}
		if sampling >= 0 {
			cfg.Telemetry = &config.Telemetry{Endpoint: collector.URL, Protocol: config.OTLPHTTP, Sampling: sampling}
		}
		b.Setenv("OTEL_SDK_DISABLED", "") // the environment must not turn tracing off
		tr, err := startTracing(context.Background(), cfg, "bench", zerolog.Nop())
		if err != nil {
			b.Fatal(err)
		}
		obs := newObservers(cfg, "bench")
		h := router.Handler(final)
		stages := obs.around(tr.Wrap(nil))
		for i := len(stages) - 1; i >= 0; i-- {
			h = stages[i](h)
		}
		ctx := context.Background()
		reply := func(json.RawMessage, error) {}
		h(ctx, c, reply) // the label set's first call binds its series
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := cpuTime()
		for i := 0; i < b.N; i++ {
			h(ctx, c, reply)
		}
		if tr != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := tr.Shutdown(sctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	}
	b.Run("plain", func(b *testing.B) { run(b, false, -1) })
	b.Run("metrics", func(b *testing.B) { run(b, true, -1) })
	b.Run("metrics+sampled-out", func(b *testing.B) { run(b, true, 0) })
	b.Run("metrics+sampled-100pct", func(b *testing.B) { run(b, true, 1) })
}

// cpuTime is the CPU time (user and system) the process has used, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
