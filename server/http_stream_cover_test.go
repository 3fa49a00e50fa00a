package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// openGET opens the session's GET stream, resuming after lastID when it is set.
// tag, when set, is reported on f.handled once the handler returns.
func (f *httpFront) openGET(ctx context.Context, sid, lastID, tag string) (*http.Response, *sseReader) {
	f.t.Helper()
	resp := f.do(ctx, http.MethodGet, "/mcp", "", map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": sid, "Last-Event-ID": lastID,
		"X-Test-Tag": tag})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		f.t.Fatalf("GET: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp, newSSEReader(f.t, resp.Body)
}

// logMessage makes the router tell every client a log message carrying text.
func (f *httpFront) logMessage(text string) {
	f.r.Events().Notification(bystander(f.t), jsonrpc.NewNotification(mcp.NotificationMessage,
		json.RawMessage(`{"level":"info","data":"`+text+`"}`)))
}

// keptEvents is the in-memory EventStore, telling a test when a stream has kept an
// event: a message the router sends a session is queued in the session's outbox and
// numbered on the outbox's goroutine, so its event id exists only once it is kept.
type keptEvents struct {
	*MemoryEventStore
	mu   sync.Mutex
	last map[string]uint64 // stream → the highest seq kept
	more chan struct{}     // closed and replaced on every Append
}

func newKeptEvents() *keptEvents {
	return &keptEvents{MemoryEventStore: NewMemoryEventStore(0), last: map[string]uint64{}, more: make(chan struct{})}
}

func (k *keptEvents) Append(ctx context.Context, session, stream string, seq uint64, data []byte) error {
	err := k.MemoryEventStore.Append(ctx, session, stream, seq, data)
	k.mu.Lock()
	k.last[stream] = max(k.last[stream], seq)
	close(k.more)
	k.more = make(chan struct{})
	k.mu.Unlock()
	return err
}

// await waits until the stream has kept its event seq.
func (k *keptEvents) await(t *testing.T, stream string, seq uint64) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		k.mu.Lock()
		got, more := k.last[stream], k.more
		k.mu.Unlock()
		if got >= seq {
			return
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("stream %s kept up to %d, want %d", stream, got, seq)
		}
	}
}

// TestHTTPGetStream: messages tied to no request go on the session's GET stream with
// ids of that stream; those sent while no GET is open are kept, and a client that comes
// back with Last-Event-ID gets what it missed.
func TestHTTPGetStream(t *testing.T) {
	kept := newKeptEvents()
	f := newHTTPFront(t, HTTPOptions{Events: kept}, newMemUpstream("u", "x"))
	sid := f.initialize("2025-11-25")

	ctx, cancel := context.WithCancel(context.Background())
	resp, sr := f.openGET(ctx, sid, "", "first GET")
	if prime := sr.must(); prime.id != "g-0" || prime.data != "" {
		t.Errorf("priming event %+v", prime)
	}
	f.logMessage("one")
	if ev := sr.must(); ev.id != "g-1" || !strings.Contains(ev.data, `"data":"one"`) {
		t.Errorf("first message %+v", ev)
	}
	cancel()
	resp.Body.Close()
	f.awaitHandled("first GET")

	f.logMessage("two") // no GET stream open: kept
	f.logMessage("three")
	// The client can only know g-2 once the session has issued it: the messages are
	// numbered on the session's outbox goroutine, after logMessage has returned.
	kept.await(t, "g", 3)
	_, sr = f.openGET(context.Background(), sid, "g-2", "")
	if prime := sr.must(); prime.id != "g-3" || prime.data != "" {
		t.Errorf("priming event on resumption %+v", prime)
	}
	if ev := sr.must(); ev.id != "g-3" || !strings.Contains(ev.data, `"data":"three"`) {
		t.Errorf("replayed %+v, want only what came after g-2", ev)
	}
	f.logMessage("four")
	if ev := sr.must(); ev.id != "g-4" || !strings.Contains(ev.data, `"data":"four"`) {
		t.Errorf("live after the replay %+v", ev)
	}

	// Draining ends the GET stream, and no session opens any more.
	f.h.Drain()
	f.h.Drain() // safe twice
	for {
		if _, more := sr.next(); !more {
			break
		}
	}
	resp, body := f.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("initialize while draining: %d %s", resp.StatusCode, body)
	}
}

