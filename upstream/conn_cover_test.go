package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// TestHandshakeAndPagedCatalogue: the legacy handshake takes the server's identity and
// capabilities, and the catalogue follows every page of every list the server declares.
func TestHandshakeAndPagedCatalogue(t *testing.T) {
	srv := legacyServer(`{"tools":{},"prompts":{},"resources":{},"logging":{},"tasks":{"list":{}}}`, nil, nil)
	paged := func(m *jsonrpc.Message) []string {
		cursor, _, _ := jsonx.GetString(m.Params, "cursor")
		switch {
		case m.Method == "tools/list" && cursor == "":
			return reply(m, `{"tools":[{"name":"a","inputSchema":{}}],"nextCursor":"p2"}`)
		case m.Method == "tools/list" && cursor == "p2":
			return reply(m, `{"tools":[{"name":"b","inputSchema":{}}],"nextCursor":null}`)
		case m.Method == "prompts/list":
			return reply(m, `{"prompts":[{"name":"p"}]}`)
		case m.Method == "resources/templates/list":
			return reply(m, `{"resourceTemplates":[{"uriTemplate":"x://{y}","name":"t"}]}`)
		}
		return srv(m)
	}
	u, err := startMem(t, Spec{ClientName: "px", ClientVersion: "7", ClientCapabilities: json.RawMessage(`{"roots":{}}`)}, nil, paged, nil)
	if err != nil {
		t.Fatal(err)
	}
	init := u.next(t, "initialize")
	if !strings.Contains(string(init.Params), `"capabilities":{"roots":{}}`) || !strings.Contains(string(init.Params), `"clientInfo":{"name":"px","version":"7"}`) {
		t.Errorf("initialize params %s", init.Params)
	}
	u.next(t, "notifications/initialized")
	info := u.Info()
	if info.ProtocolVersion != "2025-11-25" || info.Instructions != "be nice" || info.Modern ||
		!info.HasTools() || !info.HasPrompts() || !info.HasResources() || !info.HasLogging() || !info.HasTaskList() {
		t.Errorf("info %+v", info)
	}
	cat := u.Catalogue()
	if len(cat.Tools) != 2 || len(cat.Prompts) != 1 || len(cat.Resources) != 0 || len(cat.Templates) != 1 {
		t.Errorf("catalogue: %d tools, %d prompts, %d resources, %d templates", len(cat.Tools), len(cat.Prompts), len(cat.Resources), len(cat.Templates))
	}
	if u.link.version != "2025-11-25" {
		t.Errorf("the link was told version %q", u.link.version)
	}
	if st, err := u.State(); st != StateReady || err != nil || u.Name() != "mem" || u.Timeout() != 60*time.Second {
		t.Errorf("state %v %v, name %q, timeout %v", st, err, u.Name(), u.Timeout())
	}
}

// TestHandshakeRefusals: what makes the legacy handshake fail.
func TestHandshakeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, result string
		errText      string
	}{
		{"an error", "", "answered with error"},
		{"not an object", `5`, "malformed result"},
		{"an unknown version", `{"protocolVersion":"1999-01-01","capabilities":{}}`, "does not support"},
		{"malformed capabilities", `{"protocolVersion":"2025-11-25","capabilities":{"tools":5}}`, "malformed capabilities"},
	} {
		srv := func(m *jsonrpc.Message) []string {
			if m.Method != "initialize" {
				return nil
			}
			if tc.result == "" {
				return replyErr(m, -32603, "no")
			}
			return reply(m, tc.result)
		}
		_, err := startMem(t, Spec{Protocol: ProtocolLegacy}, nil, srv, nil)
		if err == nil || !strings.Contains(err.Error(), tc.errText) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.errText)
		}
	}
	// No capabilities at all: an empty object.
	srv := func(m *jsonrpc.Message) []string {
		if m.Method == "initialize" {
			return reply(m, `{"protocolVersion":"2024-11-05","capabilities":null}`)
		}
		return nil
	}
	u, err := startMem(t, Spec{Protocol: ProtocolLegacy}, nil, srv, nil)
	if err != nil || string(u.Info().Capabilities) != "{}" || u.Info().HasTools() {
		t.Errorf("null capabilities: %v %s", err, u.Info().Capabilities)
	}
}

