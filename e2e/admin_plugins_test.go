package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAdminPluginMetrics: with plugins in the chain, /metrics counts each hook call of
// each plugin and the hook calls that failed (an answer the proxy cannot apply), and the
// calls themselves by outcome, in stdio mode.
func TestAdminPluginMetrics(t *testing.T) {
	t.Parallel()
	adminAddr := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("admin {\n  address = %q\n}\n", adminAddr)+testUpstream("t", "t", nil, "")+
		testPlugin("tagger", nil, `tools = ["t__echo"]`, `tag = "X"`)+
		testPlugin("broken", []string{"-hooks", "before"}, `tools = ["t__big"]`, `bad = "args"`))
	cs, stderr := connectSDK(t, cfg, nil, "")
	ctx := ctxT(t, 90*time.Second)
	base := "http://" + adminAddr
	waitReady(t, base, 200, 30*time.Second, stderr)
	for range 2 {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"a": 1}}); err != nil || res.IsError {
			t.Fatalf("echo: %v %+v", err, res)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__big", Arguments: map[string]any{"bytes": 10}}); callErrCode(err) != -31008 {
		t.Fatalf("big through a broken plugin: %v, want -31008", err)
	}
	m := scrape(t, base, "")
	for k, want := range map[string]float64{
		`mcp_proxy_plugin_hook_duration_seconds_count{hook="before",plugin="tagger"}`:              2,
		`mcp_proxy_plugin_hook_duration_seconds_count{hook="after",plugin="tagger"}`:               2,
		`mcp_proxy_plugin_hook_failures_total{hook="before",plugin="tagger"}`:                      0,
		`mcp_proxy_plugin_hook_failures_total{hook="after",plugin="tagger"}`:                       0,
		`mcp_proxy_plugin_hook_duration_seconds_count{hook="before",plugin="broken"}`:              1,
		`mcp_proxy_plugin_hook_failures_total{hook="before",plugin="broken"}`:                      1,
		`mcp_proxy_requests_total{method="tools/call",outcome="ok",tool="t__echo",upstream="t"}`:   2,
		`mcp_proxy_requests_total{method="tools/call",outcome="error",tool="t__big",upstream="t"}`: 1,
		`mcp_proxy_errors_total{code="-31008"}`:                                                    1,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	// The upstream leg is timed after the plugins: the refused call never reached it.
	if got := m[`mcp_proxy_upstream_request_duration_seconds_count{method="tools/call",upstream="t"}`]; got != 2 {
		t.Errorf("upstream legs: %v, want 2", got)
	}
}