// TestHTTPResumeAhead: a Last-Event-ID above the last event its stream has issued names
// no event (the client cannot have seen it), so it is answered as no Last-Event-ID is:
// the events no connection has carried yet, then the live ones, whatever the number.
func TestHTTPResumeAhead(t *testing.T) {
	kept := newKeptEvents()
	f := newHTTPFront(t, HTTPOptions{Events: kept}, newMemUpstream("u", "x"))
	sid := f.initialize("2025-11-25")

	ctx, cancel := context.WithCancel(context.Background())
	resp, sr := f.openGET(ctx, sid, "", "first GET")
	sr.must() // priming g-0
	f.logMessage("one")
	if ev := sr.must(); ev.id != "g-1" {
		t.Fatalf("first message %+v", ev)
	}
	cancel()
	resp.Body.Close()
	f.awaitHandled("first GET")

	f.logMessage("two") // no GET stream open: kept, and carried by no connection
	f.logMessage("three")
	kept.await(t, "g", 3)
	for i, last := range []string{"g-9", "g-100"} { // each ahead of the history
		ctx, cancel := context.WithCancel(context.Background())
		resp, sr := f.openGET(ctx, sid, last, "ahead")
		if prime := sr.must(); prime.id != "g-"+strconv.Itoa(3+i) || prime.data != "" {
			t.Errorf("resuming from %s: priming event %+v", last, prime)
		}
		if i == 0 { // the unsent events, once
			for _, want := range []string{"two", "three"} {
				if ev := sr.must(); !strings.Contains(ev.data, `"data":"`+want+`"`) {
					t.Errorf("resuming from %s: %+v, want %q", last, ev, want)
				}
			}
		}
		f.logMessage("live")
		if ev := sr.must(); ev.id != "g-"+strconv.Itoa(4+i) || !strings.Contains(ev.data, `"data":"live"`) {
			t.Errorf("resuming from %s: live %+v", last, ev)
		}
		cancel()
		resp.Body.Close()
		f.awaitHandled("ahead")
	}
}

// TestHTTPResumeAnswer: a legacy request goes on when its answer stream breaks; the
// client gets the rest by GET with the Last-Event-ID of that stream.
func TestHTTPResumeAnswer(t *testing.T) {
	release := make(chan struct{})
	u := newMemUpstream("u", "slow")
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		req.Progress(json.RawMessage(`{"progressToken":"p","progress":1}`))
		<-release
		return result(`{"finally":true}`)
	}
	f := newHTTPFront(t, HTTPOptions{}, u)
	sid := f.initialize("2025-11-25")

	ctx, cancel := context.WithCancel(context.Background())
	resp := f.do(ctx, http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"u__slow","_meta":{"progressToken":"p"}}}`,
		map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid, "X-Test-Tag": "slow call"})
	sr := newSSEReader(t, resp.Body)
	sr.must() // priming
	if ev := sr.must(); ev.id != "p1-1" || !strings.Contains(ev.data, mcp.NotificationProgress) {
		t.Fatalf("progress %+v", ev)
	}
	cancel()
	resp.Body.Close()
	f.awaitHandled("slow call")
	close(release)
	u.wg.Wait() // the call has ended while no one listened

	resp, sr = f.openGET(context.Background(), sid, "p1-1", "")
	defer resp.Body.Close()
	if ev := sr.must(); ev.id != "p1-2" || !strings.Contains(ev.data, `"id":4,"result":{"finally":true}`) {
		t.Errorf("resumed %+v", ev)
	}
	if _, more := sr.next(); more {
		t.Errorf("a resumed stream that had ended goes on")
	}
	// The stream has been delivered and forgotten: the same id now opens the GET stream.
	resp, sr = f.openGET(context.Background(), sid, "p1-1", "")
	defer resp.Body.Close()
	if ev := sr.must(); ev.id != "g-0" {
		t.Errorf("after the answer was delivered, p1-1 resumed %+v", ev)
	}
}

// TestHTTPKeepAlive: a call that takes long turns its answer into an event stream with
// keep-alive comments, and ends with the response.
func TestHTTPKeepAlive(t *testing.T) {
	release := make(chan struct{})
	u := newMemUpstream("u", "slow")
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		<-release
		return result(`{"late":true}`)
	}
	f := newHTTPFront(t, HTTPOptions{KeepAlive: 5 * time.Millisecond}, u)
	sid := f.initialize("2025-06-18")
	resp := f.do(context.Background(), http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"u__slow"}}`,
		map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid})
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	sr := newSSEReader(t, resp.Body)
	if ev := sr.must(); !ev.comment {
		t.Errorf("want a keep-alive comment first, got %+v", ev)
	}
	close(release)
	for {
		ev := sr.must()
		if ev.comment {
			continue
		}
		if !strings.Contains(ev.data, `"result":{"late":true}`) {
			t.Errorf("response %+v", ev)
		}
		break
	}
}