// TestListAllPaging: ListAll follows cursors and refuses what would page forever or is
// not a list.
func TestListAllPaging(t *testing.T) {
	srv := legacyServer(`{}`, nil, func(m *jsonrpc.Message) []string {
		cursor, _, _ := jsonx.GetString(m.Params, "cursor")
		switch m.Method {
		case "ok/list":
			if cursor == "" {
				return reply(m, `{"items":[1,2],"nextCursor":"next"}`)
			}
			return reply(m, `{"items":[3],"nextCursor":""}`)
		case "repeat/list":
			return reply(m, `{"items":[1],"nextCursor":"same"}`)
		case "forever/list":
			n := 0
			fmt.Sscan(cursor, &n)
			return reply(m, fmt.Sprintf(`{"items":[],"nextCursor":"%d"}`, n+1))
		case "badcursor/list":
			return reply(m, `{"items":[],"nextCursor":5}`)
		case "notobject/list":
			return reply(m, `[]`)
		case "notarray/list":
			return reply(m, `{"items":{}}`)
		case "error/list":
			return replyErr(m, -32601, "Method not found")
		case "absent/list":
			return reply(m, `{}`)
		}
		return nil
	})
	u, err := startMem(t, Spec{}, nil, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method string
		n      int
		errHas string
	}{
		{"ok/list", 3, ""},
		{"absent/list", 0, ""},
		{"repeat/list", 2, "repeated cursor"},
		{"forever/list", 0, "gave up after 1000 pages"},
		{"badcursor/list", 0, "nextCursor is not a string"},
		{"notobject/list", 0, "malformed result"},
		{"notarray/list", 0, "is not an array"},
		{"error/list", 0, "upstream error -32601"},
	} {
		items, err := u.ListAll(context.Background(), tc.method, "items")
		if len(items) != tc.n || (err == nil) != (tc.errHas == "") || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
			t.Errorf("%s: %d items, %v; want %d, %q", tc.method, len(items), err, tc.n, tc.errHas)
		}
	}
}

