package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// Tests of the leader/follower read (lead.go) over transport.Pipe, whose link can be led
// as a child's stdout can: the test plays the server and looks at who holds the read
// role. lead_process_test.go does the same with a real child process.

// countHook is an InlineHook that counts what it is told.
type countHook struct{ started, ended atomic.Int32 }

func (h *countHook) InlineStarted() { h.started.Add(1) }
func (h *countHook) InlineEnded()   { h.ended.Add(1) }

// conn returns the upstream's current connection.
func (h *piped) conn() *conn {
	h.t.Helper()
	h.u.mu.Lock()
	defer h.u.mu.Unlock()
	if h.u.cur == nil {
		h.t.Fatal("no current connection")
	}
	return h.u.cur
}

// role describes who holds c's read role: "reader" (the reader goroutine), "call N" (the
// caller of the call with the upstream's id N), or "" (nobody).
func (c *conn) role() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.bgHolds:
		return "reader"
	case c.holder != nil:
		for id, pc := range c.pending {
			if pc == c.holder {
				return "call " + strconv.FormatInt(id, 10)
			}
		}
		return "a finished call"
	}
	return ""
}

// waitRole waits until c's read role is held as want says (see role).
func waitRole(t *testing.T, c *conn, want string) {
	t.Helper()
	deadline := time.Now().Add(pipeWait)
	for c.role() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the read role is held by %q; want %q", c.role(), want)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// inlineSend sends req under an inline context on its own goroutine, as the HTTP front
// end's handler does, and returns where the outcome arrives; the outcome says whether
// done had run before Send returned.
type inlineResult struct {
	callResult
	doneFirst bool // done ran before Send returned
}

func (h *piped) inlineSend(req *Request, hook InlineHook) <-chan inlineResult {
	out := make(chan inlineResult, 1)
	go func() {
		ch := make(chan callResult, 1)
		h.u.Send(AllowInline(context.Background(), hook), req, func(m *jsonrpc.Message, err error) { ch <- callResult{m, err} })
		select {
		case r := <-ch:
			out <- inlineResult{callResult: r, doneFirst: true}
		default:
			// done runs elsewhere (a timeout, a cancellation, the connection failing)
			out <- inlineResult{callResult: <-ch}
		}
	}()
	return out
}

func (h *piped) inlineResult(ch <-chan inlineResult) inlineResult {
	h.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(pipeWait):
		h.t.Fatal("the inline call did not complete")
	}
	return inlineResult{}
}

func callTool(name string) *Request {
	return &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"` + name + `"}`)}
}

// readyPiped starts a legacy piped upstream and plays its handshake. Unless idle is set,
// the read role stays free when nobody needs it (the reader goroutine does not take it
// after idleReadGrace), so that who reads is known.
func readyPiped(t *testing.T, spec Spec, idle bool) (*piped, *pipeEnd) {
	if !idle {
		old := idleReadGrace
		idleReadGrace = time.Hour
		t.Cleanup(func() { idleReadGrace = old })
	}
	spec.Protocol = ProtocolLegacy
	h := newPiped(t, spec).start()
	srv := h.accept()
	srv.legacy(`{}`)
	h.await(EventReady)
	return h, srv
}

// TestLeadInlineCallReadsItsOwnAnswer: an inline call made while the reader goroutine
// reads waits for the answer it hands over; after it, the role is free, and the next
// inline call reads its own answer: done has run when Send returns, and the role is
// free again afterwards. The hook sees each call start and end.
func TestLeadInlineCallReadsItsOwnAnswer(t *testing.T) {
	noLeaks(t)
	h, srv := readyPiped(t, Spec{}, false)
	c := h.conn()
	var hook countHook

	first := h.inlineSend(callTool("one"), &hook)
	srv.answer(srv.expect(mcp.MethodToolsCall), `{"n":1}`)
	if r := h.inlineResult(first); r.err != nil || string(r.msg.Result) != `{"n":1}` || !r.doneFirst {
		t.Fatalf("first call: %+v", r)
	}
	waitRole(t, c, "") // the reader goroutine let go: nothing else is in flight

	second := h.inlineSend(callTool("two"), &hook)
	m := srv.expect(mcp.MethodToolsCall)
	waitRole(t, c, "call "+m.ID.Raw())
	srv.answer(m, `{"n":2}`)
	if r := h.inlineResult(second); r.err != nil || string(r.msg.Result) != `{"n":2}` || !r.doneFirst {
		t.Fatalf("second call: %+v", r)
	}
	if role := c.role(); role != "" {
		t.Errorf("after the call the role is held by %q", role)
	}
	if s, e := hook.started.Load(), hook.ended.Load(); s != 2 || e != 2 {
		t.Errorf("hook: %d started, %d ended; want 2, 2", s, e)
	}
}

// TestLeadNotificationsWhileIdle: with no call in flight and the role left free by an
// inline call, what the server says on its own (a notification, a request, the end of
// its output) is still read and acted on.
func TestLeadNotificationsWhileIdle(t *testing.T) {
	noLeaks(t)
	h, srv := readyPiped(t, Spec{}, true)
	ch := h.inlineSend(callTool("one"), nil)
	srv.answer(srv.expect(mcp.MethodToolsCall), `{}`)
	h.inlineResult(ch) // the role is left free, and taken by the reader goroutine later

	srv.say(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"idle"}}`)
	if n := recvT(t, h.ev.notes); n.Method != "notifications/message" {
		t.Errorf("notification: %s", n)
	}
	srv.say(`{"jsonrpc":"2.0","id":"s1","method":"ping"}`)
	if m := srv.expect(""); m.ID.Raw() != `"s1"` {
		t.Errorf("answer to the server's request: %s", m)
	}
	// And inline calls are answered as before.
	ch = h.inlineSend(callTool("two"), nil)
	srv.answer(srv.expect(mcp.MethodToolsCall), `{}`)
	if r := h.inlineResult(ch); r.err != nil || !r.doneFirst {
		t.Fatalf("call after the idle messages: %+v", r)
	}
	// The end of the server's output is seen with nothing in flight: it starts again.
	srv.Fail(errors.New("gone"))
	srv2 := h.accept()
	srv2.legacy(`{}`)
	h.await(EventReady)
}