// TestHTTPLegacySSE: the 2024-11-05 transport: GET /sse names the endpoint to POST to,
// every answer comes on that stream, and the session ends with it.
func TestHTTPLegacySSE(t *testing.T) {
	f := newHTTPFront(t, HTTPOptions{MaxBody: 1024}, newMemUpstream("u", "echo"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := f.do(ctx, http.MethodGet, "/sse", "", map[string]string{"X-Test-Tag": "sse"})
	defer resp.Body.Close()
	sr := newSSEReader(t, resp.Body)
	ep := sr.must()
	if ep.name != "endpoint" || ep.id != "" || !strings.HasPrefix(ep.data, "/message?sessionId=") {
		t.Fatalf("endpoint event %+v", ep)
	}
	post := func(body string) int {
		r := f.do(context.Background(), http.MethodPost, ep.data, body, nil)
		r.Body.Close()
		return r.StatusCode
	}
	if st := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`); st != http.StatusAccepted {
		t.Errorf("initialize: %d", st)
	}
	for {
		ev := sr.must()
		if ev.data == "" {
			continue // priming
		}
		if ev.name != "message" || ev.id != "" || !strings.Contains(ev.data, `"protocolVersion":"2024-11-05"`) {
			t.Errorf("initialize answer %+v", ev)
		}
		break
	}
	post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"u__echo"}}`)
	if ev := sr.must(); !strings.Contains(ev.data, `"id":2,"result":{"ok":"u"}`) {
		t.Errorf("tools/call answer %+v", ev)
	}
	if st := post(`{"pad":"` + strings.Repeat("x", 2000) + `"}`); st != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit: %d", st)
	}
	// A Streamable HTTP request cannot use this session.
	if r, _ := f.post(strings.TrimPrefix(ep.data, "/message?sessionId="), `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.StatusCode != http.StatusNotFound {
		t.Errorf("the SSE session on /mcp: %d", r.StatusCode)
	}

	cancel()
	resp.Body.Close()
	f.awaitHandled("sse")
	if st := post(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); st != http.StatusNotFound {
		t.Errorf("POST after the stream closed: %d", st)
	}
}

// TestHTTPSessionLimits: the session cap refuses new sessions on both transports, and an
// idle session ends by itself.
func TestHTTPSessionLimits(t *testing.T) {
	f := newHTTPFront(t, HTTPOptions{MaxSessions: 1, SessionIdle: 20 * time.Millisecond}, newMemUpstream("u"))
	sid := f.initialize("2025-11-25")
	f.h.mu.RLock()
	hs := f.h.sessions[sid]
	f.h.mu.RUnlock()

	resp, body := f.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "Too many sessions") {
		t.Errorf("second session: %d %s", resp.StatusCode, body)
	}
	if r := f.do(context.Background(), http.MethodGet, "/sse", "", nil); r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /sse over the cap: %d", r.StatusCode)
	} else {
		r.Body.Close()
	}

	select {
	case <-hs.ctx.Done():
	case <-time.After(waitFor):
		t.Fatal("the idle session was not ended")
	}
	if resp, _ := f.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the expired session answered: %d", resp.StatusCode)
	}
	f.initialize("2025-11-25") // there is room again
}

// modernPost POSTs a modern request with the headers that mirror it (hdr adds or, with
// "", removes some).
func (f *httpFront) modernPost(body string, hdr ...string) (*http.Response, string) {
	f.t.Helper()
	var m wireMsg
	_ = json.Unmarshal([]byte(body), &m)
	h := []string{"Mcp-Protocol-Version", mcp.ModernVersion, "Mcp-Method", m.Method}
	return f.post("", body, append(h, hdr...)...)
}

// TestHTTPModern: modern requests need no session; their headers must agree with the
// body; the errors of the modern transport are HTTP statuses.
func TestHTTPModern(t *testing.T) {
	u := newMemUpstream("u", "echo", "needs", "tagged")
	u.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"res://a b","name":"a"}`)}
	u.cat.ParamHeaders = map[string][]mcp.ParamHeader{"tagged": {{Path: []string{"region"}, Header: "Mcp-Param-Region", Type: "string"}}}
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		if name, _ := toolName(req.Params); name == "needs" {
			return jsonrpc.NewErrorResponse(jsonrpc.IntID(1), jsonrpc.Errorf(mcp.CodeMissingClientCapability, "needs sampling")), nil
		}
		if req.Progress != nil {
			req.Progress(json.RawMessage(`{"progressToken":"t","progress":1}`))
		}
		return result(`{"content":[]}`)
	}
	f := newHTTPFront(t, HTTPOptions{}, u)
	call := func(params string) string { return modernReq("1", "tools/call", params, `{}`) }
	for _, tc := range []struct {
		name, body string
		hdr        []string
		status     int
		want       string
	}{
		{"tools/list", modernReq("1", "tools/list", "", `{}`), nil, 200, `"resultType":"complete"`},
		{"discover", modernReq("1", "server/discover", "", `{}`), nil, 200, `"supportedVersions"`},
		{"discover without a version", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, nil, 400, "-32602"},
		{"no version header", modernReq("1", "tools/list", "", `{}`), []string{"Mcp-Protocol-Version", ""}, 400, "-32020"},
		{"another version header", modernReq("1", "tools/list", "", `{}`), []string{"Mcp-Protocol-Version", "2025-11-25"}, 400, "-32020"},
		{"no method header", modernReq("1", "tools/list", "", `{}`), []string{"Mcp-Method", ""}, 400, "-32020"},
		{"another method header", modernReq("1", "tools/list", "", `{}`), []string{"Mcp-Method", "prompts/list"}, 400, "-32020"},
		{"an unknown method", modernReq("1", "ping", "", `{}`), nil, 404, "-32601"},
		{"an unsupported version", strings.Replace(modernReq("1", "tools/list", "", `{}`), mcp.ModernVersion, "2030-01-01", 1), []string{"Mcp-Protocol-Version", "2030-01-01"}, 400, "-32022"},
		{"tools/call without Mcp-Name", call(`"name":"u__echo"`), nil, 400, "Mcp-Name header is required"},
		{"tools/call with another Mcp-Name", call(`"name":"u__echo"`), []string{"Mcp-Name", "u__other"}, 400, "-32020"},
		{"tools/call with a malformed Mcp-Name", call(`"name":"u__echo"`), []string{"Mcp-Name", "=?base64?!!?="}, 400, "-32020"},
		{"tools/call", call(`"name":"u__echo"`), []string{"Mcp-Name", "u__echo"}, 200, `"content":[]`},
		{"tools/call with an encoded Mcp-Name", call(`"name":"u__echo"`), []string{"Mcp-Name", mcp.EncodeHeaderValue("u__echo") + ""}, 200, `"content":[]`},
		{"a missing capability is a 400", call(`"name":"u__needs"`), []string{"Mcp-Name", "u__needs"}, 400, "-32021"},
		{"a mirrored argument without its header", call(`"name":"u__tagged","arguments":{"region":"eu"}`), []string{"Mcp-Name", "u__tagged"}, 400, "Mcp-Param-Region"},
		{"a mirrored argument with another value", call(`"name":"u__tagged","arguments":{"region":"eu"}`), []string{"Mcp-Name", "u__tagged", "Mcp-Param-Region", "us"}, 400, "-32020"},
		{"a mirrored argument", call(`"name":"u__tagged","arguments":{"region":"eu"}`), []string{"Mcp-Name", "u__tagged", "Mcp-Param-Region", "eu"}, 200, `"content":[]`},
		{"resources/read with an encoded URI", modernReq("1", "resources/read", `"uri":"res://a b"`, `{}`), []string{"Mcp-Name", mcp.EncodeHeaderValue("res://a b")}, 200, `"resultType":"complete"`},
		{"resources/read with another URI", modernReq("1", "resources/read", `"uri":"res://a b"`, `{}`), []string{"Mcp-Name", "res://b"}, 400, "-32020"},
	} {
		resp, body := f.modernPost(tc.body, tc.hdr...)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d with %s", tc.name, resp.StatusCode, body, tc.status, tc.want)
		}
		if resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: a modern request opened a session", tc.name)
		}
	}

	// Progress makes a modern answer a stream, without ids (it cannot be resumed), and
	// the client's own id comes back.
	withProgress := strings.Replace(modernReq(`"mine"`, "tools/call", `"name":"u__echo"`, `{}`), `"_meta":{`, `"_meta":{"progressToken":"t",`, 1)
	resp, body := f.modernPost(withProgress, "Mcp-Name", "u__echo")
	if resp.Header.Get("Content-Type") != "text/event-stream" || strings.Contains(body, "id: ") ||
		!strings.Contains(body, mcp.NotificationProgress) || !strings.Contains(body, `"id":"mine"`) {
		t.Errorf("modern stream: %q %s", resp.Header.Get("Content-Type"), body)
	}
}