// TestCallOutcomes: a call completes exactly once: with the server's response (error
// responses included), at its timeout (the server is told to stop and a late answer is
// dropped), when its caller cancels it, or when it cannot be written.
func TestCallOutcomes(t *testing.T) {
	srv := legacyServer(`{"tools":{}}`, nil, func(m *jsonrpc.Message) []string {
		if !m.IsRequest() {
			return nil
		}
		switch name, _, _ := jsonx.GetString(m.Params, "name"); name {
		case "ok":
			return reply(m, `{"content":[]}`)
		case "err":
			return replyErr(m, -32000, "tool broke")
		}
		return nil // "hang": never answered
	})
	u, err := startMem(t, Spec{Timeout: 40 * time.Millisecond}, nil, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	call := func(name string) *Request {
		return &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"` + name + `"}`)}
	}

	if m, err := u.Call(ctx, call("ok")); err != nil || string(m.Result) != `{"content":[]}` {
		t.Errorf("ok: %v %v", m, err)
	}
	if m, err := u.Call(ctx, call("err")); err != nil || m.Error == nil || m.Error.Code != -32000 {
		t.Errorf("err: %v %v", m, err)
	}

	// Timeout: the server is told, and its late answer changes nothing.
	_, err = u.Call(ctx, call("hang"))
	if proxyCode(err) != mcp.CodeUpstreamTimeout || !strings.Contains(err.Error(), "within 40ms") {
		t.Errorf("timeout: %v", err)
	}
	hung := u.nextWith(t, "tools/call", "hang")
	cancel := u.next(t, "notifications/cancelled")
	if id, _, _ := jsonx.Get(cancel.Params, "requestId"); string(id) != hung.ID.Raw() {
		t.Errorf("cancelled %s, want %s", id, hung.ID.Raw())
	}
	u.link.push(`{"jsonrpc":"2.0","id":` + hung.ID.Raw() + `,"result":{"late":true}}`)
	// A per-request timeout overrides the upstream's.
	long := call("ok")
	long.Timeout = time.Minute
	if _, err := u.Call(ctx, long); err != nil {
		t.Errorf("with its own timeout: %v", err)
	}

	// Cancelled through a Canceller while in flight, and before it was sent.
	var cl Canceller
	req := call("hang")
	req.Timeout, req.Cancel = time.Minute, &cl
	ch := u.sendAsync(ctx, req)
	sent := u.nextWith(t, "tools/call", "hang")
	cl.Cancel()
	cl.Cancel() // twice does nothing more
	if o := recvT(t, ch); !errors.Is(o.err, ErrCancelled) {
		t.Errorf("cancelled call: %v", o.err)
	}
	if c := u.next(t, "notifications/cancelled"); !strings.Contains(string(c.Params), `"requestId":`+sent.ID.Raw()) {
		t.Errorf("cancellation %s for %s", c.Params, sent.ID.Raw())
	}
	var early Canceller
	early.Cancel()
	req = call("ok")
	req.Cancel = &early
	if _, err := u.Call(ctx, req); !errors.Is(err, ErrCancelled) {
		t.Errorf("cancelled before it was sent: %v", err)
	}

	// Cancelled through its context.
	cctx, ccancel := context.WithCancel(ctx)
	req = call("hang")
	req.Timeout = time.Minute
	ch = u.sendAsync(cctx, req)
	u.nextWith(t, "tools/call", "hang")
	ccancel()
	if o := recvT(t, ch); !errors.Is(o.err, context.Canceled) {
		t.Errorf("context cancelled: %v", o.err)
	}
	u.next(t, "notifications/cancelled")

	// A _meta that is not an object is refused before anything is sent.
	if _, err := u.Call(ctx, &Request{Method: "tools/call", Params: json.RawMessage(`{"_meta":[]}`)}); proxyCode(err) != jsonrpc.CodeInvalidParams {
		t.Errorf("bad _meta: %v", err)
	}

	// The link refuses the write.
	u.link.mu.Lock()
	u.link.writeErr = errors.New("pipe closed")
	u.link.mu.Unlock()
	if _, err := u.Call(ctx, call("ok")); proxyCode(err) != mcp.CodeUpstreamFailed || !strings.Contains(err.Error(), "pipe closed") {
		t.Errorf("write failure: %v", err)
	}
	if err := u.Notify("notifications/x", nil); err == nil {
		t.Errorf("Notify over a broken link succeeded")
	}
	u.link.mu.Lock()
	u.link.writeErr = nil
	u.link.mu.Unlock()
	if err := u.Notify("notifications/roots/list_changed", nil); err != nil {
		t.Errorf("Notify: %v", err)
	}
	u.next(t, "notifications/roots/list_changed")
}

// TestProgressRouting: a call's progress token is replaced by one of the upstream's id
// space, and progress comes back to the call's sink under the caller's token.
func TestProgressRouting(t *testing.T) {
	srv := legacyServer(`{}`, nil, func(m *jsonrpc.Message) []string {
		if m.Method != "tools/call" {
			return nil
		}
		meta, _, _ := jsonx.Get(m.Params, "_meta")
		tok, _, _ := jsonx.Get(meta, "progressToken")
		return append([]string{
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(tok) + `,"progress":1}}`,
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"nobody","progress":1}}`,
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
		}, reply(m, `{}`)...)
	})
	u, err := startMem(t, Spec{}, nil, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	_, err = u.Call(context.Background(), &Request{Method: "tools/call", Params: json.RawMessage(`{"_meta":{"progressToken":"mine"}}`),
		Progress: func(p json.RawMessage) { got = append(got, string(p)) }})
	if err != nil {
		t.Fatal(err)
	}
	sent := u.next(t, "tools/call")
	if meta, _, _ := jsonx.Get(sent.Params, "_meta"); string(meta) != `{"progressToken":`+sent.ID.Raw()+`}` {
		t.Errorf("sent _meta %s for id %s", meta, sent.ID.Raw())
	}
	if len(got) != 1 || got[0] != `{"progressToken":"mine","progress":1}` {
		t.Errorf("progress %q", got)
	}
}

