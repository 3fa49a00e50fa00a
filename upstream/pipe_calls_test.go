package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// TestPipeCallWithProgress: a call's progress notifications reach its sink with the
// caller's token restored, before the answer; after the answer, progress for it is
// dropped. A burst of buffered messages is handled under one Hold.
func TestPipeCallWithProgress(t *testing.T) {
	h := newPiped(t, Spec{Protocol: ProtocolLegacy}).start()
	srv := h.accept()
	srv.legacy(`{}`)
	h.await(EventReady)

	var progress []string // written by the reader goroutine, read after the call is done
	var progressAtDone atomic.Int32
	ch := make(chan callResult, 1)
	h.u.Send(context.Background(), &Request{
		Method:   mcp.MethodToolsCall,
		Params:   json.RawMessage(`{"name":"slow","_meta":{"progressToken":"client-token"}}`),
		Progress: func(p json.RawMessage) { progress = append(progress, string(p)) },
	}, func(m *jsonrpc.Message, err error) {
		progressAtDone.Store(int32(len(progress)))
		ch <- callResult{m, err}
	})
	m := srv.expect(mcp.MethodToolsCall)
	tok := pipeField(t, m.Params, "_meta", "progressToken")
	if tok != m.ID.Raw() {
		t.Errorf("the upstream got progress token %s; want its own id %s", tok, m.ID.Raw())
	}
	srv.say(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + tok + `,"progress":1,"total":2}}`)
	// The second progress and the answer arrive together: one burst.
	srv.say(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + tok + `,"progress":2,"total":2}}` + "\n" +
		`{"jsonrpc":"2.0","id":` + m.ID.Raw() + `,"result":{"content":[]}}`)
	r := h.result(ch)
	if r.err != nil || string(r.msg.Result) != `{"content":[]}` {
		t.Fatalf("call: %v %v", r.msg, r.err)
	}
	want := []string{
		`{"progressToken":"client-token","progress":1,"total":2}`,
		`{"progressToken":"client-token","progress":2,"total":2}`,
	}
	if progressAtDone.Load() != 2 || strings.Join(progress, " ") != strings.Join(want, " ") {
		t.Errorf("progress before the answer: %q; want %q", progress, want)
	}
	for _, w := range []string{"hold", "release"} {
		select {
		case got := <-h.ev.holds:
			if got != w {
				t.Errorf("burst: %s; want %s", got, w)
			}
		case <-time.After(pipeWait):
			t.Fatalf("burst: no %s", w)
		}
	}

	// Late progress is dropped: once the next call's answer is in, the reader has
	// handled it, and the finished call's sink saw nothing more.
	srv.say(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + tok + `,"progress":3}}`)
	next := h.send(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"quick"}`)})
	srv.answer(srv.expect(mcp.MethodToolsCall), `{}`)
	if r := h.result(next); r.err != nil {
		t.Fatal(r.err)
	}
	if len(progress) != 2 {
		t.Errorf("late progress reached the sink: %q", progress)
	}
}

// TestPipeCallTimesOut: a call the server reads and never answers fails with the proxy's
// timeout error after Spec.Timeout; the server is sent notifications/cancelled for it,
// the observer hears of it, and the late answer is dropped.
func TestPipeCallTimesOut(t *testing.T) {
	h := newPiped(t, Spec{Protocol: ProtocolLegacy, Timeout: 100 * time.Millisecond}).start()
	srv := h.accept()
	srv.legacy(`{}`) // no lists: nothing else runs under the short timeout
	h.await(EventReady)

	var calls atomic.Int32
	ch := make(chan callResult, 2)
	h.u.Send(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"stuck"}`)},
		func(m *jsonrpc.Message, err error) {
			calls.Add(1)
			ch <- callResult{m, err}
		})
	m := srv.expect(mcp.MethodToolsCall) // read, and not answered

	if e := h.await(EventCallTimedOut); e.Method != mcp.MethodToolsCall {
		t.Errorf("timed-out event for %q", e.Method)
	}
	r := h.result(ch)
	var je *jsonrpc.Error
	if !errors.As(r.err, &je) || je.Code != mcp.CodeUpstreamTimeout {
		t.Fatalf("call failed with %v; want code %d", r.err, mcp.CodeUpstreamTimeout)
	}
	if o := pipeField(t, je.Data, "origin"); o != `"mcp-proxy"` {
		t.Errorf("timeout error data %s: not marked as the proxy's", je.Data)
	}
	c := srv.expect(mcp.NotificationCancelled)
	if id := pipeField(t, c.Params, "requestId"); id != m.ID.Raw() {
		t.Errorf("cancelled request %s; want %s", id, m.ID.Raw())
	}

	// The late answer is dropped: the next call's answer comes after it, and the timed
	// out call was completed once.
	srv.answer(m, `{"content":[]}`)
	next := h.send(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"quick"}`), Timeout: pipeWait})
	srv.answer(srv.expect(mcp.MethodToolsCall), `{}`)
	if r := h.result(next); r.err != nil {
		t.Fatal(r.err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the timed-out call completed %d times", n)
	}
	if st, _ := h.u.State(); st != StateReady {
		t.Errorf("state after a timeout: %v", st)
	}
}

// TestPipeCallCancelled: a caller's cancellation completes the call with ErrCancelled and
// tells the server.
func TestPipeCallCancelled(t *testing.T) {
	h := newPiped(t, Spec{Protocol: ProtocolLegacy}).start()
	srv := h.accept()
	srv.legacy(`{}`)
	h.await(EventReady)

	var cancel Canceller
	ch := h.send(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"x"}`), Cancel: &cancel})
	m := srv.expect(mcp.MethodToolsCall)
	cancel.Cancel()
	if r := h.result(ch); !errors.Is(r.err, ErrCancelled) {
		t.Errorf("cancelled call: %v", r.err)
	}
	if id := pipeField(t, srv.expect(mcp.NotificationCancelled).Params, "requestId"); id != m.ID.Raw() {
		t.Errorf("cancelled %s; want %s", id, m.ID.Raw())
	}

	ctx, stop := context.WithCancel(context.Background())
	ch = h.send(ctx, &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"y"}`)})
	m = srv.expect(mcp.MethodToolsCall)
	stop()
	if r := h.result(ch); !errors.Is(r.err, context.Canceled) {
		t.Errorf("call whose context ended: %v", r.err)
	}
	if id := pipeField(t, srv.expect(mcp.NotificationCancelled).Params, "requestId"); id != m.ID.Raw() {
		t.Errorf("cancelled %s; want %s", id, m.ID.Raw())
	}
}

// TestPipeServerRequests: the server's requests to the client are answered through
// Events with the server's own ids; ping is answered by the proxy, unknown methods are
// refused, and a request the server withdraws is cancelled for the client.
func TestPipeServerRequests(t *testing.T) {
	h := newPiped(t, Spec{Protocol: ProtocolLegacy})
	asked, withdrawn := make(chan struct{}), make(chan error, 1)
	h.ev.request = func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
		switch m.Method {
		case mcp.MethodSamplingCreateMessage:
			return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"` + pipeField(t, m.Params, "q")[1:2] + `"}}`), nil
		case mcp.MethodElicitationCreate:
			close(asked)
			<-ctx.Done()
			withdrawn <- ctx.Err()
			return nil, nil
		}
		return nil, jsonrpc.Errorf(-32000, "the client has no roots")
	}
	h.start()
	srv := h.accept()
	srv.legacy(`{}`)
	h.await(EventReady)

	srv.say(`{"jsonrpc":"2.0","id":"s-1","method":"sampling/createMessage","params":{"q":"Z"}}`)
	m := srv.expect("")
	if m.ID.Raw() != `"s-1"` || string(m.Result) != `{"role":"assistant","content":{"type":"text","text":"Z"}}` {
		t.Errorf("sampling answered with %s", m)
	}
	srv.say(`{"jsonrpc":"2.0","id":7,"method":"roots/list"}`)
	if m := srv.expect(""); m.ID.Raw() != "7" || m.Error == nil || m.Error.Code != -32000 {
		t.Errorf("roots/list answered with %s", m)
	}
	srv.say(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	if m := srv.expect(""); m.ID.Raw() != "8" || string(m.Result) != "{}" {
		t.Errorf("ping answered with %s", m)
	}
	srv.say(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{}}`)
	if m := srv.expect(""); m.ID.Raw() != "9" || m.Error == nil || m.Error.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("a client-side method the proxy does not relay answered with %s", m)
	}

	srv.say(`{"jsonrpc":"2.0","id":"s-2","method":"elicitation/create","params":{}}`)
	select {
	case <-asked:
	case <-time.After(pipeWait):
		t.Fatal("the elicitation did not reach the client")
	}
	srv.say(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s-2"}}`)
	select {
	case err := <-withdrawn:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the withdrawn request's context ended with %v", err)
		}
	case <-time.After(pipeWait):
		t.Fatal("the withdrawn request was not cancelled for the client")
	}
}

