package metrics

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// benchResult is a typical small tools/call result, as the upstream leg returns it.
var benchResult = json.RawMessage(`{"content":[{"type":"text","text":"hello from the upstream"}],"structuredContent":{"echo":"hello"},"isError":false}`)

func benchEnd(_ context.Context, _ *router.Call, reply router.Reply) { reply(benchResult, nil) }

func benchCall() *router.Call {
	return &router.Call{Method: "tools/call", Params: json.RawMessage(`{"name":"echo","arguments":{"text":"hello"}}`),
		Target:  &router.Target{Kind: router.TargetTool, Name: "fast__echo", Original: "echo", Upstream: "fast"},
		Request: &router.Request{Method: "tools/call"}}
}

func benchChain(b *testing.B, h router.Handler) {
	call := benchCall()
	ctx := context.Background()
	var got error
	reply := func(_ json.RawMessage, err error) { got = err }
	h(ctx, call, reply) // the label set's first call binds its series
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h(ctx, call, reply)
	}
	if got != nil {
		b.Fatal(got)
	}
}

// BenchmarkNoMetrics is the chain's end alone: the baseline of BenchmarkMiddleware.
func BenchmarkNoMetrics(b *testing.B) { benchChain(b, benchEnd) }

// BenchmarkMiddleware is one routed call through both metrics stages (Middleware
// outermost, UpstreamLeg innermost): what metrics add to a call's CPU on the proxy.
func BenchmarkMiddleware(b *testing.B) {
	m := New(Options{})
	benchChain(b, m.Middleware(m.UpstreamLeg(benchEnd)))
}

// BenchmarkMiddlewareParallel is BenchmarkMiddleware from every P at once, on one label
// set: the contention of the shared counters.
func BenchmarkMiddlewareParallel(b *testing.B) {
	m := New(Options{})
	h := m.Middleware(m.UpstreamLeg(benchEnd))
	ctx := context.Background()
	h(ctx, benchCall(), func(json.RawMessage, error) {})
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		call := benchCall()
		reply := func(json.RawMessage, error) {}
		for pb.Next() {
			h(ctx, call, reply)
		}
	})
}

// BenchmarkPolicyDecision is the policy observer's cost per decided call.
func BenchmarkPolicyDecision(b *testing.B) {
	m := New(Options{})
	d := policyDecided()
	m.PolicyDecision(d)
	b.ReportAllocs()
	for b.Loop() {
		m.PolicyDecision(d)
	}
}

func policyDecided() policy.Decided {
	return policy.Decided{Stage: policy.StageRules, Method: "tools/call", Upstream: "fast", Rule: "devs", Decision: policy.DecisionAllow}
}
