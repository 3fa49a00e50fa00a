package router

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// lateUpstream is a scripted upstream whose first start attempt finishes when the test
// says (start): its catalogue is empty until then, and, as a real upstream does, the
// router's catalogue is rebuilt before its first attempt counts as finished.
type lateUpstream struct {
	*scriptUpstream
	done      chan struct{}
	published atomic.Bool // the catalogue is visible (before done, as upstream.connect does)
	cat       *upstream.Catalogue
	once      sync.Once
}

func newLate(name string, tools ...string) *lateUpstream {
	s := newScript(name, tools...)
	l := &lateUpstream{scriptUpstream: s, done: make(chan struct{}), cat: s.cat}
	s.cat = &upstream.Catalogue{}
	return l
}

func (l *lateUpstream) Catalogue() *upstream.Catalogue {
	if l.published.Load() {
		return l.cat
	}
	return &upstream.Catalogue{}
}

func (l *lateUpstream) FirstAttemptDone() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

func (l *lateUpstream) WaitFirstAttempt(ctx context.Context) error {
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start finishes the first attempt: the catalogue is published and r rebuilt first,
// then the attempt counts as finished (the order of upstream.connect and supervise).
func (l *lateUpstream) start(r *Router) {
	l.once.Do(func() {
		l.published.Store(true)
		r.rebuild()
		close(l.done)
	})
}

type outcome struct {
	res json.RawMessage
	err error
}

func dispatchAsync(r *Router, ctx context.Context, method, params string) <-chan outcome {
	ch := make(chan outcome, 1)
	r.Dispatch(ctx, &Request{Method: method, Params: json.RawMessage(params)}, func(res json.RawMessage, err error) {
		ch <- outcome{res, err}
	})
	return ch
}

// TestCallWaitsForUpstreamStarting: a call naming a tool that is not listed while an
// upstream is still starting is not refused as unknown: it waits, and is routed once the
// upstream lists the name; a name nobody lists is refused once no upstream is left
// starting; a cancelled wait answers ErrCancelled; and Settled/Starting say who starts.
func TestCallWaitsForUpstreamStarting(t *testing.T) {
	fast := newScript("fast", "t")
	fast.started = 1
	late := newLate("late", "t")
	r := New(Options{}, zerolog.Nop())
	r.Add(fast, "fast")
	r.Add(late, "late")
	r.rebuild()
	t.Cleanup(func() { late.start(r) })

	if r.Settled() || strings.Join(r.Starting(), ",") != "late" {
		t.Fatalf("settled %v, starting %v; want late starting", r.Settled(), r.Starting())
	}
	// The fast upstream's tool is served at once.
	if _, err := r.Call(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"fast__t"}`)}); err != nil {
		t.Fatalf("fast__t: %v", err)
	}

	lateCall := dispatchAsync(r, context.Background(), mcp.MethodToolsCall, `{"name":"late__t"}`)
	unknown := dispatchAsync(r, context.Background(), mcp.MethodToolsCall, `{"name":"nobody__t"}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := dispatchAsync(r, ctx, mcp.MethodPromptsGet, `{"name":"late__p"}`)
	cancel()
	if o := <-cancelled; !errors.Is(o.err, ErrCancelled) {
		t.Errorf("cancelled wait: %v, want ErrCancelled", o.err)
	}
	select {
	case o := <-lateCall:
		t.Fatalf("late__t answered before its upstream started: %s %v", o.res, o.err)
	case o := <-unknown:
		t.Fatalf("nobody__t answered while an upstream was starting: %s %v", o.res, o.err)
	default:
	}

	late.start(r)
	if o := <-lateCall; o.err != nil || !strings.Contains(string(o.res), "ok from late") {
		t.Errorf("late__t after its upstream started: %s %v", o.res, o.err)
	}
	var je *jsonrpc.Error
	if o := <-unknown; !errors.As(o.err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("nobody__t: %v, want unknown tool", o.err)
	}
	if !r.Settled() || r.Starting() != nil {
		t.Errorf("after the start: settled %v, starting %v", r.Settled(), r.Starting())
	}
	// Settled: an unknown name is refused at once.
	if o := <-dispatchAsync(r, context.Background(), mcp.MethodToolsCall, `{"name":"nobody__t"}`); !errors.As(o.err, &je) {
		t.Errorf("nobody__t once settled: %v", o.err)
	}
}

// TestURIAndCompletionWaitForUpstreamStarting: resources/read of a URI and a completion
// whose reference nobody lists yet wait, as calls do, for the upstreams still starting
// (a URI a ready upstream's template matches goes at once); once they have started, the
// request is routed to the one that lists it, or refused as unknown.
func TestURIAndCompletionWaitForUpstreamStarting(t *testing.T) {
	fast := newScript("fast", "t")
	fast.started = 1
	fast.cat.Templates = []json.RawMessage{json.RawMessage(`{"uriTemplate":"fast://{x}","name":"tf"}`)}
	late := newLate("late", "t")
	late.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"late://doc","name":"doc"}`)}
	late.cat.Prompts = []json.RawMessage{json.RawMessage(`{"name":"p"}`)}
	r := New(Options{}, zerolog.Nop())
	r.Add(fast, "fast")
	r.Add(late, "late")
	r.rebuild()
	t.Cleanup(func() { late.start(r) })

	if o := <-dispatchAsync(r, context.Background(), mcp.MethodResourcesRead, `{"uri":"fast://1"}`); o.err != nil {
		t.Errorf("a URI a ready upstream's template matches: %v", o.err)
	}
	read := dispatchAsync(r, context.Background(), mcp.MethodResourcesRead, `{"uri":"late://doc"}`)
	nobody := dispatchAsync(r, context.Background(), mcp.MethodResourcesRead, `{"uri":"nobody://x"}`)
	complete := dispatchAsync(r, context.Background(), mcp.MethodCompletionComplete, `{"ref":{"type":"ref/prompt","name":"late__p"},"argument":{"name":"a","value":""}}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := dispatchAsync(r, ctx, mcp.MethodResourcesRead, `{"uri":"late://other"}`)
	cancel()
	if o := <-cancelled; !errors.Is(o.err, ErrCancelled) {
		t.Errorf("cancelled wait: %v, want ErrCancelled", o.err)
	}
	for what, ch := range map[string]<-chan outcome{"late://doc": read, "nobody://x": nobody, "completion": complete} {
		select {
		case o := <-ch:
			t.Fatalf("%s answered while an upstream was starting: %s %v", what, o.res, o.err)
		default:
		}
	}

	late.start(r)
	if o := <-read; o.err != nil || !strings.Contains(string(o.res), "ok from late") {
		t.Errorf("late://doc after its upstream started: %s %v", o.res, o.err)
	}
	if o := <-complete; o.err != nil || !strings.Contains(string(o.res), "ok from late") {
		t.Errorf("completion of late__p after its upstream started: %s %v", o.res, o.err)
	}
	// Two upstreams serve resources: a URI nobody lists has no owner.
	if o := <-nobody; o.err == nil {
		t.Errorf("nobody://x once settled: %s, want an error", o.res)
	}
}
