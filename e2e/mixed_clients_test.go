package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mixedClient is one client of TestMixedClientsOneProxy: its era and what it declares.
type mixedClient struct {
	name        string
	version     string // the protocol version it asks for
	elicitation bool   // declares elicitation (answers every request with a name)
	sampling    bool
}

func (m mixedClient) connect(t *testing.T, url string, logs fmt.Stringer) (*mcp.ClientSession, *int) {
	t.Helper()
	asked := new(int)
	opts := &mcp.ClientOptions{}
	if m.elicitation {
		opts.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			*asked++
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": m.name, "username": m.name, "email": m.name + "@example.com"}}, nil
		}
	}
	if m.sampling {
		opts.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			*asked++
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "Paris, says " + m.name}}, nil
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: m.name, Version: "1"}, opts)
	cs, err := client.Connect(ctxT(t, 60*time.Second), &mcp.StreamableClientTransport{Endpoint: url},
		&mcp.ClientSessionOptions{ProtocolVersion: m.version})
	if err != nil {
		t.Fatalf("connect %s: %v\n%s", m.name, err, logs)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, asked
}

// TestMixedClientsOneProxy is the long-lived shape: one HTTP proxy in front of one
// shared Go SDK everything-server, used in turn by clients of both eras and different
// capabilities. Whatever came first, each client gets what it declared: the client that
// declares elicitation is asked, the modern client gets its input-required rounds, and
// the client that declares nothing is not asked for anything.
func TestMixedClientsOneProxy(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"child", "http-stateful", "http-stateless"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			var up string
			switch mode {
			case "child":
				up = everythingUpstream("ev", "ev")
			default:
				url := startHTTPEverything(t, mode == "http-stateless")
				up = fmt.Sprintf("upstream \"ev\" {\n  url = %q\n}\n", url)
			}
			url, stderr, _ := startHTTPProxyCmd(t, up)
			ctx := ctxT(t, 120*time.Second)

			// 1. A legacy client that declares nothing lists the tools first (and so
			// starts the upstream).
			plain, _ := mixedClient{name: "plain", version: "2025-11-25"}.connect(t, url, stderr)
			tools, err := plain.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) == 0 {
				t.Fatalf("plain client's tools: %v\n%s", err, stderr)
			}

			// 2. A legacy client that declares elicitation calls the elicitation tools.
			eli, asked := mixedClient{name: "eli", version: "2025-11-25", elicitation: true}.connect(t, url, stderr)
			tool := "ev__test_elicitation"
			if mode == "http-stateless" {
				// A stateless server cannot send requests in a legacy session; its
				// input-required tool is the one it can ask with, and the proxy turns
				// that into this client's elicitation request.
				tool = "ev__test_input_required_result_elicitation"
			}
			for _, name := range []string{tool, "ev__test_input_required_result_elicitation"} {
				before := *asked
				res, err := eli.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"message": "who are you?"}})
				if err != nil || res.IsError || *asked == before {
					t.Errorf("%s, legacy client with elicitation: err %v, isError %v, asked %d times: %q\n%s",
						name, err, res != nil && res.IsError, *asked-before, resultText(res), stderr)
				}
			}

			// 3. A modern client that declares elicitation gets its input-required rounds.
			mod, masked := mixedClient{name: "mod", version: "2026-07-28", elicitation: true}.connect(t, url, stderr)
			res, err := mod.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_input_required_result_elicitation"})
			if err != nil || res.IsError || !strings.Contains(resultText(res), "Hello, mod!") || *masked == 0 {
				t.Errorf("modern client's input-required round: err %v, asked %d: %q\n%s", err, *masked, resultText(res), stderr)
			}

			// 4. The client that declared nothing is not asked: the server is told so.
			res, err = plain.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_elicitation", Arguments: map[string]any{"message": "?"}})
			if err == nil && !res.IsError {
				t.Errorf("a client without elicitation got a result from the elicitation tool: %q", resultText(res))
			}
		})
	}
}

// resultText is the text of a result, "" for none.
func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	return textOf(res)
}
