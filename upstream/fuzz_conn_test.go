package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// fuzzCall is one call of the stateful fuzz test.
type fuzzCall struct {
	token  int
	cancel Canceller
	done   atomic.Int32 // how many times its completion was called
	res    chan callResult
}

// FuzzConnInterleavings drives a real Upstream over transport.Pipe with an interleaving
// of client calls, cancellations, answers (in order, out of order, twice), notifications,
// server-to-client requests and upstream deaths (each followed by a restart), all chosen
// by the input. Invariants: every call completes exactly once, and a call that gets a
// result gets its own (the token it sent, echoed by the server).
func FuzzConnInterleavings(f *testing.F) {
	f.Add([]byte{0, 0, 2, 2})
	f.Add([]byte{0, 0, 0, 1, 7, 2, 5, 3, 4, 0, 2})
	f.Add([]byte{0, 0, 6, 0, 2, 0, 1, 2, 2, 5})
	f.Add([]byte{0, 3, 4, 0, 4, 3, 7, 7, 6, 6, 0, 0, 2, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 256 {
			ops = ops[:256]
		}
		h := newPiped(t, Spec{Protocol: ProtocolLegacy, Timeout: time.Hour})
		h.ev.request = func(_ context.Context, m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
			return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"ok"}}`), nil
		}
		// Drain what the upstream reports, so that no buffer fills whatever the input.
		stop := make(chan struct{})
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			for {
				select {
				case <-h.ev.changed:
				case <-h.ev.notes:
				case <-h.ev.holds:
				case <-stop:
					return
				}
			}
		}()
		defer func() {
			close(stop)
			<-drained
		}()
		h.start()
		srv := h.accept()
		srv.legacy(`{}`)
		h.await(EventReady)

		var (
			calls    []*fuzzCall
			received []*jsonrpc.Message // tools/call requests the server has, unanswered
			answered []*jsonrpc.Message // answered once already
			deaths   int
			written  int // calls written to the current link
			seen     int // of which the server has read
		)
		// take moves what the proxy wrote so far into received; with wait, it first waits
		// for one more call when one was written and not read yet. The rest (cancellations,
		// answers to the server's own requests) needs nothing.
		take := func(wait bool) {
			for {
				var m *jsonrpc.Message
				var ok bool
				if wait && seen < written {
					select {
					case m, ok = <-srv.in:
					case <-time.After(pipeWait):
						t.Fatal("a call written to the link never reached the server")
					}
				} else {
					select {
					case m, ok = <-srv.in:
					default:
						return
					}
				}
				if !ok {
					return
				}
				if m.Method == mcp.MethodToolsCall {
					received = append(received, m)
					seen++
					wait = false
				}
			}
		}
		answer := func(i int) {
			m := received[i]
			args, _, _ := jsonx.Get(m.Params, "arguments")
			tok, _, _ := jsonx.GetString(args, "token")
			_ = srv.Write(jsonrpc.NewResult(m.ID, json.RawMessage(`{"token":`+strconv.Quote(tok)+`}`))) // the link may be dead
			answered = append(answered, m)
			received = append(received[:i], received[i+1:]...)
		}
		for i, op := range ops {
			arg := 0
			if i+1 < len(ops) {
				arg = int(ops[i+1])
			}
			take(false)
			switch op % 8 {
			case 0: // a client call
				c := &fuzzCall{token: len(calls), res: make(chan callResult, 2)}
				calls = append(calls, c)
				h.u.Send(context.Background(), &Request{Method: mcp.MethodToolsCall, Cancel: &c.cancel,
					Params: json.RawMessage(fmt.Sprintf(`{"name":"echo","arguments":{"token":"t%d"}}`, c.token))},
					func(m *jsonrpc.Message, err error) {
						c.done.Add(1)
						c.res <- callResult{m, err}
					})
				if c.done.Load() == 0 { // not failed at once: it is on the link
					written++
				}
			case 1: // the client cancels one
				if len(calls) > 0 {
					calls[arg%len(calls)].cancel.Cancel()
				}
			case 2: // the server answers the oldest
				take(true)
				if len(received) > 0 {
					answer(0)
				}
			case 7: // the server answers another
				take(true)
				if len(received) > 0 {
					answer(arg % len(received))
				}
			case 5: // the server answers one again
				if len(answered) > 0 {
					m := answered[arg%len(answered)]
					_ = srv.Write(jsonrpc.NewResult(m.ID, json.RawMessage(`{"token":"duplicate"}`)))
				}
			case 3: // a notification
				_ = srv.WriteLine([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`))
			case 4: // a server-to-client request
				_ = srv.WriteLine([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":"s-%d","method":"sampling/createMessage","params":{}}`, i)))
			case 6: // the upstream dies, and is started again
				if deaths >= 8 {
					continue
				}
				deaths++
				srv.Close()
				srv = h.accept()
				srv.legacy(`{}`)
				h.await(EventReady)
				received, answered, written, seen = nil, nil, 0, 0
			}
		}
		h.u.Close() // fails what is still in flight
		for _, c := range calls {
			var r callResult
			select {
			case r = <-c.res:
			case <-time.After(pipeWait):
				t.Fatalf("call t%d was never completed", c.token)
			}
			if r.err == nil {
				want := fmt.Sprintf(`{"token":"t%d"}`, c.token)
				if r.msg == nil || string(r.msg.Result) != want {
					t.Errorf("call t%d got %v, want the result %s", c.token, r.msg, want)
				}
			}
		}
		for _, c := range calls {
			if n := c.done.Load(); n != 1 {
				t.Errorf("call t%d completed %d times", c.token, n)
			}
		}
	})
}
