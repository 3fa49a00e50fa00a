package metrics

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// TestEndpointSeries: a call through an endpoint is counted by endpoint too, a call
// through none is not; an endpoint's searches are timed.
func TestEndpointSeries(t *testing.T) {
	clk := newFakeClock()
	m := New(Options{Version: "test", Now: clk.now})
	ok := answer{res: json.RawMessage(`{"content":[]}`)}
	through(m, clk, toolCall("gh", "gh__list_issues"), ok, time.Millisecond)
	c := toolCall("gh", "gh__list_issues")
	c.Request.Endpoint = "review"
	through(m, clk, c, ok, time.Millisecond)
	search := &router.Call{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"search_tools","arguments":{"query":"x"}}`),
		Target:  &router.Target{Kind: router.TargetTool, Name: router.SearchToolsName, Original: router.SearchToolsName},
		Request: &router.Request{Method: mcp.MethodToolsCall, Endpoint: "review"}}
	through(m, clk, search, ok, 50*time.Microsecond)
	query := &router.Call{Method: mcp.MethodToolsList, Params: json.RawMessage(`{"query":"issues"}`),
		Request: &router.Request{Method: mcp.MethodToolsList, Endpoint: "review"}}
	through(m, clk, query, answer{res: json.RawMessage(`{"tools":[]}`)}, 30*time.Microsecond)
	got := gather(t, m.Registry())
	for k, want := range map[string]float64{
		`mcp_proxy_endpoint_requests_total{endpoint="review",method="tools/call",outcome="ok"}`:           2,
		`mcp_proxy_endpoint_requests_total{endpoint="review",method="tools/list",outcome="ok"}`:           1,
		`mcp_proxy_search_duration_seconds_count{endpoint="review"}`:                                      2,
		`mcp_proxy_requests_total{method="tools/call",outcome="ok",tool="gh__list_issues",upstream="gh"}`: 2,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	if n := len(withPrefix(got, "mcp_proxy_endpoint_requests_total")); n != 2 {
		t.Errorf("%d endpoint series: %v", n, withPrefix(got, "mcp_proxy_endpoint_requests_total"))
	}
	if s := got[`mcp_proxy_search_duration_seconds_sum{endpoint="review"}`]; s < 79e-6 || s > 81e-6 {
		t.Errorf("search time %v, want 80µs", s)
	}
}