// TestLeadCancelledWhileReading: a call cancelled while its own goroutine reads the link
// returns at once with ErrCancelled (its read is interrupted), the server is told, its
// late answer is dropped, and the next inline call leads and reads its answer (the
// interruption did not outlive the cancelled call, and nothing of the link was lost).
func TestLeadCancelledWhileReading(t *testing.T) {
	noLeaks(t)
	h, srv := readyPiped(t, Spec{}, false)
	c := h.conn()
	warm := h.inlineSend(callTool("warm"), nil)
	srv.answer(srv.expect(mcp.MethodToolsCall), `{}`)
	h.inlineResult(warm)
	waitRole(t, c, "")

	var cancel Canceller
	req := callTool("slow")
	req.Cancel = &cancel
	ch := h.inlineSend(req, nil)
	m := srv.expect(mcp.MethodToolsCall)
	waitRole(t, c, "call "+m.ID.Raw())
	cancel.Cancel()
	if r := h.inlineResult(ch); !errors.Is(r.err, ErrCancelled) {
		t.Fatalf("cancelled call: %+v", r)
	}
	if n := srv.expect(mcp.NotificationCancelled); pipeField(t, n.Params, "requestId") != m.ID.Raw() {
		t.Errorf("cancellation: %s", n)
	}
	srv.answer(m, `{"late":true}`) // dropped
	next := h.inlineSend(callTool("next"), nil)
	m2 := srv.expect(mcp.MethodToolsCall)
	srv.answer(m2, `{"next":true}`)
	if r := h.inlineResult(next); r.err != nil || string(r.msg.Result) != `{"next":true}` {
		t.Fatalf("the call after the cancelled one: %+v", r)
	}
	waitRole(t, c, "")
}

// TestLeadTimesOutWhileReading: a call whose goroutine reads the link and that the
// server never answers times out; the next call works.
func TestLeadTimesOutWhileReading(t *testing.T) {
	noLeaks(t)
	h, srv := readyPiped(t, Spec{Timeout: 100 * time.Millisecond}, false)
	c := h.conn()
	warm := h.inlineSend(callTool("warm"), nil)
	srv.answer(srv.expect(mcp.MethodToolsCall), `{}`)
	h.inlineResult(warm)
	waitRole(t, c, "")

	ch := h.inlineSend(callTool("never"), nil)
	srv.expect(mcp.MethodToolsCall)
	if r := h.inlineResult(ch); pipeCode(r.err) != mcp.CodeUpstreamTimeout {
		t.Fatalf("unanswered call: %+v; want the proxy's timeout", r)
	}
	srv.expect(mcp.NotificationCancelled)
	next := h.inlineSend(callTool("next"), nil)
	srv.answer(srv.expect(mcp.MethodToolsCall), `{"next":true}`)
	if r := h.inlineResult(next); r.err != nil || string(r.msg.Result) != `{"next":true}` || !r.doneFirst {
		t.Fatalf("the call after the timed-out one: %+v", r)
	}
}

