package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// TestInitializeNegotiation: initialize answers the version the client asked for when
// the proxy speaks it, the newest legacy version otherwise, with the merged capabilities,
// the proxy's serverInfo and the instructions of every upstream under its name.
func TestInitializeNegotiation(t *testing.T) {
	for _, tc := range []struct{ asked, want string }{
		{"2025-11-25", "2025-11-25"},
		{"2025-06-18", "2025-06-18"},
		{"2025-03-26", "2025-03-26"},
		{"2024-11-05", "2024-11-05"},
		{"2099-01-01", mcp.LatestLegacyVersion},
		{"2026-07-28", mcp.LatestLegacyVersion}, // the modern era has no initialize
	} {
		t.Run(tc.asked, func(t *testing.T) {
			a := newMemUpstream("a", "echo")
			a.info.Instructions = "  Use a carefully.  "
			a.info.Capabilities = json.RawMessage(`{"tools":{},"logging":{},"experimental":{"x":{}}}`)
			b := newMemUpstream("b")
			b.info.Capabilities = json.RawMessage(`{"resources":{"subscribe":true}}`)
			r := newMemRouter(t, a, b)
			c := dialStdio(t, New(r, Options{Name: "px", Version: "9", Instructions: "Proxy first."}, testLog(t)))

			m := c.initialize(tc.asked, `{"roots":{"listChanged":true},"sampling":{},"experimental":{}}`)
			if m.Error != nil {
				t.Fatalf("initialize: %+v", m.Error)
			}
			var res struct {
				ProtocolVersion string
				Capabilities    map[string]json.RawMessage
				ServerInfo      struct{ Name, Version string }
				Instructions    string
			}
			if err := json.Unmarshal(m.Result, &res); err != nil {
				t.Fatal(err)
			}
			if res.ProtocolVersion != tc.want {
				t.Errorf("negotiated %q, want %q", res.ProtocolVersion, tc.want)
			}
			if res.ServerInfo.Name != "px" || res.ServerInfo.Version != "9" {
				t.Errorf("serverInfo %+v", res.ServerInfo)
			}
			if _, ok := res.Capabilities["experimental"]; ok {
				t.Errorf("experimental capabilities offered: %s", m.Result)
			}
			contains(t, "tools", string(res.Capabilities["tools"]), `"listChanged":true`)
			contains(t, "resources", string(res.Capabilities["resources"]), `"subscribe":true`, `"listChanged":true`)
			if _, ok := res.Capabilities["logging"]; !ok {
				t.Errorf("logging not offered: %s", m.Result)
			}
			if want := "Proxy first.\n\n## a (names prefixed a)\n\nUse a carefully."; res.Instructions != want {
				t.Errorf("instructions %q, want %q", res.Instructions, want)
			}
			// The upstreams are told only what the proxy relays of this client, and that it
			// is a legacy client.
			a.mu.Lock()
			caps, legacy, starts := string(a.caps), a.legacy, a.starts
			a.mu.Unlock()
			if caps != `{"roots":{"listChanged":true},"sampling":{}}` || !legacy || starts != 1 {
				t.Errorf("upstream started %d times with caps %s, legacy %v", starts, caps, legacy)
			}
			if m := c.initialize(tc.asked, `{}`); m.code() != jsonrpc.CodeInvalidRequest {
				t.Errorf("second initialize: %+v", m)
			}
		})
	}
}

