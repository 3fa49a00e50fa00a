package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// httpWire is a raw HTTP client for the proxy's Streamable HTTP front end.
type httpWire struct {
	t   *testing.T
	url string
	sid string // legacy session id once initialized
}

// initialize opens a legacy session (2025-11-25, no client capabilities) and sends
// notifications/initialized; the test ends with the proxy's log when either fails.
func (c *httpWire) initialize(ctx context.Context, log fmt.Stringer) {
	c.t.Helper()
	init := c.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`, nil)
	if init.status != http.StatusOK || init.header.Get("Mcp-Session-Id") == "" {
		c.t.Fatalf("initialize: %d %s\n%s", init.status, init.body, log)
	}
	c.sid = init.header.Get("Mcp-Session-Id")
	if r := c.post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); r.status != http.StatusAccepted {
		c.t.Fatalf("initialized: %d\n%s", r.status, log)
	}
}

type wireReply struct {
	status int
	header http.Header
	body   []byte
}

// post sends body with the given extra headers (nil values delete a default) and
// reads the whole answer.
func (c *httpWire) post(ctx context.Context, body string, headers map[string]string) wireReply {
	c.t.Helper()
	resp := c.do(ctx, http.MethodPost, body, headers)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("reading answer: %v", err)
	}
	return wireReply{status: resp.StatusCode, header: resp.Header, body: b}
}

func (c *httpWire) do(ctx context.Context, method, body string, headers map[string]string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	return resp
}

// sseEvent is one parsed server-sent event.
type wireEvent struct{ id, event, data string }

// readEvents parses events from r until it ends or stop says so.
func readWireEvents(r io.Reader, stop func(wireEvent) bool) []wireEvent {
	var out []wireEvent
	var cur wireEvent
	var hasData bool
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.id != "" || hasData {
				out = append(out, cur)
				if stop != nil && stop(cur) {
					return out
				}
			}
			cur, hasData = wireEvent{}, false
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data += line[6:]
			hasData = true
		}
	}
	return out
}

func rpcErrorCode(t *testing.T, body []byte) int64 {
	t.Helper()
	var m struct {
		Error *struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.Error == nil {
		t.Fatalf("not a JSON-RPC error: %s", body)
	}
	return m.Error.Code
}

// TestHTTPModernHeaders checks the 2026-07-28 request headers on the proxy's front end:
// each must mirror the body (400 with -32020 otherwise), an unknown method is a 404 with
// -32601, and an unsupported version a 400 with -32022.
func TestHTTPModernHeaders(t *testing.T) {
	t.Parallel()
	url, stderr := startHTTPProxy(t, everythingUpstream("everything", "ev"))
	c := &httpWire{t: t, url: url}
	ctx := ctxT(t, 90*time.Second)
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	call := func(args string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ev__test_x_mcp_header","arguments":` + args + `,` + meta + `}}`
	}
	base := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "ev__test_x_mcp_header"}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{}
		for k, v := range base {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}

	// The first call may wait for the upstream to start; it must succeed.
	ok := c.post(ctx, call(`{"region":"us-west1","level":3}`), with(map[string]string{"Mcp-Param-Region": "us-west1"}))
	if ok.status != http.StatusOK || !strings.Contains(string(ok.body), `"result"`) {
		t.Fatalf("valid call: %d %s\n%s", ok.status, ok.body, stderr)
	}
	if ct := ok.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("a call with nothing but its response is answered as %q, want application/json", ct)
	}
	encoded := c.post(ctx, call(`{"region":"Zürich"}`), with(map[string]string{"Mcp-Param-Region": "=?base64?WsO8cmljaA==?="}))
	if encoded.status != http.StatusOK {
		t.Errorf("base64-encoded Mcp-Param-Region refused: %d %s", encoded.status, encoded.body)
	}
	noArg := c.post(ctx, call(`{"level":3}`), base)
	if noArg.status != http.StatusOK {
		t.Errorf("call without the mirrored argument refused: %d %s", noArg.status, noArg.body)
	}

	for _, tc := range []struct {
		name    string
		body    string
		headers map[string]string
		status  int
		code    int64
	}{
		{"no MCP-Protocol-Version", call(`{}`), with(map[string]string{"MCP-Protocol-Version": ""}), 400, -32020},
		{"MCP-Protocol-Version differs", call(`{}`), with(map[string]string{"MCP-Protocol-Version": "2025-11-25"}), 400, -32020},
		{"no Mcp-Method", call(`{}`), with(map[string]string{"Mcp-Method": ""}), 400, -32020},
		{"Mcp-Method differs", call(`{}`), with(map[string]string{"Mcp-Method": "tools/list"}), 400, -32020},
		{"no Mcp-Name", call(`{}`), with(map[string]string{"Mcp-Name": ""}), 400, -32020},
		{"Mcp-Name differs", call(`{}`), with(map[string]string{"Mcp-Name": "ev__other"}), 400, -32020},
		{"Mcp-Param missing", call(`{"region":"eu"}`), base, 400, -32020},
		{"Mcp-Param differs", call(`{"region":"eu"}`), with(map[string]string{"Mcp-Param-Region": "us"}), 400, -32020},
		{"Mcp-Param without argument", call(`{}`), with(map[string]string{"Mcp-Param-Region": "us"}), 400, -32020},
		{"Mcp-Param bad base64", call(`{"region":"eu"}`), with(map[string]string{"Mcp-Param-Region": "=?base64?%%%?="}), 400, -32020},
		{"unknown method", `{"jsonrpc":"2.0","id":2,"method":"tools/frobnicate","params":{` + meta + `}}`,
			map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/frobnicate"}, 404, -32601},
		{"removed method", `{"jsonrpc":"2.0","id":3,"method":"ping","params":{` + meta + `}}`,
			map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "ping"}, 404, -32601},
		{"unsupported version", `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			map[string]string{"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"}, 400, -32022},
	} {
		got := c.post(ctx, tc.body, tc.headers)
		if got.status != tc.status {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, got.status, tc.status, got.body)
			continue
		}
		if code := rpcErrorCode(t, got.body); code != tc.code {
			t.Errorf("%s: code %d, want %d (%s)", tc.name, code, tc.code, got.body)
		}
	}
}

// TestHTTPLegacyStreams checks the legacy answers: JSON when there is only the response,
// batches, an event stream with a priming event when progress comes first, and the
// resumption of a POST's stream with Last-Event-ID after the connection broke.
func TestHTTPLegacyStreams(t *testing.T) {
	t.Parallel()
	url, stderr := startHTTPProxy(t, testUpstream("t", "t", nil, ""))
	c := &httpWire{t: t, url: url}
	ctx := ctxT(t, 90*time.Second)
	c.initialize(ctx, stderr)

	echo := c.post(ctx, `{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"t__echo","arguments":{"x":1}}}`, nil)
	if ct := echo.header.Get("Content-Type"); echo.status != 200 || !strings.HasPrefix(ct, "application/json") || !strings.Contains(string(echo.body), `"id":"e"`) {
		t.Errorf("echo: %d %q %s", echo.status, ct, echo.body)
	}

	batch := c.post(ctx, `[{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"t__echo","arguments":{"n":10}}},`+
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},`+
		`{"jsonrpc":"2.0","id":11,"method":"tools/list"}]`, nil)
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(batch.body, &items); err != nil || len(items) != 2 {
		t.Fatalf("batch answer: %d %s (%v)", batch.status, batch.body, err)
	}
	ids := map[string]bool{string(items[0]["id"]): true, string(items[1]["id"]): true}
	if !ids["10"] || !ids["11"] {
		t.Errorf("batch answered ids %v", ids)
	}

	// A slow call with progress: the answer becomes a stream; the client reads the
	// priming event and the first progress, then its connection breaks.
	pctx, cancel := context.WithCancel(ctx)
	resp := c.do(pctx, http.MethodPost, `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"t__slow","arguments":{"ms":1500},"_meta":{"progressToken":"pt"}}}`, nil)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("slow call with progress answered as %q", ct)
	}
	var lastID string
	first := readWireEvents(resp.Body, func(e wireEvent) bool {
		lastID = e.id
		return strings.Contains(e.data, "notifications/progress")
	})
	cancel()
	resp.Body.Close()
	if len(first) < 2 || first[0].data != "" || first[0].id == "" {
		t.Fatalf("stream did not start with a priming event: %+v", first)
	}
	if lastID == "" {
		t.Fatalf("events carry no ids: %+v", first)
	}

	// Resume: the rest of the stream, ending with the response, arrives on a GET.
	get := c.do(ctx, http.MethodGet, "", map[string]string{"Accept": "text/event-stream", "Last-Event-ID": lastID})
	defer get.Body.Close()
	if get.StatusCode != http.StatusOK {
		t.Fatalf("resuming GET: %d", get.StatusCode)
	}
	rest := readWireEvents(get.Body, func(e wireEvent) bool { return strings.Contains(e.data, `"id":"slow"`) })
	if len(rest) == 0 || !strings.Contains(rest[len(rest)-1].data, `slept 1500ms`) {
		t.Fatalf("resumed stream: %+v\n%s", rest, stderr)
	}
	for _, e := range rest {
		if e.id <= lastID && len(e.id) == len(lastID) {
			t.Errorf("event %q replayed although the client had it (last %q)", e.id, lastID)
		}
	}

	// The GET stream itself starts with a priming event too.
	gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
	defer gcancel()
	g := c.do(gctx, http.MethodGet, "", map[string]string{"Accept": "text/event-stream"})
	evs := readWireEvents(g.Body, func(wireEvent) bool { return true })
	g.Body.Close()
	if len(evs) != 1 || !strings.HasPrefix(evs[0].id, "g-") {
		t.Errorf("GET stream did not start with a priming event: %+v", evs)
	}
}

