package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// httpFront is an HTTP front end over a router of in-memory upstreams, served by a real
// HTTP server (event streams need one); handled receives the X-Test-Tag header of every
// request that has one once its handler has returned. X-Test-Principal authenticates a
// request as that principal.
type httpFront struct {
	t       *testing.T
	h       *HTTPHandler
	r       *router.Router
	srv     *httptest.Server
	handled chan string
}

func newHTTPFront(t *testing.T, opts HTTPOptions, ups ...*memUpstream) *httpFront {
	t.Helper()
	r := newMemRouter(t, ups...)
	f := &httpFront{t: t, r: r, handled: make(chan string, 64)}
	f.h = New(r, Options{Name: "px"}, testLog(t)).NewHTTPHandler(context.Background(), opts)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if name := req.Header.Get("X-Test-Principal"); name != "" { // as an authenticating middleware would
			req = req.WithContext(principal.With(req.Context(), &principal.Principal{Name: name, Via: "api_key"}))
		}
		f.h.ServeHTTP(w, req)
		if tag := req.Header.Get("X-Test-Tag"); tag != "" {
			f.handled <- tag
		}
	}))
	t.Cleanup(func() {
		f.h.Close()
		f.h.Close() // safe twice
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	return f
}

// do sends a request to the front end; header values of "" are left out.
func (f *httpFront) do(ctx context.Context, method, path, body string, header map[string]string) *http.Response {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// postJSON POSTs body to /mcp as a client that accepts both answers, in session sid
// ("" for none), and returns the response with its body read.
func (f *httpFront) post(sid, body string, extra ...string) (*http.Response, string) {
	f.t.Helper()
	hdr := map[string]string{"Accept": "application/json, text/event-stream", "Content-Type": "application/json", "Mcp-Session-Id": sid}
	for i := 0; i+1 < len(extra); i += 2 {
		hdr[extra[i]] = extra[i+1]
	}
	resp := f.do(context.Background(), http.MethodPost, "/mcp", body, hdr)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp, string(b)
}

// initialize opens a legacy session and returns its id.
func (f *httpFront) initialize(version string) string {
	f.t.Helper()
	resp, body := f.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+
		`","capabilities":{"roots":{}},"clientInfo":{"name":"h","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" || !strings.Contains(body, `"protocolVersion":"`+version+`"`) {
		f.t.Fatalf("initialize: %d %q %s", resp.StatusCode, sid, body)
	}
	return sid
}

// awaitHandled waits until the handler of the request tagged tag has returned.
func (f *httpFront) awaitHandled(tag string) {
	f.t.Helper()
	if got := recv(f.t, f.handled); got != tag {
		f.t.Fatalf("handled %q, want %q", got, tag)
	}
}

// readEvent is one server-sent event (or keep-alive comment) as a client reads it.
type readEvent struct {
	id, name, data string
	comment        bool
}

type sseReader struct {
	t  *testing.T
	br *bufio.Reader
}

func newSSEReader(t *testing.T, r io.Reader) *sseReader {
	return &sseReader{t: t, br: bufio.NewReader(r)}
}

// next returns the next event; ok is false at the end of the stream.
func (s *sseReader) next() (ev readEvent, ok bool) {
	s.t.Helper()
	type line struct {
		s   string
		err error
	}
	for started := false; ; {
		ch := make(chan line, 1)
		go func() {
			l, err := s.br.ReadString('\n')
			ch <- line{l, err}
		}()
		l := recv(s.t, ch)
		if l.err != nil {
			return ev, false
		}
		text := strings.TrimRight(l.s, "\n")
		switch {
		case text == "" && started:
			return ev, true
		case text == "":
		case strings.HasPrefix(text, ":"):
			return readEvent{comment: true}, true
		case strings.HasPrefix(text, "id: "):
			ev.id, started = text[4:], true
		case strings.HasPrefix(text, "event: "):
			ev.name, started = text[7:], true
		case strings.HasPrefix(text, "data: "):
			ev.data, started = text[6:], true
		}
	}
}

// must returns the next event, failing when the stream ended.
func (s *sseReader) must() readEvent {
	s.t.Helper()
	ev, ok := s.next()
	if !ok {
		s.t.Fatal("the event stream ended")
	}
	return ev
}

// TestHTTPFrontDoor: what the front end refuses before any session or message is
// looked at, and with which status.
func TestHTTPFrontDoor(t *testing.T) {
	f := newHTTPFront(t, HTTPOptions{Loopback: true, MaxBody: 256})
	both := "application/json, text/event-stream"
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 300) + `"}}`
	for _, tc := range []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		has                      string
	}{
		{"another path", "GET", "/elsewhere", "", nil, 404, ""},
		{"a foreign Host", "POST", "/mcp", ping, map[string]string{"Host": "evil.example", "Accept": both}, 403, "Host"},
		{"a foreign Origin", "POST", "/mcp", ping, map[string]string{"Origin": "http://evil.example", "Accept": both}, 403, "Origin"},
		{"a loopback Origin", "POST", "/mcp", ping, map[string]string{"Origin": "http://localhost:5173", "Accept": both}, 400, "Mcp-Session-Id"},
		{"PUT", "PUT", "/mcp", ping, nil, 405, ""},
		{"POST /sse", "POST", "/sse", ping, nil, 405, ""},
		{"GET /message", "GET", "/message", "", nil, 405, ""},
		{"POST without Accept", "POST", "/mcp", ping, nil, 406, "Not Acceptable"},
		{"POST accepting only JSON", "POST", "/mcp", ping, map[string]string{"Accept": "application/json"}, 406, ""},
		{"POST accepting anything", "POST", "/mcp", ping, map[string]string{"Accept": "*/*"}, 400, "Mcp-Session-Id"},
		{"a body over the limit", "POST", "/mcp", big, map[string]string{"Accept": both}, 413, "too large"},
		{"not JSON", "POST", "/mcp", `{"jsonrpc":`, map[string]string{"Accept": both}, 400, "-32700"},
		{"not JSON-RPC", "POST", "/mcp", `{"id":3}`, map[string]string{"Accept": both}, 400, "-32600"},
		{"a batch without a session", "POST", "/mcp", `[` + ping + `]`, map[string]string{"Accept": both}, 400, "Mcp-Session-Id"},
		{"an unknown session", "POST", "/mcp", ping, map[string]string{"Accept": both, "Mcp-Session-Id": "nope"}, 404, "Session not found"},
		{"initialize in a session", "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, map[string]string{"Accept": both, "Mcp-Session-Id": "x"}, 400, "inside a session"},
		{"GET without Accept", "GET", "/mcp", "", map[string]string{"Mcp-Session-Id": "x"}, 406, ""},
		{"GET without a session", "GET", "/mcp", "", map[string]string{"Accept": "text/event-stream"}, 400, ""},
		{"GET of an unknown session", "GET", "/mcp", "", map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": "nope"}, 404, ""},
		{"DELETE without a session", "DELETE", "/mcp", "", nil, 400, ""},
		{"DELETE of an unknown session", "DELETE", "/mcp", "", map[string]string{"Mcp-Session-Id": "nope"}, 404, ""},
		{"/message without sessionId", "POST", "/message", ping, nil, 400, "sessionId"},
		{"/message of an unknown session", "POST", "/message?sessionId=nope", ping, nil, 404, ""},
	} {
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		req.Host = "127.0.0.1:8080"
		for k, v := range tc.header {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, req)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.has) {
			t.Errorf("%s: %d %q, want %d with %q", tc.name, w.Code, w.Body.String(), tc.status, tc.has)
		}
	}
	// The same limit holds for a body without a length.
	req := httptest.NewRequest("POST", "/mcp", io.MultiReader(strings.NewReader(big)))
	req.Host, req.ContentLength = "localhost", -1
	req.Header.Set("Accept", both)
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked body over the limit: %d", w.Code)
	}
	req = httptest.NewRequest("PUT", "/mcp", nil)
	req.Host = "localhost"
	w = httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	if got := w.Header().Get("Allow"); got != "GET, POST, DELETE" {
		t.Errorf("Allow: %q", got)
	}
}

// TestHostAndOriginRules pins which Host and Origin headers pass.
func TestHostAndOriginRules(t *testing.T) {
	loop := &HTTPHandler{opts: HTTPOptions{Loopback: true}}
	open := &HTTPHandler{}
	for host, want := range map[string]bool{
		"localhost": true, "localhost:8080": true, "127.0.0.1:1": true, "[::1]:80": true, "::1": true,
		"example.com": false, "localhost.example.com:80": false, "127.0.0.2": false,
	} {
		if got := loop.hostAllowed(host); got != want {
			t.Errorf("loopback hostAllowed(%q) = %v", host, got)
		}
		if !open.hostAllowed(host) {
			t.Errorf("hostAllowed(%q) refused without Loopback", host)
		}
	}
	for _, tc := range []struct {
		patterns []string
		origin   string
		want     bool
	}{
		{nil, "http://localhost:3000", true},
		{nil, "http://localhost", true},
		{nil, "https://localhost:1", true},
		{nil, "http://127.0.0.1:9", true},
		{nil, "http://[::1]:9", true},
		{nil, "http://localhost.evil.com", false},
		{nil, "https://127.0.0.1:9", false},
		{nil, "null", false},
		{[]string{"https://app.example"}, "https://app.example", true},
		{[]string{"https://app.example"}, "https://app.example:8443", false},
		{[]string{"https://app.example:*"}, "https://app.example:8443", true},
		{[]string{"https://app.example"}, "http://localhost:3000", false},
		{[]string{"*"}, "https://anything", true},
	} {
		h := &HTTPHandler{opts: HTTPOptions{AllowedOrigins: tc.patterns}}
		if got := h.originAllowed(tc.origin); got != tc.want {
			t.Errorf("originAllowed(%v, %q) = %v, want %v", tc.patterns, tc.origin, got, tc.want)
		}
	}
}

// TestHTTPLegacySession: initialize opens a session that answers as JSON, takes
// notifications and responses with 202, answers batches, and ends with DELETE.
func TestHTTPLegacySession(t *testing.T) {
	u := newMemUpstream("u", "echo", "fail")
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		if name, _ := toolName(req.Params); name == "fail" {
			return jsonrpc.NewErrorResponse(jsonrpc.IntID(1), jsonrpc.Errorf(-32000, "no")), nil
		}
		return result(`{"content":[]}`)
	}
	f := newHTTPFront(t, HTTPOptions{}, u)

	// A failed initialize opens no session.
	resp, body := f.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") != "" || !strings.Contains(body, "-32602") {
		t.Errorf("bad initialize: %d %q %s", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), body)
	}
	sid := f.initialize("2025-06-18")

	for _, tc := range []struct {
		name, body string
		extra      []string
		status     int
		want       string
	}{
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, 202, ""},
		{"response", `{"jsonrpc":"2.0","id":5,"result":{}}`, nil, 202, ""},
		{"ping", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil, 200, `{"jsonrpc":"2.0","id":1,"result":{}}`},
		{"tools/call", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"u__echo"}}`, nil, 200, `"result":{"content":[]}`},
		{"an upstream error", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"u__fail"}}`, nil, 200, `"code":-32000`},
		{"a legacy version header", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, []string{"Mcp-Protocol-Version", "2025-06-18"}, 200, `"result":{}`},
		{"an unsupported version header", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, []string{"Mcp-Protocol-Version", "2030-01-01"}, 400, "unsupported MCP-Protocol-Version"},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"u__echo"}},{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}}]`, nil, 200, `"id":3,"error"`},
		{"a batch of notifications", `[{"jsonrpc":"2.0","method":"notifications/initialized"}]`, nil, 202, ""},
		{"an empty batch", `[]`, nil, 400, "-32600"},
	} {
		resp, body := f.post(sid, tc.body, tc.extra...)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d with %s", tc.name, resp.StatusCode, body, tc.status, tc.want)
		}
		if tc.status == 200 && !strings.Contains(tc.name, "header") && resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.name, resp.Header.Get("Content-Type"))
		}
	}
	// The batch's answer is one array with every request's answer.
	_, body = f.post(sid, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"u__echo"}}]`)
	var arr []wireMsg
	if err := json.Unmarshal([]byte(body), &arr); err != nil || len(arr) != 2 {
		t.Errorf("batch answer %s: %v", body, err)
	}

	del := func() int {
		resp := f.do(context.Background(), http.MethodDelete, "/mcp", "", map[string]string{"Mcp-Session-Id": sid})
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := del(); got != http.StatusNoContent {
		t.Errorf("DELETE: %d", got)
	}
	if got := del(); got != http.StatusNotFound {
		t.Errorf("DELETE again: %d", got)
	}
	if resp, _ := f.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST after DELETE: %d", resp.StatusCode)
	}
}