// TestLeadManyCallers: inline callers and ordinary (asynchronous) calls at once, with
// progress notifications, answered out of order in bursts: every call gets its own
// answer and progress, whoever reads; after an inline call the role is free, and
// nothing is left in the conn's tables.
func TestLeadManyCallers(t *testing.T) {
	noLeaks(t)
	h, srv := readyPiped(t, Spec{}, false)
	c := h.conn()
	const inline, async = 40, 10
	type outcome struct {
		name string
		r    inlineResult
	}
	outcomes := make(chan outcome, inline+async)
	var progressed sync.Map // tool name → the progress it saw
	for i := range inline + async {
		name := fmt.Sprintf("t%d", i)
		req := &Request{
			Method: mcp.MethodToolsCall,
			Params: json.RawMessage(`{"name":"` + name + `","_meta":{"progressToken":"` + name + `"}}`),
			Progress: func(p json.RawMessage) {
				progressed.Store(name, string(p))
			},
		}
		if i < inline {
			go func() { outcomes <- outcome{name, h.inlineResult(h.inlineSend(req, nil))} }()
		} else {
			go func() {
				outcomes <- outcome{name, inlineResult{callResult: h.result(h.send(context.Background(), req))}}
			}()
		}
	}
	// Collect every request, then answer in bursts of five, last first, each answer
	// after a progress notification for its call.
	reqs := make([]*jsonrpc.Message, 0, inline+async)
	for range inline + async {
		reqs = append(reqs, srv.expect(mcp.MethodToolsCall))
	}
	for end := len(reqs); end > 0; end -= 5 {
		var burst string
		for i := end - 1; i >= max(0, end-5); i-- {
			m := reqs[i]
			name := pipeField(t, m.Params, "name")
			tok := pipeField(t, m.Params, "_meta", "progressToken")
			burst += `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + tok + `,"progress":1}}` + "\n"
			burst += `{"jsonrpc":"2.0","id":` + m.ID.Raw() + `,"result":{"name":` + name + `}}` + "\n"
		}
		srv.say(burst)
	}
	for range inline + async {
		o := recvT(t, outcomes)
		if o.r.err != nil || string(o.r.msg.Result) != `{"name":"`+o.name+`"}` {
			t.Errorf("%s: %+v", o.name, o.r)
		}
		if p, _ := progressed.Load(o.name); p != `{"progressToken":"`+o.name+`","progress":1}` {
			t.Errorf("%s: progress %v", o.name, p)
		}
	}
	// The last call sent was asynchronous: the reader goroutine keeps the role (the
	// next answer is likely for such a call too) until an inline call comes.
	last := h.inlineSend(callTool("last"), nil)
	srv.answer(srv.expect(mcp.MethodToolsCall), `{}`)
	if r := h.inlineResult(last); r.err != nil {
		t.Fatal(r.err)
	}
	waitRole(t, c, "")
	c.mu.Lock()
	if len(c.waiters) != 0 || c.ownerless != 0 || len(c.pending) != 0 || c.interrupted {
		t.Errorf("after the calls: %d waiters, %d ownerless, %d pending, interrupted %v",
			len(c.waiters), c.ownerless, len(c.pending), c.interrupted)
	}
	c.mu.Unlock()
}

// TestLeadServerDiesMidRead: the server exits while an inline caller reads the link and
// others wait behind it and an ordinary call is in flight: every call fails, every Send
// returns, and the upstream starts again and serves inline calls.
func TestLeadServerDiesMidRead(t *testing.T) {
	noLeaks(t)
	h, srv := readyPiped(t, Spec{}, false)
	c := h.conn()
	warm := h.inlineSend(callTool("warm"), nil)
	srv.answer(srv.expect(mcp.MethodToolsCall), `{}`)
	h.inlineResult(warm)
	waitRole(t, c, "")

	leader := h.inlineSend(callTool("leader"), nil)
	m := srv.expect(mcp.MethodToolsCall)
	waitRole(t, c, "call "+m.ID.Raw())
	var followers []<-chan inlineResult
	for i := range 3 {
		followers = append(followers, h.inlineSend(callTool(fmt.Sprint("f", i)), nil))
		srv.expect(mcp.MethodToolsCall)
	}
	async := h.send(context.Background(), callTool("async"))
	srv.expect(mcp.MethodToolsCall)
	srv.Fail(errors.New("crashed"))

	if r := h.inlineResult(leader); r.err == nil {
		t.Errorf("leader: %+v; want an error", r)
	}
	for i, f := range followers {
		if r := h.inlineResult(f); r.err == nil {
			t.Errorf("follower %d: %+v; want an error", i, r)
		}
	}
	if r := h.result(async); r.err == nil {
		t.Errorf("async call: %+v; want an error", r)
	}
	srv2 := h.accept()
	srv2.legacy(`{}`)
	h.await(EventReady)
	next := h.inlineSend(callTool("next"), nil)
	srv2.answer(srv2.expect(mcp.MethodToolsCall), `{"again":true}`)
	if r := h.inlineResult(next); r.err != nil || string(r.msg.Result) != `{"again":true}` {
		t.Fatalf("after the restart: %+v", r)
	}
}
