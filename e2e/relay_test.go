package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServerToClientRequests relays sampling, elicitation and roots requests from real
// upstreams to a Go SDK client that declared those capabilities, and refuses them (with
// an error to the upstream, not silence) for a client that did not.
func TestServerToClientRequests(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, everythingUpstreamEra("everything", "ev", "legacy")+npmUpstream("npm", "npm"))

	t.Run("capable client", func(t *testing.T) {
		var sampled, elicited atomic.Int32
		opts := &mcp.ClientOptions{
			CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				sampled.Add(1)
				return &mcp.CreateMessageResult{Model: "e2e-model", Role: "assistant",
					Content: &mcp.TextContent{Text: "sampled by the e2e client"}}, nil
			},
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				elicited.Add(1)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com", "name": "Ada", "age": 36}}, nil
			},
		}
		cs, _, client := connectSDKWithRoots(t, cfg, opts, "2025-11-25", &mcp.Root{URI: "file:///e2e/workspace", Name: "workspace"})
		ctx := ctxT(t, 60*time.Second)

		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_sampling", Arguments: map[string]any{"prompt": "hi"}})
		if err != nil || res.IsError || !strings.Contains(textOf(res), "sampled by the e2e client") {
			t.Errorf("sampling through the proxy: %v %q", err, textOf(res))
		}
		if sampled.Load() == 0 {
			t.Errorf("the client's sampling handler was never called")
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_elicitation", Arguments: map[string]any{"message": "who?"}})
		if err != nil || res.IsError || elicited.Load() == 0 {
			t.Errorf("elicitation through the proxy: %v %q (handler calls %d)", err, textOf(res), elicited.Load())
		}

		names := toolNames(t, cs)
		if slices.Contains(names, "npm__get-roots-list") {
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "npm__get-roots-list"})
			if err != nil || !strings.Contains(textOf(res), "file:///e2e/workspace") {
				t.Errorf("roots through the proxy: %v %q", err, textOf(res))
			}
			// A new root: the client's roots/list_changed reaches the upstream, which
			// asks again and sees it.
			client.AddRoots(&mcp.Root{URI: "file:///e2e/second", Name: "second"})
			deadline := time.Now().Add(10 * time.Second)
			for {
				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "npm__get-roots-list"})
				if err == nil && strings.Contains(textOf(res), "file:///e2e/second") {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("roots/list_changed did not reach the upstream: %v %q", err, textOf(res))
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
		} else {
			t.Errorf("npm server-everything did not offer get-roots-list to a roots-capable client: %v", names)
		}
	})

	t.Run("client without capabilities", func(t *testing.T) {
		cs, stderr := connectSDK(t, cfg, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}, "2025-11-25")
		ctx := ctxT(t, 60*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_sampling", Arguments: map[string]any{"prompt": "hi"}})
		if err == nil && !res.IsError {
			t.Errorf("sampling succeeded for a client that cannot sample: %q", textOf(res))
		}
		_ = stderr
	})
}

// connectSDKWithRoots is connectSDK with roots registered on the client.
func connectSDKWithRoots(t *testing.T, cfg string, opts *mcp.ClientOptions, version string, roots ...*mcp.Root) (*mcp.ClientSession, *syncBuffer, *mcp.Client) {
	t.Helper()
	cmd, stderr := proxyCmd(cfg)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-go-sdk", Version: "1.0.0"}, opts)
	client.AddRoots(roots...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting: %v\n%s", err, stderr)
	}
	t.Cleanup(func() {
		children := childPIDs(cmd.Process.Pid)
		cs.Close()
		checkStderr(t, stderr)
		assertGone(t, children)
	})
	return cs, stderr, client
}

// TestSlowClientAnswer: while the client takes its time over an upstream's request (a
// person answering an elicitation form), the call that triggered it does not time out.
func TestSlowClientAnswer(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, fmt.Sprintf("upstream \"everything\" {\n  command = [%s]\n  namespace = \"ev\"\n  protocol = \"legacy\"\n  timeout = \"1s\"\n}\n", q(everythingBin)))
	cs, _ := connectSDK(t, cfg, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			time.Sleep(2500 * time.Millisecond) // longer than the upstream's timeout
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "slow", "email": "s@example.com", "name": "S", "age": 1}}, nil
		},
	}, "2025-11-25")
	res, err := cs.CallTool(ctxT(t, 30*time.Second), &mcp.CallToolParams{Name: "ev__test_elicitation", Arguments: map[string]any{"message": "take your time"}})
	if err != nil || res.IsError {
		t.Errorf("a slow answer timed the call out: %v %q", err, textOf(res))
	}
}