// TestLegacyRequestErrors: what a session refuses, and with which code; nothing a client
// sends ends the session.
func TestLegacyRequestErrors(t *testing.T) {
	r := newMemRouter(t, newMemUpstream("a", "echo"))
	c := dialStdio(t, New(r, Options{MaxMessage: 4096}, testLog(t)))

	// Before initialize only ping and initialize are served.
	if m := c.call(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); m.Error != nil || string(m.Result) != "{}" {
		t.Errorf("ping before initialize: %+v %s", m.Error, m.Result)
	}
	if m := c.call(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); m.code() != jsonrpc.CodeInvalidRequest ||
		!strings.Contains(m.Error.Message, "before initialize") {
		t.Errorf("tools/list before initialize: %+v", m)
	}
	for _, params := range []string{`{}`, `{"protocolVersion":5}`, `{"protocolVersion":"2025-11-25","capabilities":{"roots":5}}`} {
		if m := c.call(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":` + params + `}`); m.code() != jsonrpc.CodeInvalidParams {
			t.Errorf("initialize %s: %+v", params, m)
		}
	}
	if m := c.initialize("2025-11-25", `{}`); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	for _, tc := range []struct {
		name, line string
		code       int64
		id         string
	}{
		{"unknown method", `{"jsonrpc":"2.0","id":10,"method":"no/such"}`, jsonrpc.CodeMethodNotFound, "10"},
		{"not JSON", `{"jsonrpc":"2.0","id":11,`, jsonrpc.CodeParseError, "null"},
		{"no method, no result", `{"jsonrpc":"2.0","id":12}`, jsonrpc.CodeInvalidRequest, "12"},
		{"wrong version", `{"jsonrpc":"1.0","id":13,"method":"ping"}`, jsonrpc.CodeInvalidRequest, "13"},
		{"over the size limit", `{"jsonrpc":"2.0","id":14,"method":"ping","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`, jsonrpc.CodeInvalidRequest, "null"},
		{"tool name missing", `{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{}}`, jsonrpc.CodeInvalidParams, "15"},
		{"unknown tool", `{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"nope"}}`, jsonrpc.CodeInvalidParams, "16"},
		{"bad log level", `{"jsonrpc":"2.0","id":17,"method":"logging/setLevel","params":{"level":"loud"}}`, jsonrpc.CodeInvalidParams, "17"},
		{"tampered cursor", `{"jsonrpc":"2.0","id":18,"method":"tools/list","params":{"cursor":"AAAA"}}`, jsonrpc.CodeInvalidParams, "18"},
	} {
		c.send(tc.line)
		m := c.next()
		if m.code() != tc.code || string(m.ID) != tc.id {
			t.Errorf("%s: got id %s %+v, want id %s code %d", tc.name, m.ID, m.Error, tc.id, tc.code)
		}
	}
	// Still serving.
	if m := c.call(`{"jsonrpc":"2.0","id":20,"method":"logging/setLevel","params":{"level":"debug"}}`); m.Error != nil || string(m.Result) != "{}" {
		t.Errorf("logging/setLevel: %+v %s", m.Error, m.Result)
	}
	if m := c.call(`{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"a__echo"}}`); m.Error != nil || string(m.Result) != `{"ok":"a"}` {
		t.Errorf("tools/call: %+v %s", m.Error, m.Result)
	}
}

