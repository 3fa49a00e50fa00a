package upstream

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// recorder is an Observer that hands events to the test.
type recorder chan Event

func (r recorder) UpstreamEvent(e Event) { r <- e }

// next returns the next event, failing the test after a generous wait.
func (r recorder) next(t *testing.T) Event {
	t.Helper()
	select {
	case e := <-r:
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("no upstream event within 30s")
	}
	return Event{}
}

// TestObserverLifecycle: an observer sees a start, readiness with the era, and the stop;
// and for a command that cannot start, the failure and the restart with its backoff.
func TestObserverLifecycle(t *testing.T) {
	t.Run("ready then stopped", func(t *testing.T) {
		rec := make(recorder, 64)
		u := New(Spec{
			Name:    "fake",
			Command: []string{os.Args[0]},
			Env: map[string]string{"UPSTREAM_TEST_SERVER": "dual", "UPSTREAM_TEST_RECORD": filepath.Join(t.TempDir(), "in.jsonl"),
				"GORACE": "atexit_sleep_ms=0"},
			StartupTimeout: 30 * time.Second, StopGrace: time.Second, Protocol: ProtocolAuto,
			ClientName: "test", ClientVersion: "1", Observer: rec,
		}, zerolog.Nop(), nopEvents{})
		u.Start(context.Background())
		if e := rec.next(t); e.Kind != EventStarting || e.Upstream != "fake" || e.Time.IsZero() {
			t.Fatalf("first event %+v", e)
		}
		e := rec.next(t)
		if e.Kind != EventReady || !e.Info.Modern || e.Duration <= 0 {
			t.Fatalf("second event %+v (%v); want ready, modern, with its duration", e, e.Err)
		}
		if err := u.Close(); err != nil {
			t.Fatal(err)
		}
		if e := rec.next(t); e.Kind != EventStopped {
			t.Fatalf("after Close: %+v", e)
		}
	})
	t.Run("failing command restarts", func(t *testing.T) {
		rec := make(recorder, 64)
		u := New(Spec{
			Name: "missing", Command: []string{filepath.Join(t.TempDir(), "no-such-program")},
			StartupTimeout: 5 * time.Second, StopGrace: time.Second, BackoffMin: time.Millisecond, BackoffMax: time.Millisecond,
			ClientName: "test", ClientVersion: "1", Observer: rec,
		}, zerolog.Nop(), nopEvents{})
		u.Start(context.Background())
		want := []EventKind{EventStarting, EventStartFailed, EventRestarting, EventStarting}
		for i, k := range want {
			e := rec.next(t)
			if e.Kind != k {
				t.Fatalf("event %d: %v (%v); want %v", i, e.Kind, e.Err, k)
			}
			if k == EventStartFailed && e.Err == nil {
				t.Errorf("start_failed without its error")
			}
			if k == EventRestarting && e.Backoff <= 0 {
				t.Errorf("restarting without its backoff")
			}
		}
		if err := u.Close(); err != nil {
			t.Fatal(err)
		}
		for e := rec.next(t); e.Kind != EventStopped; e = rec.next(t) {
		}
	})
}

func TestEventKindNames(t *testing.T) {
	for k := EventStarting; k <= EventCallTimedOut; k++ {
		if k.String() == "unknown" {
			t.Errorf("event kind %d has no name", k)
		}
	}
	if EventKind(99).String() != "unknown" {
		t.Error("an unknown kind has a name")
	}
}
