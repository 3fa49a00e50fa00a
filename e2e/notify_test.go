package e2e

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestListChangedAndRestart checks that an upstream's tools/list_changed refreshes the
// merged catalogue and reaches the client, that an upstream crash and restart yield a
// refreshed catalogue and a notification, and that log messages name their upstream.
func TestListChangedAndRestart(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, everythingUpstream("everything", "ev")+testUpstream("bad", "bad", []string{"-stderr-chatter"}, ""))
	var changed atomic.Int32
	var logs atomic.Pointer[string]
	cs, stderr := connectSDK(t, cfg, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) },
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			l := r.Params.Logger
			logs.Store(&l)
		},
	}, "2025-11-25")
	ctx := ctxT(t, 90*time.Second)

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	before := toolNames(t, cs)

	// An upstream announces a change: the proxy re-fetches and tells the client once.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_trigger_tool_change"}); err != nil {
		t.Fatalf("trigger tool change: %v", err)
	}
	waitFor("tools/list_changed after an upstream change", func() bool { return changed.Load() >= 1 })
	after := toolNames(t, cs)
	if strings.Join(after, ",") == strings.Join(before, ",") {
		t.Errorf("catalogue not refreshed after list_changed (still %d tools)", len(after))
	}

	// Logging: the proxy names the upstream in logger.
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatalf("setLevel: %v", err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_tool_with_logging"}); err != nil {
		t.Fatalf("logging tool: %v", err)
	}
	waitFor("a log message", func() bool { return logs.Load() != nil })
	if l := *logs.Load(); !strings.HasPrefix(l, "everything") {
		t.Errorf("logger %q does not name the upstream", l)
	}

	// A crash does not take the upstream's tools out while it restarts (no list change
	// pair per crash): they stay listed, a call meanwhile is refused as unavailable
	// (-31000, retryable), and once it is back they answer again.
	n := changed.Load()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bad__crash"}); err == nil {
		t.Fatalf("crash tool returned no error")
	}
	if !slices.Contains(toolNames(t, cs), "bad__echo") {
		t.Errorf("the crashed upstream's tools left the list while it restarts")
	}
	waitFor("the restarted upstream to answer", func() bool {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bad__echo", Arguments: map[string]any{"x": 1}})
		if err != nil && !strings.Contains(err.Error(), "-31000") && !strings.Contains(err.Error(), "unavailable") && !strings.Contains(err.Error(), "restart") {
			t.Errorf("a call while the upstream restarts: %v (want the proxy's unavailable error)", err)
		}
		return err == nil && !res.IsError
	})
	if got := changed.Load(); got != n {
		t.Errorf("%d tools/list_changed for a crash and restart with the same tools, want none", got-n)
	}
	// The client's log level reached the upstream again after its restart.
	waitFor("logging/setLevel re-applied after the restart", func() bool {
		return strings.Count(stderr.String(), `received method=\"logging/setLevel\"`) >= 2
	})
}