// TestPipeCrashMidCallRestarts: a server that dies mid-call fails the call with its exit
// error (the router's -31002), is reported down, and is dialled again after the backoff;
// the new link has its own id space and catalogue.
func TestPipeCrashMidCallRestarts(t *testing.T) {
	h := newPiped(t, Spec{Protocol: ProtocolLegacy}).start()
	srv := h.accept()
	srv.legacy(`{"tools":{}}`)
	srv.answer(srv.expect(mcp.MethodToolsList), `{"tools":[{"name":"old"}]}`)
	h.await(EventReady)
	h.ev.nextChange(t)

	ch := h.send(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"old"}`)})
	srv.expect(mcp.MethodToolsCall)
	boom := errors.New("segmentation fault")
	srv.Fail(boom)

	r := h.result(ch)
	if !errors.Is(r.err, boom) || errors.Is(r.err, ErrUnavailable) || pipeCode(r.err) != 0 {
		t.Errorf("the call in flight failed with %v; want the server's exit error, neither unavailable nor a JSON-RPC error", r.err)
	}
	for _, want := range []EventKind{EventExited, EventRestarting, EventStarting} {
		e := h.obs.next(t)
		if e.Kind != want {
			t.Fatalf("event %v (%v); want %v", e.Kind, e.Err, want)
		}
		if want == EventExited && !errors.Is(e.Err, boom) {
			t.Errorf("exited with %v; want %v", e.Err, boom)
		}
		if want == EventRestarting && e.Backoff <= 0 {
			t.Errorf("restarting without a backoff")
		}
	}
	// Down until the new server has answered, with the catalogue it served kept (its
	// items stay listed; calls are refused as unavailable), and no change reported.
	st, lastErr := h.u.State()
	if st != StateDown || !errors.Is(lastErr, boom) || len(h.u.Catalogue().Tools) != 1 {
		t.Errorf("while restarting: %v, %v, %d tools", st, lastErr, len(h.u.Catalogue().Tools))
	}
	if _, err := h.u.Call(context.Background(), &Request{Method: mcp.MethodToolsCall}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("call while down: %v; want unavailable", err)
	}

	srv2 := h.accept()
	m := srv2.expect(mcp.MethodInitialize)
	if m.ID.Raw() != "1" {
		t.Errorf("the new link's first id is %s; want 1", m.ID.Raw())
	}
	srv2.answer(m, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}}}`)
	srv2.expect(mcp.NotificationInitialized)
	srv2.answer(srv2.expect(mcp.MethodToolsList), `{"tools":[{"name":"new"}]}`)
	h.await(EventReady)
	if k := h.ev.nextChange(t); k != AllKinds {
		t.Errorf("ready again: changed %b", k)
	}
	if tools := h.u.Catalogue().Tools; len(tools) != 1 || string(tools[0]) != `{"name":"new"}` {
		t.Errorf("catalogue after the restart: %s", tools)
	}
	ch = h.send(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"new"}`)})
	srv2.answer(srv2.expect(mcp.MethodToolsCall), `{"content":[]}`)
	if r := h.result(ch); r.err != nil {
		t.Errorf("call after the restart: %v", r.err)
	}
}

// TestPipeServerWithdrawsAtOnce: a server-to-client request withdrawn in the same burst
// that brought it must still be cancelled for the client.
func TestPipeServerWithdrawsAtOnce(t *testing.T) {
	h := newPiped(t, Spec{Protocol: ProtocolLegacy})
	withdrawn := make(chan error, 1)
	h.ev.request = func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
		select {
		case <-ctx.Done():
			withdrawn <- ctx.Err()
		case <-time.After(pipeWait):
			withdrawn <- nil
		}
		return nil, nil
	}
	h.start()
	srv := h.accept()
	srv.legacy(`{}`)
	h.await(EventReady)
	srv.say(`{"jsonrpc":"2.0","id":"s-1","method":"elicitation/create","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s-1"}}`)
	if err := <-withdrawn; !errors.Is(err, context.Canceled) {
		t.Errorf("the request withdrawn at once was not cancelled for the client (%v)", err)
	}
}