// TestHTTPModernListenAndRounds: a modern subscription is an event stream that the
// proxy ends when it drains; input rounds work over HTTP as over stdio.
func TestHTTPModernListenAndRounds(t *testing.T) {
	u := newMemUpstream("u", "ask")
	u.info.Capabilities = json.RawMessage(`{"tools":{}}`)
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		res, jerr := req.Input(ctx, mcp.MethodElicitationCreate, json.RawMessage(`{"message":"?"}`))
		if jerr != nil {
			return jsonrpc.NewErrorResponse(jsonrpc.IntID(1), jerr), nil
		}
		return result(`{"got":` + string(res) + `}`)
	}
	f := newHTTPFront(t, HTTPOptions{}, u)
	const caps = `{"elicitation":{}}`

	resp, body := f.modernPost(modernReq("1", "tools/call", `"name":"u__ask"`, caps), "Mcp-Name", "u__ask")
	var m wireMsg
	if err := json.Unmarshal([]byte(body), &m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first round: %d %s", resp.StatusCode, body)
	}
	ir := readInputRequired(t, m)
	_, body = f.modernPost(modernReq("2", "tools/call", `"name":"u__ask","requestState":"`+ir.RequestState+`","inputResponses":{"input":{"action":"decline"}}`, caps),
		"Mcp-Name", "u__ask")
	if !strings.Contains(body, `"result":{"got":{"action":"decline"},"resultType":"complete"}`) {
		t.Errorf("retry: %s", body)
	}

	listen, sr := f.listen("7")
	defer listen.Body.Close()
	if ev := sr.must(); !strings.Contains(ev.data, mcp.NotificationSubscriptionsAcked) || !strings.Contains(ev.data, `"toolsListChanged":true`) {
		t.Errorf("acknowledgement %+v", ev)
	}
	u.cat = &upstream.Catalogue{Tools: append(u.cat.Tools, json.RawMessage(`{"name":"more","inputSchema":{}}`))}
	rebuild(t, f.r)
	if ev := sr.must(); !strings.Contains(ev.data, mcp.NotificationToolsListChanged) || !strings.Contains(ev.data, `"io.modelcontextprotocol/subscriptionId"`) {
		t.Errorf("list change %+v", ev)
	}
	f.h.Drain()
	for {
		if _, more := sr.next(); !more {
			break
		}
	}
}