// TestUpstreamOutcomes: an upstream's result and JSON-RPC error reach the client as
// they are; a failure to reach it is a proxy error, never mistakable for the
// upstream's; a cancelled call is answered with nothing.
func TestUpstreamOutcomes(t *testing.T) {
	u := newMemUpstream("u", "ok", "rpcerr", "down", "broken", "cancelled")
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		name, _ := toolName(req.Params)
		switch name {
		case "rpcerr":
			return jsonrpc.NewErrorResponse(jsonrpc.IntID(1), jsonrpc.Errorf(-32000, "upstream says no")), nil
		case "down":
			return nil, fmt.Errorf("%w: not running", upstream.ErrUnavailable)
		case "broken":
			return nil, errors.New("pipe broke")
		case "cancelled":
			return nil, upstream.ErrCancelled
		}
		return result(`{"content":[]}`)
	}
	r := newMemRouter(t, u)
	c := dialStdio(t, New(r, Options{}, testLog(t)))
	c.initialize("2025-11-25", `{}`)

	for _, tc := range []struct {
		tool   string
		code   int64
		result string
		origin bool // a proxy-local error names the proxy as its origin
	}{
		{"u__ok", 0, `{"content":[]}`, false},
		{"u__rpcerr", -32000, "", false},
		{"u__down", mcp.CodeUpstreamUnavailable, "", true},
		{"u__broken", mcp.CodeUpstreamFailed, "", true},
	} {
		m := c.call(`{"jsonrpc":"2.0","id":"` + tc.tool + `","method":"tools/call","params":{"name":"` + tc.tool + `"}}`)
		if m.code() != tc.code || (tc.result != "" && string(m.Result) != tc.result) {
			t.Errorf("%s: %+v %s", tc.tool, m.Error, m.Result)
			continue
		}
		if m.Error != nil && strings.Contains(string(m.Error.Data), `"origin":"mcp-proxy"`) != tc.origin {
			t.Errorf("%s: error data %s, proxy origin %v", tc.tool, m.Error.Data, tc.origin)
		}
	}
	// The cancelled call gets no answer: the next message is the ping's.
	c.send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"u__cancelled"}}`)
	c.sync()
}

func toolName(params json.RawMessage) (string, bool) {
	var p struct{ Name string }
	if json.Unmarshal(params, &p) != nil {
		return "", false
	}
	return p.Name, p.Name != ""
}

// TestDuplicateIDAndCancel: an id still in flight cannot be reused; notifications/cancelled
// reaches the call in flight and a cancelled call is answered with nothing.
func TestDuplicateIDAndCancel(t *testing.T) {
	release := make(chan struct{})
	u := newMemUpstream("u", "wait")
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		<-release
		return nil, upstream.ErrCancelled
	}
	r := newMemRouter(t, u)
	c := dialStdio(t, New(r, Options{}, testLog(t)))
	c.initialize("2025-11-25", `{}`)

	c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"u__wait"}}`)
	if m := c.call(`{"jsonrpc":"2.0","id":7,"method":"ping"}`); m.Error != nil {
		t.Errorf("ping is answered whatever its id: %+v", m.Error)
	}
	if m := c.call(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); m.code() != jsonrpc.CodeInvalidRequest ||
		!strings.Contains(m.Error.Message, "already in use") {
		t.Errorf("duplicate id: %+v", m)
	}
	// Cancellations the session cannot use are ignored; the real one is taken.
	for _, params := range []string{`{}`, `{"requestId":null}`, `{"requestId":{}}`, `{"requestId":"unknown"}`, `{"requestId":7}`} {
		c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":` + params + `}`)
	}
	c.sync()
	close(release)
	u.wg.Wait() // the call has ended, and sent nothing
	c.sync()
	// Its id is free again.
	if m := c.call(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); m.Error != nil {
		t.Errorf("id reused after its call ended: %+v", m.Error)
	}
}