// TestHTTPAnswerStreams: a request whose answer brings more than its response (progress,
// a request to the client) is answered with an event stream: from 2025-11-25 it starts
// with a priming event, every event has an id of its stream, and the client's answer to
// a request on it is POSTed back.
func TestHTTPAnswerStreams(t *testing.T) {
	u := newMemUpstream("u", "progress", "roots")
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		if name, _ := toolName(req.Params); name == "roots" {
			res, jerr := req.Input(ctx, mcp.MethodRootsList, nil)
			if jerr != nil {
				return jsonrpc.NewErrorResponse(jsonrpc.IntID(1), jerr), nil
			}
			return result(`{"roots":` + string(res) + `}`)
		}
		if req.Progress != nil {
			req.Progress(json.RawMessage(`{"progressToken":1,"progress":50}`))
		}
		return result(`{"done":true}`)
	}
	f := newHTTPFront(t, HTTPOptions{}, u)

	for _, tc := range []struct {
		version string
		primes  bool
	}{{"2025-11-25", true}, {"2025-06-18", false}} {
		sid := f.initialize(tc.version)
		resp, body := f.post(sid, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"u__progress","_meta":{"progressToken":1}}}`)
		if resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s: Content-Type %q", tc.version, resp.Header.Get("Content-Type"))
		}
		sr := newSSEReader(t, strings.NewReader(body))
		first := sr.must()
		if tc.primes {
			if first.id != "p1-0" || first.data != "" {
				t.Errorf("%s: priming event %+v", tc.version, first)
			}
			first = sr.must()
		}
		if first.id != "p1-1" || first.name != "message" || !strings.Contains(first.data, mcp.NotificationProgress) {
			t.Errorf("%s: progress event %+v", tc.version, first)
		}
		if last := sr.must(); last.id != "p1-2" || !strings.Contains(last.data, `"id":9,"result":{"done":true}`) {
			t.Errorf("%s: response event %+v", tc.version, last)
		}
		if _, more := sr.next(); more {
			t.Errorf("%s: the stream goes on after the response", tc.version)
		}
	}

	// A request to the client goes on the stream of the call that caused it; the client
	// POSTs its answer in the session.
	sid := f.initialize("2025-11-25")
	resp := f.do(context.Background(), http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"u__roots"}}`,
		map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid})
	defer resp.Body.Close()
	sr := newSSEReader(t, resp.Body)
	if prime := sr.must(); prime.data != "" {
		t.Errorf("priming event %+v", prime)
	}
	ev := sr.must()
	var req wireMsg
	if err := json.Unmarshal([]byte(ev.data), &req); err != nil || req.Method != mcp.MethodRootsList {
		t.Fatalf("relayed request %+v", ev)
	}
	if r, _ := f.post(sid, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"roots":[]}}`); r.StatusCode != http.StatusAccepted {
		t.Errorf("POSTing the answer: %d", r.StatusCode)
	}
	if last := sr.must(); !strings.Contains(last.data, `"result":{"roots":{"roots":[]}}`) {
		t.Errorf("final %+v", last)
	}
}