// listen opens a modern subscription to tools list changes over HTTP.
func (f *httpFront) listen(id string) (*http.Response, *sseReader) {
	f.t.Helper()
	resp := f.do(context.Background(), http.MethodPost, "/mcp", modernReq(id, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`, `{}`),
		map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": mcp.ModernVersion, "Mcp-Method": "subscriptions/listen"})
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		f.t.Fatalf("listen: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp, newSSEReader(f.t, resp.Body)
}

// TestHTTPListenSubscriptionID: over HTTP as over stdio, a subscription's messages carry
// the id of the client's listen request as their subscriptionId.
func TestHTTPListenSubscriptionID(t *testing.T) {
	f := newHTTPFront(t, HTTPOptions{}, newMemUpstream("u", "x"))
	resp, sr := f.listen(`"sub-1"`)
	defer resp.Body.Close()
	ack := sr.must()
	if !strings.Contains(ack.data, `"io.modelcontextprotocol/subscriptionId":"sub-1"`) {
		t.Errorf("acknowledgement: %s", ack.data)
	}
	f.h.Drain()
}

// TestHTTPStateBoundToPrincipal: a requestState, the proxy's own or an upstream's,
// brings back the call only for the principal it was issued to.
func TestHTTPStateBoundToPrincipal(t *testing.T) {
	u := newMemUpstream("u", "ask", "form")
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		if name, _ := toolName(req.Params); name == "form" {
			if st, _, _ := jsonx.GetString(req.Params, "requestState"); st == "up-1" {
				return result(`{"done":"form"}`)
			}
			return result(`{"resultType":"input_required","inputRequests":{},"requestState":"up-1"}`)
		}
		res, jerr := req.Input(ctx, mcp.MethodElicitationCreate, json.RawMessage(`{}`))
		if jerr != nil {
			return jsonrpc.NewErrorResponse(jsonrpc.IntID(1), jerr), nil
		}
		return result(`{"got":` + string(res) + `}`)
	}
	f := newHTTPFront(t, HTTPOptions{}, u)
	const caps = `{"elicitation":{}}`
	as := func(who, id, tool, extra string) wireMsg {
		t.Helper()
		params := `"name":"` + tool + `"`
		if extra != "" {
			params += "," + extra
		}
		_, body := f.modernPost(modernReq(id, "tools/call", params, caps), "Mcp-Name", tool, "X-Test-Principal", who)
		var m wireMsg
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("%s: %s", who, body)
		}
		return m
	}
	for _, tool := range []string{"u__ask", "u__form"} {
		ir := readInputRequired(t, as("alice", "1", tool, ""))
		retry := `"requestState":"` + ir.RequestState + `","inputResponses":{"input":{"action":"accept"}}`
		if m := as("bob", "2", tool, retry); m.code() != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: bob retried alice's call: %+v %s", tool, m.Error, m.Result)
		}
		if m := as("alice", "3", tool, retry); m.Error != nil || !strings.Contains(string(m.Result), `"resultType":"complete"`) {
			t.Errorf("%s: alice's retry: %+v %s", tool, m.Error, m.Result)
		}
	}
}

// TestParseEventID pins how a Last-Event-ID is split.
func TestParseEventID(t *testing.T) {
	for _, tc := range []struct {
		in     string
		stream string
		seq    int64
		ok     bool
	}{
		{"g-0", "g", 0, true},
		{"p12-345", "p12", 345, true},
		{"a-b-7", "a-b", 7, true},
		{"-7", "", 0, false},
		{"g", "", 0, false},
		{"g-", "", 0, false},
		{"g-x", "", 0, false},
		{"g--1", "g-", 1, true}, // split at the last dash
		{"g-99999999999999999999", "", 0, false},
	} {
		stream, seq, ok := parseEventID(tc.in)
		if stream != tc.stream || seq != tc.seq || ok != tc.ok {
			t.Errorf("parseEventID(%q) = %q %d %v, want %q %d %v", tc.in, stream, seq, ok, tc.stream, tc.seq, tc.ok)
		}
	}
}
