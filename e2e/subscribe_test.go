package e2e

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResourceSubscription subscribes a legacy client to a resource the Go SDK
// everything-server updates every few seconds, with that upstream legacy (subscribe is
// routed to it) and modern (subscribe becomes a subscriptions/listen upstream): updates
// reach the client with the URI it subscribed to.
func TestResourceSubscription(t *testing.T) {
	t.Parallel()
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era+" upstream", func(t *testing.T) {
			t.Parallel()
			cfg := writeConfig(t, everythingUpstreamEra("everything", "ev", era))
			var updates atomic.Int32
			var mu sync.Mutex
			var uri string
			cs, stderr := connectSDK(t, cfg, &mcp.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
					mu.Lock()
					uri = r.Params.URI
					mu.Unlock()
					updates.Add(1)
				},
			}, "2025-11-25")
			ctx := ctxT(t, 60*time.Second)
			if !cs.InitializeResult().Capabilities.Resources.Subscribe {
				t.Fatalf("the proxy does not offer resource subscriptions")
			}
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
				t.Fatalf("subscribe: %v", err)
			}
			deadline := time.Now().Add(15 * time.Second)
			for updates.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("no resources/updated within 15s\n%s", stderr)
				}
				time.Sleep(100 * time.Millisecond)
			}
			mu.Lock()
			if uri != "test://watched-resource" {
				t.Errorf("update for %q", uri)
			}
			mu.Unlock()
			if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://watched-resource"}); err != nil {
				t.Errorf("unsubscribe: %v", err)
			}
		})
	}
}

// TestListChangedBurst has two upstreams change their tools at the same moment: the
// client gets one tools/list_changed for the burst. That nothing else of the burst
// follows is shown without waiting: a later prompts change (a sentinel) is flushed after
// anything still pending, on the same ordered stream, so when its prompts/list_changed
// arrives every tools/list_changed of the burst has arrived too.
func TestListChangedBurst(t *testing.T) {
	t.Parallel()
	rc := startRaw(t, writeConfig(t, everythingUpstream("one", "one")+everythingUpstream("two", "two")))
	rc.initialize()
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	tools, answered, sentinel := 0, 0, false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		line := rc.next(time.Until(deadline))
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		switch {
		case m.Method == "notifications/tools/list_changed":
			tools++
		case m.Method == "notifications/prompts/list_changed":
			if n := tools; n != 1 {
				t.Errorf("a burst of changes from two upstreams gave %d tools/list_changed, want 1", n)
			}
			return
		case m.Method == "" && string(m.ID) == "1":
			if tools != 0 {
				t.Errorf("%d tools/list_changed before anything changed (the startup is not news)", tools)
			}
			rc.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"one__test_trigger_tool_change","arguments":{}}}`)
			rc.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"two__test_trigger_tool_change","arguments":{}}}`)
		case m.Method == "" && (string(m.ID) == "2" || string(m.ID) == "3"):
			answered++
		}
		if !sentinel && answered == 2 && tools >= 1 {
			sentinel = true
			rc.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"one__test_trigger_prompt_change","arguments":{}}}`)
		}
	}
	t.Fatalf("no prompts/list_changed after the sentinel (tools/list_changed: %d, answers: %d)", tools, answered)
}