// TestHTTPGracefulShutdown stops the proxy (SIGINT) while a call is in flight and a GET
// stream is open: the call still gets its response, the GET stream ends, and the proxy
// exits.
func TestHTTPGracefulShutdown(t *testing.T) {
	t.Parallel()
	url, stderr, cmd := startHTTPProxyCmd(t, testUpstream("t", "t", nil, ""))
	c := &httpWire{t: t, url: url}
	ctx := ctxT(t, 60*time.Second)
	init := c.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`, nil)
	c.sid = init.header.Get("Mcp-Session-Id")
	if c.sid == "" {
		t.Fatalf("initialize: %d %s\n%s", init.status, init.body, stderr)
	}
	get := c.do(ctx, http.MethodGet, "", map[string]string{"Accept": "text/event-stream"})
	getDone := make(chan struct{})
	go func() {
		defer close(getDone)
		readWireEvents(get.Body, nil) // until the proxy ends the stream
		get.Body.Close()
	}()
	slow := make(chan wireReply, 1)
	go func() {
		slow <- c.post(ctx, `{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"t__slow","arguments":{"ms":1500}}}`, nil)
	}()
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(interruptSignal()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-getDone:
	case <-time.After(5 * time.Second):
		t.Errorf("the GET stream did not end on shutdown")
	}
	select {
	case r := <-slow:
		if r.status != http.StatusOK || !strings.Contains(string(r.body), "slept 1500ms") {
			t.Errorf("in-flight call during shutdown: %d %s\n%s", r.status, r.body, stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("in-flight call never answered during shutdown\n%s", stderr)
	}
}
