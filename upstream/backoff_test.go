package upstream

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/transport"
	"github.com/rs/zerolog"
)

// eventLog is an Observer that hands every event to the test.
type eventLog chan Event

func (l eventLog) UpstreamEvent(e Event) { l <- e }

// next returns the next event of kind k, skipping others.
func (l eventLog) next(t *testing.T, k EventKind) Event {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case e := <-l:
			if e.Kind == k {
				return e
			}
		case <-deadline:
			t.Fatalf("no %v event within %s", k, waitFor)
		}
	}
}

// killChild SIGKILLs the upstream's current child process.
func killChild(t *testing.T, u *Upstream) {
	t.Helper()
	u.mu.Lock()
	c := u.cur
	u.mu.Unlock()
	if c == nil {
		t.Fatal("no current child to kill")
	}
	p, ok := c.proc.(*transport.Process)
	if !ok {
		t.Fatalf("the link is a %T, not a process", c.proc)
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// TestBackoffResetsAfterServing: a child that became ready and answered a call is not
// crash-looping, so when it is killed it is restarted after BackoffMin however often
// that happens; a child killed before it answered anything is restarted ever more
// slowly. The backoffs are read from the restart events, not timed.
func TestBackoffResetsAfterServing(t *testing.T) {
	noLeaks(t)
	spec := childSpec("crash")
	spec.BackoffMin, spec.BackoffMax = 20*time.Millisecond, time.Hour
	events := make(eventLog, 256)
	spec.Observer = events
	u := New(spec, zerolog.Nop(), newRecEvents()) // its changed channel holds the 18 changes
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitFor)
	defer cancel()
	u.Start(ctx)
	maxReset := time.Duration(float64(spec.BackoffMin) * 1.2) // BackoffMin with its jitter

	for i := range 4 {
		events.next(t, EventReady)
		if _, err := u.Call(ctx, &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)}); err != nil {
			t.Fatalf("kill %d: the call before it: %v", i, err)
		}
		killChild(t, u)
		if b := events.next(t, EventRestarting).Backoff; b > maxReset {
			t.Errorf("kill %d of a child that served a call: restarted after %s, want at most %s", i, b, maxReset)
		}
	}

	prev := time.Duration(0)
	for i := range 3 {
		events.next(t, EventReady)
		killChild(t, u) // before it answered anything
		b := events.next(t, EventRestarting).Backoff
		if b <= maxReset || b <= prev {
			t.Errorf("kill %d of a child that served nothing: restarted after %s (previous %s), want a growing backoff", i, b, prev)
		}
		prev = b
	}

	// Serving once more resets it again.
	events.next(t, EventReady)
	if _, err := u.Call(ctx, &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)}); err != nil {
		t.Fatal(err)
	}
	killChild(t, u)
	if b := events.next(t, EventRestarting).Backoff; b > maxReset {
		t.Errorf("after serving again: restarted after %s, want at most %s", b, maxReset)
	}
}
