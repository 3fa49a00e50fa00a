package e2e

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestModernUpstreamInput runs the Go SDK everything-server as a modern (2026-07-28)
// upstream whose tools answer input_required (sampling, elicitation, roots, several
// inputs at once, several rounds), with a legacy client (the proxy turns each input
// request into a real request to the client and retries the upstream) and with a modern
// client (the results pass through and the client's retries reach the same upstream).
func TestModernUpstreamInput(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, everythingUpstreamEra("everything", "ev", "modern"))
	for _, version := range []string{"2025-11-25", ""} {
		name := "legacy client"
		if version == "" {
			name = "modern client"
		}
		t.Run(name, func(t *testing.T) {
			var sampled, elicited atomic.Int32
			cs, stderr, _ := connectSDKWithRoots(t, cfg, &mcp.ClientOptions{
				CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					sampled.Add(1)
					return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled answer"}}, nil
				},
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					elicited.Add(1)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada", "username": "ada", "confirm": true, "color": "blue"}}, nil
				},
			}, version, &mcp.Root{URI: "file:///mrtr/root", Name: "root"})
			ctx := ctxT(t, 60*time.Second)
			for _, tc := range []struct{ tool, want string }{
				{"ev__test_input_required_result_sampling", "sampled answer"},
				{"ev__test_input_required_result_elicitation", "Ada"},
				{"ev__test_input_required_result_list_roots", "file:///mrtr/root"},
				{"ev__test_input_required_result_multiple_inputs", ""},
				{"ev__test_input_required_result_multi_round", ""},
			} {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{}})
				if err != nil || res.IsError || !strings.Contains(textOf(res), tc.want) {
					t.Errorf("%s: %v %q\n%s", tc.tool, err, textOf(res), stderr)
				}
			}
			if sampled.Load() == 0 || elicited.Load() == 0 {
				t.Errorf("client handlers not reached: sampling %d, elicitation %d", sampled.Load(), elicited.Load())
			}
		})
	}
}
