package e2e

import (
	"context"
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
// client gets one tools/list_changed for the burst, and the refreshed catalogue.
func TestListChangedBurst(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, everythingUpstream("one", "one")+everythingUpstream("two", "two"))
	var changed atomic.Int32
	cs, _ := connectSDK(t, cfg, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) },
	}, "2025-11-25")
	ctx := ctxT(t, 60*time.Second)
	toolNames(t, cs)
	if n := changed.Load(); n != 0 {
		t.Errorf("%d list_changed before anything changed (the startup is not news)", n)
	}
	var wg sync.WaitGroup
	for _, name := range []string{"one__test_trigger_tool_change", "two__test_trigger_tool_change"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name}); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for changed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // anything else of the burst would have arrived by now
	if n := changed.Load(); n != 1 {
		t.Errorf("a burst of changes from two upstreams gave %d notifications, want 1", n)
	}
}