// TestClientNotifications: roots/list_changed goes to every running legacy upstream,
// other notifications are taken and ignored, and a response to no request is dropped.
func TestClientNotifications(t *testing.T) {
	legacy, modern := newMemUpstream("l"), newMemUpstream("m")
	modern.info.Modern = true
	r := newMemRouter(t, legacy, modern)
	c := dialStdio(t, New(r, Options{}, testLog(t)))
	c.initialize("2025-11-25", `{"roots":{"listChanged":true}}`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/whatever","params":{}}`)
	c.send(`{"jsonrpc":"2.0","id":99,"result":{}}`)
	c.send(`{"jsonrpc":"2.0","id":"str","error":{"code":1,"message":"x"}}`)
	c.sync()
	if got := legacy.notifications(); len(got) != 1 || got[0] != mcp.NotificationRootsListChanged {
		t.Errorf("legacy upstream got %v", got)
	}
	if got := modern.notifications(); len(got) != 0 {
		t.Errorf("modern upstream got %v; the modern era has no such notification", got)
	}
}

// TestProgressAndRelayedRequests: progress for a call reaches the client before its
// result; an upstream's request for input is relayed to the client with an id of the
// session's own, its answer goes back, and what the client did not declare is refused
// without asking it.
func TestProgressAndRelayedRequests(t *testing.T) {
	u := newMemUpstream("u", "progress", "roots", "sample", "reject")
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		name, _ := toolName(req.Params)
		switch name {
		case "progress":
			if req.Progress == nil {
				return result(`{"progress":"none"}`)
			}
			req.Progress(json.RawMessage(`{"progressToken":"tok","progress":1}`))
			return result(`{"done":true}`)
		case "roots", "sample", "reject":
			method := map[string]string{"roots": mcp.MethodRootsList, "sample": mcp.MethodSamplingCreateMessage, "reject": mcp.MethodRootsList}[name]
			res, jerr := req.Input(ctx, method, json.RawMessage(`{}`))
			if jerr != nil {
				return result(fmt.Sprintf(`{"refused":%d}`, jerr.Code))
			}
			return result(`{"answer":` + string(res) + `}`)
		}
		return result(`{}`)
	}
	r := newMemRouter(t, u)
	c := dialStdio(t, New(r, Options{}, testLog(t)))
	c.initialize("2025-11-25", `{"roots":{}}`)

	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"u__progress","_meta":{"progressToken":"tok"}}}`)
	if m := c.next(); m.Method != mcp.NotificationProgress || !strings.Contains(string(m.Params), `"progress":1`) {
		t.Errorf("first message %+v, want progress", m)
	}
	if m := c.next(); string(m.ID) != "1" || string(m.Result) != `{"done":true}` {
		t.Errorf("then %+v, want the result", m)
	}
	if m := c.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"u__progress"}}`); string(m.Result) != `{"progress":"none"}` {
		t.Errorf("a call without a progress token was given progress: %s", m.Result)
	}

	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"u__roots"}}`)
	req := c.next()
	if req.Method != mcp.MethodRootsList || len(req.ID) == 0 {
		t.Fatalf("relayed request %+v", req)
	}
	c.send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"roots":[{"uri":"file:///w"}]}}`)
	if m := c.next(); string(m.ID) != "3" || string(m.Result) != `{"answer":{"roots":[{"uri":"file:///w"}]}}` {
		t.Errorf("result after the client's answer: %+v %s", m.Error, m.Result)
	}

	// The client answers the next relayed request with an error: the upstream gets it.
	c.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"u__reject"}}`)
	req = c.next()
	c.send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-1,"message":"user said no"}}`)
	if m := c.next(); string(m.Result) != `{"refused":-1}` {
		t.Errorf("the client's error did not reach the upstream: %s", m.Result)
	}

	// Sampling was not declared: refused with -32601, the client never asked.
	if m := c.call(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"u__sample"}}`); string(m.Result) != `{"refused":-32601}` {
		t.Errorf("undeclared sampling: %s", m.Result)
	}
}

// TestNotificationsToClient: what the router tells clients reaches an initialized legacy
// session; an upstream's log message names the upstream; a request from an upstream
// with no call in flight goes to the one client.
func TestNotificationsToClient(t *testing.T) {
	u := newMemUpstream("u", "x")
	r := newMemRouter(t, u)
	c := dialStdio(t, New(r, Options{}, testLog(t)))
	c.initialize("2025-11-25", `{"roots":{}}`)
	ev, who := r.Events(), bystander(t)

	ev.Notification(who, jsonrpc.NewNotification(mcp.NotificationMessage, json.RawMessage(`{"level":"info","logger":"db","data":"hi"}`)))
	if m := c.next(); m.Method != mcp.NotificationMessage || !strings.Contains(string(m.Params), `"logger":"bystander/db"`) {
		t.Errorf("log message %+v %s", m, m.Params)
	}

	// A change of the merged catalogue is announced.
	u.cat = &upstream.Catalogue{Tools: append(u.cat.Tools, json.RawMessage(`{"name":"y","inputSchema":{"type":"object"}}`))}
	rebuild(t, r)
	if m := c.next(); m.Method != mcp.NotificationToolsListChanged {
		t.Errorf("after a tools change: %+v", m)
	}

	type reply struct {
		res json.RawMessage
		err *jsonrpc.Error
	}
	got := make(chan reply, 1)
	go func() {
		res, err := ev.Request(context.Background(), who, jsonrpc.NewRequest(jsonrpc.IntID(5), mcp.MethodRootsList, nil))
		got <- reply{res, err}
	}()
	req := c.next()
	if req.Method != mcp.MethodRootsList {
		t.Fatalf("relayed %+v", req)
	}
	c.send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"roots":[]}}`)
	if rp := recv(t, got); rp.err != nil || string(rp.res) != `{"roots":[]}` {
		t.Errorf("answer %s %v", rp.res, rp.err)
	}
}