// TestRequestFailedByLink: a request the link could not complete fails alone with a
// proxy error; a response that is too large fails its call with -31003.
func TestRequestFailedByLink(t *testing.T) {
	srv := legacyServer(`{}`, nil, nil) // tools/call is never answered
	u, err := startMem(t, Spec{}, nil, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		err  error
		code int64
	}{{errors.New("502 Bad Gateway"), mcp.CodeUpstreamFailed}, {&jsonrpc.TooLargeError{Size: 10, Limit: 5}, mcp.CodeMessageTooLarge}} {
		ch := u.sendAsync(ctx, &Request{Method: "tools/call"})
		sent := u.next(t, "tools/call")
		u.link.mu.Lock()
		failed := u.link.failed
		u.link.mu.Unlock()
		failed(jsonrpc.StringID("not ours"), tc.err)
		failed(sent.ID, tc.err)
		failed(sent.ID, tc.err) // already failed: nothing more
		if o := recvT(t, ch); proxyCode(o.err) != tc.code {
			t.Errorf("%v: %v, want %d", tc.err, o.err, tc.code)
		}
	}

	ch := u.sendAsync(ctx, &Request{Method: "tools/call"})
	sent := u.next(t, "tools/call")
	u.link.in <- linkRead{err: &jsonrpc.TooLargeError{Size: 1 << 20, Limit: 1024, Head: []byte(`{"jsonrpc":"2.0","id":` + sent.ID.Raw() + `,"result":{"x":"xxxx`)}}
	if o := recvT(t, ch); proxyCode(o.err) != mcp.CodeMessageTooLarge || !strings.Contains(o.err.Error(), "1048576 bytes") {
		t.Errorf("too large: %v", o.err)
	}
	// One whose id cannot be found is only logged; the link goes on.
	u.link.in <- linkRead{err: &jsonrpc.TooLargeError{Size: 1 << 20, Limit: 1024, Head: []byte(`{"jsonrpc":"2.0","res`)}}
	if _, err := u.ListAll(ctx, "tools/list", "tools"); err != nil {
		t.Errorf("after an oversized line: %v", err)
	}
}

