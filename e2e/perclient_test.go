package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPerClientUpstream runs a per-client upstream behind the HTTP front end: each
// client session gets its own upstream process, initialized with that client's
// capabilities, so each client's sampling requests reach that client and no other; the
// cap evicts idle sessions to make room, and a session's process ends with the client's
// session and when idle.
func TestPerClientUpstream(t *testing.T) {
	t.Parallel()
	url, stderr, cmd := startHTTPProxyCmd(t, fmt.Sprintf(`upstream "ev" {
  command      = [%s]
  namespace    = "ev"
  protocol     = "legacy"
  session      = "per-client"
  max_sessions = 2
  idle_timeout = "3s"
}
`, q(everythingBin)))
	procs := func() int { return len(childPIDs(cmd.Process.Pid)) }

	connect := func(name string) *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
			CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "answered by " + name}}, nil
			},
		})
		// Legacy sessions: a stateless modern client has no session to give its own.
		cs, err := client.Connect(ctxT(t, 60*time.Second), &mcp.StreamableClientTransport{Endpoint: url},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("connect %s: %v\n%s", name, err, stderr)
		}
		return cs
	}
	a, b := connect("alice"), connect("bob")
	ctx := ctxT(t, 90*time.Second)

	// Concurrent sampling from both clients' calls: each answer comes from its own client.
	var wg sync.WaitGroup
	for _, c := range []struct {
		name string
		cs   *mcp.ClientSession
	}{{"alice", a}, {"bob", b}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_sampling", Arguments: map[string]any{"prompt": "who?"}})
				if err != nil || !strings.Contains(textOf(res), "answered by "+c.name) {
					t.Errorf("%s's sampling: %v %q", c.name, err, textOf(res))
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := procs(); n != 3 {
		t.Errorf("%d upstream processes with two clients, want 3 (catalogue + one per client)", n)
	}

	// A third client while both sessions are idle: the least recently used makes room.
	c := connect("carol")
	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_sampling", Arguments: map[string]any{"prompt": "who?"}})
	if err != nil || !strings.Contains(textOf(res), "answered by carol") {
		t.Errorf("carol's sampling: %v %q\n%s", err, textOf(res), stderr)
	}
	waitFor(t, 10*time.Second, "eviction to leave 3 processes", func() bool { return procs() == 3 }, stderr)
	if !strings.Contains(stderr.String(), "evicted to make room") {
		t.Errorf("no eviction logged\n%s", stderr)
	}

	// Closing a client session (DELETE) ends its upstream session.
	c.Close()
	waitFor(t, 10*time.Second, "carol's session process to end", func() bool { return procs() == 2 }, stderr)
	// The remaining one ends when idle.
	waitFor(t, 15*time.Second, "the idle session to end", func() bool { return procs() == 1 }, stderr)
	a.Close()
	b.Close()
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool, logs fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\n%s", what, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCapabilitySessions: a shared legacy HTTP upstream gets one session per distinct
// set of client capabilities, so the server never asks a client for what it did not
// declare: a client without sampling gets the server's own "no sampling" answer, and a
// client with it is asked.
func TestCapabilitySessions(t *testing.T) {
	t.Parallel()
	upURL := startHTTPEverything(t, false) // stateful: a legacy-era session
	url, stderr := startHTTPProxy(t, fmt.Sprintf("upstream \"ev\" {\n  url = %q\n  namespace = \"ev\"\n}\n", upURL))
	ctx := ctxT(t, 90*time.Second)
	connect := func(name string, sampling bool) *mcp.ClientSession {
		opts := &mcp.ClientOptions{}
		if sampling {
			opts.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled for " + name}}, nil
			}
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("connect %s: %v\n%s", name, err, stderr)
		}
		return cs
	}
	withSampling := connect("with", true) // the first client: its capabilities start the upstream
	without := connect("without", false)
	defer withSampling.Close()
	defer without.Close()

	res, err := withSampling.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_sampling", Arguments: map[string]any{"prompt": "hi"}})
	if err != nil || !strings.Contains(textOf(res), "sampled for with") {
		t.Errorf("client with sampling: %v %q", err, textOf(res))
	}
	res, err = without.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_sampling", Arguments: map[string]any{"prompt": "hi"}})
	if err == nil && strings.Contains(textOf(res), "sampled for") {
		t.Errorf("a client without sampling was sampled: %q", textOf(res))
	}
	if strings.Contains(stderr.String(), "cannot relay sampling/createMessage") {
		t.Errorf("the server asked a client for sampling it did not declare (the proxy had to refuse)\n%s", stderr)
	}
	if !strings.Contains(stderr.String(), "upstream session started for another set of client capabilities") {
		t.Errorf("no second session for the other capabilities\n%s", stderr)
	}
}