// TestStdioBatches: a batch is answered as one array of what its requests would have
// got alone, elements refused as they stand answered in place; a batch of notifications
// only gets nothing; a batch that is not one gets one error.
func TestStdioBatches(t *testing.T) {
	r := newMemRouter(t, newMemUpstream("u", "echo"))
	c := dialStdio(t, New(r, Options{}, testLog(t)))
	c.initialize("2025-03-26", `{}`)

	c.send(`[{"jsonrpc":"2.0","id":1,"method":"ping"},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"u__echo"}},` +
		`{"jsonrpc":"2.0","method":"notifications/initialized"},` +
		`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}},` +
		`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{` + modernMetaJSON(`{}`) + `}},` +
		`{"jsonrpc":"2.0","id":5},` +
		`{"jsonrpc":"2.0","id":6,"method":"nope"},` +
		`{"jsonrpc":"2.0","id":77,"result":{}}]`)
	var got []wireMsg
	if err := json.Unmarshal([]byte(c.nextLine()), &got); err != nil {
		t.Fatalf("batch answer is not an array: %v", err)
	}
	byID := map[string]wireMsg{}
	for _, m := range got {
		byID[string(m.ID)] = m
	}
	if len(got) != 6 {
		t.Errorf("%d answers, want 6: %+v", len(got), got)
	}
	for id, code := range map[string]int64{"1": 0, "2": 0, "3": jsonrpc.CodeInvalidRequest, "4": jsonrpc.CodeInvalidRequest,
		"5": jsonrpc.CodeInvalidRequest, "6": jsonrpc.CodeMethodNotFound} {
		m, ok := byID[id]
		if !ok || m.code() != code {
			t.Errorf("element %s: %+v (present %v), want code %d", id, m.Error, ok, code)
		}
	}
	if string(byID["2"].Result) != `{"ok":"u"}` {
		t.Errorf("tools/call in a batch: %s", byID["2"].Result)
	}

	// Only notifications and responses: nothing comes back.
	c.send(`[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":8,"result":{}}]`)
	c.sync()

	for _, tc := range []struct {
		batch string
		code  int64
	}{{`[]`, jsonrpc.CodeInvalidRequest}, {`[{"jsonrpc":"2.0",`, jsonrpc.CodeParseError}, {`  [1`, jsonrpc.CodeParseError}} {
		c.send(tc.batch)
		if m := c.next(); m.code() != tc.code || string(m.ID) != "null" {
			t.Errorf("batch %q: %+v id %s, want %d", tc.batch, m.Error, m.ID, tc.code)
		}
	}
	// An element that is not an object is refused alone.
	c.send(`[1,{"jsonrpc":"2.0","id":9,"method":"ping"}]`)
	var two []wireMsg
	if err := json.Unmarshal([]byte(c.nextLine()), &two); err != nil || len(two) != 2 {
		t.Fatalf("mixed batch: %v %+v", err, two)
	}
}

// TestServeStreamEnds: ServeStream returns nil when its context ends, with the input
// still open.
func TestServeStreamEnds(t *testing.T) {
	r := newMemRouter(t, newMemUpstream("u"))
	c := dialStdio(t, New(r, Options{}, testLog(t)))
	c.sync()
	c.cancel()
	select {
	case err := <-c.served:
		if err != nil {
			t.Errorf("ServeStream after cancel: %v", err)
		}
		c.served <- nil // for close
	case <-time.After(waitFor):
		t.Fatal("ServeStream did not return when its context ended")
	}
}
