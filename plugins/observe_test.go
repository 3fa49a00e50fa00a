package plugins

import (
	"errors"
	"sync"
	"testing"
	"time"

	pb "github.com/mcp-proxy/mcp-proxy/plugins/proto"
)

type hookLog struct {
	mu     sync.Mutex
	events []HookEvent
}

func (l *hookLog) PluginHook(e HookEvent) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *hookLog) all() []HookEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]HookEvent(nil), l.events...)
}

// TestObserverSeesHooks: each crossing is reported once with its hook and latency; a
// plugin that fails, however its failure mode treats the call, is reported with its error.
func TestObserverSeesHooks(t *testing.T) {
	f := &fakePlugin{
		before: func(*pb.BeforeRequest) (*pb.BeforeResponse, error) {
			time.Sleep(2 * time.Millisecond)
			return &pb.BeforeResponse{}, nil
		},
		after: func(*pb.AfterRequest) (*pb.AfterResponse, error) { return nil, errors.New("boom") },
	}
	var seen hookLog
	in := testInstance(t, Spec{Name: "watched", FailOpen: true}, hookBefore|hookAfter, f)
	in.observer = &seen
	if _, err, _ := run(t, in, toolCall("gh__x", `{"name":"x"}`, nil), `{"ok":1}`, nil); err != nil {
		t.Fatal(err)
	}
	got := seen.all()
	if len(got) != 2 {
		t.Fatalf("events: %+v", got)
	}
	if b := got[0]; b.Plugin != "watched" || b.Hook != HookBefore || b.Err != nil || b.Duration < 2*time.Millisecond {
		t.Errorf("before: %+v", b)
	}
	if a := got[1]; a.Plugin != "watched" || a.Hook != HookAfter || a.Err == nil {
		t.Errorf("after: %+v", a)
	}
}
