package router

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/clock"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// heldUpstream is a fake whose calls wait until released, and which records whether it
// was closed: what a drain is seen on.
type heldUpstream struct {
	*fakeUpstream
	mu      sync.Mutex
	held    []func()
	closed  bool
	started bool
}

func newHeld(name string, tools ...string) *heldUpstream {
	return &heldUpstream{fakeUpstream: newFake(name, tools...)}
}

func (h *heldUpstream) Start(context.Context) {
	h.mu.Lock()
	h.started = true
	h.mu.Unlock()
}

func (h *heldUpstream) Send(ctx context.Context, req *upstream.Request, done func(*jsonrpc.Message, error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = append(h.held, func() { done(h.Call(ctx, req)) })
}

func (h *heldUpstream) release() {
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.mu.Unlock()
	for _, f := range held {
		f()
	}
}

func (h *heldUpstream) waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

func (h *heldUpstream) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	return nil
}

func (h *heldUpstream) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

func exposedTools(r *Router) []string {
	var out []string
	for _, t := range r.Tools() {
		out = append(out, t.Name)
	}
	return out
}

// TestReconfigure adds, replaces and removes upstreams of a started router: the order of
// the new configuration decides collisions, a replaced upstream serves until its
// successor is published, a removed one drains its calls in flight before it closes, a
// call resolved before the removal and delivered after it gets a clear error, and
// clients get one list_changed for the lot.
func TestReconfigure(t *testing.T) {
	clk := clock.NewFake()
	r := New(Options{NotifyDelay: 20 * time.Millisecond, Clock: clk}, zerolog.Nop())
	a, b := newHeld("a", "x", "shared"), newHeld("b", "y")
	r.Add(a, "a")
	r.Add(b, "")
	r.Start(context.Background())
	r.rebuild()
	client := &recClient{}
	r.Subscribe(client)

	// A call to b is in flight when b is removed.
	inflight := make(chan error, 1)
	go func() {
		_, err := r.Call(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"y"}`)})
		inflight <- err
	}()
	for b.waiting() == 0 {
		time.Sleep(time.Millisecond)
	}

	c := newHeld("c", "shared", "z")
	a2 := newHeld("a", "x", "x2")
	retired, err := r.Reconfigure(context.Background(), Change{
		Add:    []Member{{Up: c, Namespace: ""}, {Up: a2, Namespace: "a"}},
		Remove: []string{"b"},
		Order:  []string{"c", "a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !c.started || !a2.started {
		t.Fatal("the added upstreams were not started")
	}
	if got, want := retired.Names(), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("retired %v, want %v", got, want)
	}
	if got, want := exposedTools(r), []string{"shared", "z", "a__x", "a__x2"}; !slices.Equal(got, want) {
		t.Fatalf("tools after the reload %v, want %v (c first: it is first in the new order)", got, want)
	}
	if _, err := call(t, r, mcp.MethodToolsCall, `{"name":"y"}`); err == nil {
		t.Fatal("a removed upstream's tool is still routable")
	}
	// The drain waits for the call in flight, which is answered.
	drained := make(chan int64, 1)
	go func() {
		n, _ := retired.Drain(context.Background())
		drained <- n
	}()
	time.Sleep(30 * time.Millisecond)
	if b.isClosed() {
		t.Fatal("b closed with a call in flight")
	}
	b.release()
	if err := <-inflight; err != nil {
		t.Fatalf("the call in flight on the removed upstream failed: %v", err)
	}
	if n := <-drained; n != 0 {
		t.Fatalf("drain abandoned %d calls", n)
	}
	if !b.isClosed() || !a.isClosed() {
		t.Fatal("retired upstreams not closed after the drain")
	}
	// A call resolved to a stopped upstream is refused with the proxy's error.
	var je *jsonrpc.Error
	r.deliver(context.Background(), &Call{owner: retired.list[1], Request: &Request{}}, func(_ json.RawMessage, err error) {
		errors.As(err, &je)
	})
	if je == nil || je.Code != mcp.CodeUpstreamUnavailable {
		t.Fatalf("call to a stopped upstream: %v, want the upstream-unavailable proxy error", je)
	}
	clk.Advance(30 * time.Millisecond)
	client.mu.Lock()
	got := client.got
	client.mu.Unlock()
	if !slices.Equal(got, []string{mcp.NotificationToolsListChanged}) {
		t.Fatalf("client got %v, want one tools/list_changed", got)
	}
}

// TestReconfigureDrainTimeout: a drain bounded by its context stops the upstream with
// the calls still in flight counted.
func TestReconfigureDrainTimeout(t *testing.T) {
	r := New(Options{}, zerolog.Nop())
	a := newHeld("a", "x")
	r.Add(a, "")
	r.Start(context.Background())
	r.rebuild()
	go r.Call(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"x"}`)})
	for a.waiting() == 0 {
		time.Sleep(time.Millisecond)
	}
	retired, err := r.Reconfigure(context.Background(), Change{Remove: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	n, _ := retired.Drain(ctx)
	if n != 1 || !a.isClosed() {
		t.Fatalf("drain abandoned %d calls (closed %v), want 1 and closed", n, a.isClosed())
	}
	a.release()
}

// TestReconfigureFilters: a filter that does not compile changes nothing; a new filter
// of an upstream that stays applies from the rebuild.
func TestReconfigureFilters(t *testing.T) {
	r := New(Options{}, zerolog.Nop())
	a := newFake("a", "x", "y")
	r.Add(a, "")
	r.rebuild()
	if _, err := r.Reconfigure(context.Background(), Change{Filters: map[string]*Filter{"a": {Tools: Selection{Include: []string{`bad\`}}}}}); err == nil {
		t.Fatal("a bad pattern was accepted")
	}
	if got := exposedTools(r); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("tools %v after a refused change", got)
	}
	if _, err := r.Reconfigure(context.Background(), Change{Filters: map[string]*Filter{"a": {Tools: Selection{Exclude: []string{"y"}}}}}); err != nil {
		t.Fatal(err)
	}
	if got := exposedTools(r); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("tools %v, want [x] with y excluded", got)
	}
	if _, err := r.Reconfigure(context.Background(), Change{Filters: map[string]*Filter{"a": nil}}); err != nil {
		t.Fatal(err)
	}
	if got := exposedTools(r); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("tools %v, want both again without a filter", got)
	}
}

// hideY is a guard that hides the tool y.
type hideY struct{}

func (hideY) Visible(_ *Request, t *Target) bool { return t.Name != "y" }

// TestReguard: a new guard applies to the next list, and clients are told.
func TestReguard(t *testing.T) {
	clk := clock.NewFake()
	r := New(Options{NotifyDelay: time.Millisecond, Clock: clk}, zerolog.Nop())
	r.Add(newFake("a", "x", "y"), "")
	r.rebuild()
	client := &recClient{}
	r.Subscribe(client)
	list := func() string {
		res, err := call(t, r, mcp.MethodToolsList, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		return string(res)
	}
	before := list()
	r.Reguard(hideY{}, TargetTool)
	after := list()
	if before == after || len(after) >= len(before) {
		t.Fatalf("the list did not change with the guard:\n%s\n%s", before, after)
	}
	clk.Advance(2 * time.Millisecond)
	if client.count() != 1 {
		t.Fatalf("client got %v, want one tools/list_changed", client.got)
	}
}