// TestLinesThatAreNotMessages: what the upstream writes that is not a valid message is
// skipped, a malformed response fails its call, a malformed request is refused, and
// responses to nothing are dropped; the connection goes on.
func TestLinesThatAreNotMessages(t *testing.T) {
	srv := legacyServer(`{}`, nil, nil)
	u, err := startMem(t, Spec{}, nil, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ch := u.sendAsync(ctx, &Request{Method: "tools/call"})
	sent := u.next(t, "tools/call")
	for _, l := range []string{
		`this is not JSON ` + strings.Repeat("x", 300),
		`{"jsonrpc":"2.0","id":"s","method":"ping","method":"sampling/createMessage"}`, // duplicate member: refused
		`{"jsonrpc":"2.0","id":999,"result":{}}`,                                       // to nothing
		`{"jsonrpc":"2.0","id":"abc","result":{}}`,                                     // an id the proxy never uses
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"to a notification"}}`,
		`{"jsonrpc":"2.0","id":` + sent.ID.Raw() + `,"result":{},"error":{"code":1,"message":"both"}}`,
	} {
		u.link.push(l)
	}
	if o := recvT(t, ch); proxyCode(o.err) != mcp.CodeUpstreamProtocol {
		t.Errorf("malformed response: %v", o.err)
	}
	refusal := u.next(t, "")
	if refusal.ID.Raw() != `"s"` || refusal.Error == nil {
		t.Errorf("the malformed request was answered %+v", refusal)
	}
	if !strings.Contains(u.log.String(), "…") {
		t.Errorf("a long bad line is not truncated in the log")
	}
	if _, err := u.ListAll(ctx, "tools/list", "tools"); err != nil {
		t.Errorf("after the bad lines: %v", err)
	}
}

// TestServerRequests: the upstream's ping is answered, a method that is not a
// server-to-client request is refused, sampling goes to the events (or to the call it
// came with), and a request the upstream withdraws gets no answer.
func TestServerRequests(t *testing.T) {
	ev := newRecEvents()
	withdrawn := make(chan struct{})
	ev.answer = func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
		if m.Method == mcp.MethodElicitationCreate {
			<-ctx.Done()
			close(withdrawn)
			return nil, jsonrpc.Errorf(1, "withdrawn")
		}
		if m.Method == mcp.MethodRootsList {
			return nil, jsonrpc.Errorf(-1, "no roots here")
		}
		return json.RawMessage(`{"answered":true}`), nil
	}
	srv := legacyServer(`{}`, nil, nil)
	u, err := startMem(t, Spec{}, ev, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	answerTo := func(id string) *jsonrpc.Message {
		t.Helper()
		for {
			m := u.next(t, "")
			if m.ID.Raw() == id {
				return m
			}
		}
	}
	u.link.push(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	if m := answerTo(`"p"`); m.Error != nil || string(m.Result) != "{}" {
		t.Errorf("ping: %+v", m)
	}
	u.link.push(`{"jsonrpc":"2.0","id":"x","method":"tools/list"}`)
	if m := answerTo(`"x"`); m.Error == nil || m.Error.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("tools/list from the server: %+v", m)
	}
	u.link.push(`{"jsonrpc":"2.0","id":"s","method":"sampling/createMessage","params":{}}`)
	if m := answerTo(`"s"`); m.Error != nil || string(m.Result) != `{"answered":true}` {
		t.Errorf("sampling: %+v", m)
	}
	if m := recvT(t, ev.requests); m.Method != mcp.MethodSamplingCreateMessage {
		t.Errorf("events got %s", m.Method)
	}
	u.link.push(`{"jsonrpc":"2.0","id":"r","method":"roots/list"}`)
	if m := answerTo(`"r"`); m.Error == nil || m.Error.Message != "no roots here" {
		t.Errorf("roots/list refused by the client: %+v", m)
	}

	// Withdrawn: the upstream cancels its own request; no answer follows.
	u.link.push(`{"jsonrpc":"2.0","id":"e","method":"elicitation/create","params":{}}`)
	recvT(t, ev.requests)
	recvT(t, ev.requests)
	u.link.push(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`)
	u.link.push(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}`)
	u.link.push(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"e"}}`)
	recvT(t, withdrawn)
	u.link.push(`{"jsonrpc":"2.0","id":"p2","method":"ping"}`)
	if m := u.next(t, ""); m.ID.Raw() != `"p2"` {
		t.Errorf("the withdrawn request was answered: %+v", m)
	}

}

// TestNotificationsAndRefresh: an upstream's own notifications reach the events, and a
// list_changed re-fetches that list and reports the change.
func TestNotificationsAndRefresh(t *testing.T) {
	ev := newRecEvents()
	tools := `{"tools":[{"name":"a","inputSchema":{}}]}`
	var toolsMu = make(chan string, 1)
	toolsMu <- tools
	srv := legacyServer(`{"tools":{},"prompts":{},"resources":{}}`, nil, nil)
	live := func(m *jsonrpc.Message) []string {
		if m.Method == "tools/list" {
			cur := <-toolsMu
			toolsMu <- cur
			return reply(m, cur)
		}
		return srv(m)
	}
	u, err := startMem(t, Spec{}, ev, live, nil)
	if err != nil {
		t.Fatal(err)
	}
	if k := recvT(t, ev.changed); k != AllKinds {
		t.Errorf("ready: changed %v", k)
	}
	u.link.push(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`)
	if m := recvT(t, ev.notes); m.Method != mcp.NotificationMessage {
		t.Errorf("notification %s", m.Method)
	}
	<-toolsMu
	toolsMu <- `{"tools":[{"name":"a","inputSchema":{}},{"name":"b","inputSchema":{}}]}`
	u.link.push(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	if k := recvT(t, ev.changed); k != KindTools {
		t.Errorf("changed %v", k)
	}
	if n := len(u.Catalogue().Tools); n != 2 {
		t.Errorf("%d tools after the refresh", n)
	}
	u.link.push(`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`)
	if k := recvT(t, ev.changed); k != KindPrompts {
		t.Errorf("changed %v", k)
	}
	u.link.push(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`)
	if k := recvT(t, ev.changed); k != KindResources|KindTemplates {
		t.Errorf("changed %v", k)
	}
	u.link.push(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}}`)
	u.link.push(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"x://1"}}`)
	if m := recvT(t, ev.notes); m.Method != mcp.NotificationResourcesUpdated {
		t.Errorf("the acknowledgement was passed on, or the update lost: %s", m.Method)
	}
}

// TestUnavailableAndState: a closed upstream refuses calls with ErrUnavailable naming
// its state; states print their names.
func TestUnavailableAndState(t *testing.T) {
	u, err := startMem(t, Spec{Name: "gone"}, nil, legacyServer(`{}`, nil, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	uncork := u.Cork()
	u.link.mu.Lock()
	corked := u.link.corked
	u.link.mu.Unlock()
	uncork()
	if corked != 1 || u.link.corked != 0 {
		t.Errorf("cork %d, then %d", corked, u.link.corked)
	}
	u.Close()
	u.Close()
	for name, err := range map[string]error{
		"Call":    func() error { _, err := u.Call(context.Background(), &Request{Method: "tools/call"}); return err }(),
		"ListAll": func() error { _, err := u.ListAll(context.Background(), "tools/list", "tools"); return err }(),
		"Notify":  u.Notify("x", nil),
	} {
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), `upstream "gone" is stopped`) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	u.Cork()() // nothing to cork
	for s, want := range map[State]string{StateStarting: "starting", StateReady: "ready", StateDown: "down", StateStopped: "stopped", State(9): "State(9)"} {
		if s.String() != want {
			t.Errorf("%d prints %q", s, s.String())
		}
	}
	u.SetPreferLegacy(true)
	u.SetClientCapabilities(json.RawMessage(`{"sampling":{}}`))
	if !u.preferLegacy.Load() || string(u.spec.ClientCapabilities) != `{"sampling":{}}` {
		t.Errorf("settings not kept")
	}
}

// TestSweeperParksWhileIdle: with nothing pending the sweeper stops ticking (an idle
// proxy must not wake several times a second per upstream), and the next call wakes it:
// that call still times out.
func TestSweeperParksWhileIdle(t *testing.T) {
	srv := legacyServer(`{"tools":{}}`, nil, func(m *jsonrpc.Message) []string {
		return nil // every call hangs
	})
	u, err := startMem(t, Spec{Timeout: 40 * time.Millisecond}, nil, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	parked := func() bool {
		u.mu.Lock()
		c := u.cur
		u.mu.Unlock()
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.sweepParked
	}
	pollUntil(t, "the sweeper to park", parked)
	for range 3 { // each call wakes the parked sweeper, which times it out and parks again
		_, err = u.Call(context.Background(), &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"hang"}`)})
		if proxyCode(err) != mcp.CodeUpstreamTimeout {
			t.Fatalf("call while the sweeper was parked: %v; want a timeout", err)
		}
		pollUntil(t, "the sweeper to park again", parked)
	}
}

// pollUntil polls cond until it holds, failing the test after 10 s.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
