package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpServerUnderTest is run in -http mode in-process.
type httpServerUnderTest struct {
	url    string // http://ADDR/mcp
	base   string // http://ADDR
	stderr *lockedBuffer
	cancel context.CancelFunc
	done   chan error
}

// startHTTPServer runs run with -http on a free port and args; the server is stopped at
// the end of the test.
func startHTTPServer(t *testing.T, args ...string) *httpServerUnderTest {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	ctx, cancel := context.WithCancel(context.Background())
	s := &httpServerUnderTest{stderr: &lockedBuffer{}, cancel: cancel, done: make(chan error, 1)}
	argv := append([]string{"misbehave", "-http", "127.0.0.1:0", "-http-addr-file", addrFile}, args...)
	go func() { s.done <- run(ctx, argv, strings.NewReader(""), io.Discard, s.stderr) }()
	deadline := time.Now().Add(testTimeout)
	for {
		b, err := os.ReadFile(addrFile)
		if err == nil {
			addr := strings.TrimSpace(string(b))
			s.base = "http://" + addr
			s.url = s.base + mcpPath
			break
		}
		select {
		case err := <-s.done:
			t.Fatalf("server returned before listening: %v\n%s", err, s.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no address file after %v\n%s", testTimeout, s.stderr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop cancels the server and returns run's result (once; later calls return nil).
func (s *httpServerUnderTest) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err, ok := <-s.done:
		if !ok {
			return nil
		}
		close(s.done)
		return err
	case <-time.After(testTimeout):
		t.Fatalf("server did not stop\n%s", s.stderr)
		return nil
	}
}

// httpClient is one MCP session over plain net/http.
type httpClient struct {
	t       *testing.T
	url     string
	hc      *http.Client
	session string
	nextID  int
}

func newHTTPClient(t *testing.T, url string) *httpClient {
	return &httpClient{t: t, url: url, hc: &http.Client{Timeout: testTimeout, Transport: &http.Transport{}}}
}

// post sends body with the session headers and returns the status, headers and body.
func (c *httpClient) post(body string, headers map[string]string) (int, http.Header, string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("POST %s: %v", body, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("reading the answer to %s: %v", body, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// request sends a request and decodes its JSON response.
func (c *httpClient) request(method string, params any) *message {
	c.t.Helper()
	c.nextID++
	req := map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": method}
	if params != nil {
		req["params"] = params
	}
	b, _ := json.Marshal(req)
	status, h, body := c.post(string(b), nil)
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		c.t.Fatalf("%s: status %d, Content-Type %q, body %s", method, status, h.Get("Content-Type"), body)
	}
	if method == "initialize" {
		c.session = h.Get("Mcp-Session-Id")
		if len(c.session) < 16 {
			c.t.Fatalf("initialize: Mcp-Session-Id = %q", c.session)
		}
	}
	m := &message{raw: body}
	if err := json.Unmarshal([]byte(body), m); err != nil {
		c.t.Fatalf("%s: answer is not JSON: %q", method, body)
	}
	if string(m.ID) != fmt.Sprint(c.nextID) {
		c.t.Fatalf("%s: id %s, want %d", method, m.ID, c.nextID)
	}
	return m
}

func (c *httpClient) handshake() {
	c.t.Helper()
	m := c.request("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "t", "version": "1"}})
	if !strings.Contains(string(m.Result), `"protocolVersion":"2025-06-18"`) {
		c.t.Fatalf("initialize result: %s", m.raw)
	}
	if status, _, body := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); status != http.StatusAccepted || body != "" {
		c.t.Fatalf("notifications/initialized: %d %q", status, body)
	}
}

// openGET opens the session's GET stream and returns a reader of its lines.
func (c *httpClient) openGET(ctx context.Context) (*http.Response, *bufio.Reader) {
	c.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.session)
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		c.t.Fatalf("GET: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp, bufio.NewReader(resp.Body)
}

func (c *httpClient) delete() int {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, c.url, nil)
	req.Header.Set("Mcp-Session-Id", c.session)
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func getStats(t *testing.T, base string) statsSnapshot {
	t.Helper()
	resp, err := http.Get(base + statsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s statsSnapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// readLineTimeout reads one line of an event stream, failing the test after testTimeout.
func readLineTimeout(t *testing.T, br *bufio.Reader) (string, error) {
	t.Helper()
	type res struct {
		line string
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		l, err := br.ReadString('\n')
		ch <- res{l, err}
	}()
	select {
	case r := <-ch:
		return r.line, r.err
	case <-time.After(testTimeout):
		t.Fatal("timed out reading the event stream")
		return "", nil
	}
}

func TestHTTPFast(t *testing.T) {
	s := startHTTPServer(t, "-fast", "-http-keepalive", "20ms")
	c := newHTTPClient(t, s.url)
	c.handshake()

	var tools struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(c.request("tools/list", nil).Result, &tools); err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
		t.Errorf("tools/list: %+v %v", tools, err)
	}
	if m := c.request("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}); string(m.Result) != string(fastEchoResult) {
		t.Errorf("echo: %s", m.raw)
	}
	if m := c.request("tools/call", map[string]any{"name": "nope"}); m.Error == nil || m.Error.Code != codeInvalidParams {
		t.Errorf("unknown tool: %s", m.raw)
	}
	if m := c.request("prompts/list", nil); m.Error == nil || m.Error.Code != codeMethodNotFound {
		t.Errorf("prompts/list: %s", m.raw)
	}

	call := `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"echo"}}`
	for _, tc := range []struct {
		name    string
		body    string
		headers map[string]string
		status  int
		want    string // in the body
	}{
		{"no session", call, map[string]string{"Mcp-Session-Id": ""}, 400, `"id":"c1","error":{"code":-32600`},
		{"unknown session", call, map[string]string{"Mcp-Session-Id": "nope"}, 404, `"id":"c1"`},
		{"bad version", call, map[string]string{"MCP-Protocol-Version": "1999-01-01"}, 400, "unsupported MCP-Protocol-Version"},
		{"initialize in a session", `{"jsonrpc":"2.0","id":9,"method":"initialize","params":{}}`, nil, 400, "initialize inside a session"},
		{"batch", "[" + call + "]", nil, 400, "Batch"},
		{"parse error", "{nope", nil, 400, `"code":-32700`},
		{"foreign origin", call, map[string]string{"Origin": "http://evil.example"}, 403, "Origin"},
		{"loopback origin", call, map[string]string{"Origin": "http://localhost:3000"}, 200, `"id":"c1","result"`},
		{"not acceptable", call, map[string]string{"Accept": "text/html"}, 406, "Accept"},
		{"a response", `{"jsonrpc":"2.0","id":"s1","result":{}}`, nil, 202, ""},
		{"a notification", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, nil, 202, ""},
	} {
		status, _, body := c.post(tc.body, tc.headers)
		if status != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: status %d body %q, want %d containing %q", tc.name, status, body, tc.status, tc.want)
		}
	}

	// Other methods and paths.
	req, _ := http.NewRequest(http.MethodPut, s.url, nil)
	if resp, err := c.hc.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if resp, err := c.hc.Get(s.base + "/elsewhere"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /elsewhere: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// The GET stream stays open with keep-alive comments and ends with the session.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, br := c.openGET(ctx)
	defer resp.Body.Close()
	if line, err := readLineTimeout(t, br); err != nil || line != ": keep-alive\n" {
		t.Errorf("GET stream: %q %v, want a keep-alive comment", line, err)
	}
	if st := getStats(t, s.base); st.GetStreamsOpen != 1 || st.SessionsActive != 1 {
		t.Errorf("stats with a GET stream open: %+v", st)
	}
	if code := c.delete(); code != http.StatusNoContent {
		t.Errorf("DELETE: %d", code)
	}
	for {
		line, err := readLineTimeout(t, br)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || (line != ": keep-alive\n" && line != "\n") {
			t.Fatalf("GET stream after DELETE: %q %v", line, err)
		}
	}
	if status, _, _ := c.post(call, nil); status != http.StatusNotFound {
		t.Errorf("POST after DELETE: %d, want 404", status)
	}
	if code := c.delete(); code != http.StatusNotFound {
		t.Errorf("second DELETE: %d, want 404", code)
	}
	if err := s.stop(t); err != nil {
		t.Errorf("run = %v, want nil after cancellation", err)
	}
}

// TestHTTPConnectionReuse checks the counters a load test relies on: calls over a
// keep-alive client reuse one connection, and /stats requests are not counted as MCP
// connections.
func TestHTTPConnectionReuse(t *testing.T) {
	s := startHTTPServer(t, "-fast")
	c := newHTTPClient(t, s.url)
	c.handshake()
	before := getStats(t, s.base)
	for range 100 {
		c.request("tools/call", map[string]any{"name": "echo"})
	}
	after := getStats(t, s.base)
	if after.MCPConnections != 1 || after.MCPConnections != before.MCPConnections {
		t.Errorf("MCP connections %d before, %d after 100 calls on one keep-alive client; want 1 and 1", before.MCPConnections, after.MCPConnections)
	}
	if got := after.ToolCalls - before.ToolCalls; got != 100 {
		t.Errorf("tool calls counted: %d, want 100", got)
	}
	if after.ConnectionsAccepted < 2 || after.SessionsOpened != 1 || after.Requests != 101 {
		t.Errorf("stats: %+v", after)
	}
	// A client that does not keep connections alive opens one per request.
	c.hc = &http.Client{Timeout: testTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	for range 5 {
		c.request("ping", nil)
	}
	if got := getStats(t, s.base).MCPConnections; got != 6 {
		t.Errorf("MCP connections after 5 calls without keep-alive: %d, want 6", got)
	}
}

func TestHTTPNoGET(t *testing.T) {
	s := startHTTPServer(t, "-fast", "-http-get=false")
	c := newHTTPClient(t, s.url)
	c.handshake()
	req, _ := http.NewRequest(http.MethodGet, s.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.session)
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET with -http-get=false: %d, want 405", resp.StatusCode)
	}
}

func TestHTTPExitAfter(t *testing.T) {
	s := startHTTPServer(t, "-fast", "-exit-after", "3")
	c := newHTTPClient(t, s.url)
	c.handshake() // 1 request
	c.request("ping", nil)
	c.request("ping", nil)
	select {
	case err := <-s.done:
		close(s.done)
		wantExit(t, err, 4)
	case <-time.After(testTimeout):
		t.Fatal("the server did not exit after 3 requests")
	}
}

// TestHTTPFull serves the full server over HTTP: tools, progress and the server's own
// requests on the GET stream, and cancellation when the client gives up.
func TestHTTPFull(t *testing.T) {
	s := startHTTPServer(t, "-name", "full", "-http-keepalive", "1h")
	c := newHTTPClient(t, s.url)
	c.handshake()
	m := c.request("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"a": 1}})
	var r toolResultWire
	if err := json.Unmarshal(m.Result, &r); err != nil || r.text(t) != `{"a":1}` {
		t.Errorf("echo: %s", m.raw)
	}
	if m := c.request("resources/read", map[string]any{"uri": "mis://static/full"}); !strings.Contains(string(m.Result), "static resource of full") {
		t.Errorf("resources/read: %s", m.raw)
	}
	// A pretty-printed body is still one message.
	if status, _, body := c.post("{\n \"jsonrpc\": \"2.0\",\n \"id\": 77,\n \"method\": \"ping\"\n}", nil); status != 200 || !strings.Contains(body, `"id":77,"result":{}`) {
		t.Errorf("multi-line body: %d %s", status, body)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, br := c.openGET(ctx)
	defer resp.Body.Close()
	waitFor(t, func() bool { return getStats(t, s.base).GetStreamsOpen == 1 })

	// Progress goes on the GET stream, the result in the POST's answer.
	m = c.request("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"ms": 30}, "_meta": map[string]any{"progressToken": "tok"}})
	if !strings.Contains(string(m.Result), "slept 30ms") {
		t.Errorf("slow: %s", m.raw)
	}
	for i := 1; i <= 3; i++ {
		ev := readEvent(t, br)
		if want := fmt.Sprintf(`"progress":%d,"total":3`, i); !strings.Contains(ev, want) || !strings.Contains(ev, "notifications/progress") {
			t.Errorf("event %d: %s, want progress %s", i, ev, want)
		}
	}

	// ping_client: the server's request arrives on the GET stream and is answered by POST.
	type answer struct {
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() { // not c.request: no t.Fatal off the test's goroutine
		req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{"jsonrpc":"2.0","id":1000,"method":"tools/call","params":{"name":"ping_client"}}`))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.session)
		resp, err := c.hc.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- answer{string(b), err}
	}()
	ev := readEvent(t, br)
	var ping struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal([]byte(ev), &ping); err != nil || ping.Method != "ping" {
		t.Fatalf("want the server's ping on the GET stream, got %s", ev)
	}
	if status, _, _ := c.post(`{"jsonrpc":"2.0","id":`+string(ping.ID)+`,"result":{}}`, nil); status != http.StatusAccepted {
		t.Errorf("POST of the ping response: %d", status)
	}
	select {
	case a := <-answered:
		if a.err != nil || !strings.Contains(a.body, "client answered ping") {
			t.Errorf("ping_client: %q %v", a.body, a.err)
		}
	case <-time.After(testTimeout):
		t.Fatal("ping_client did not finish")
	}

	// A client that gives up cancels its request.
	rctx, rcancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, s.url,
		strings.NewReader(`{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"slow","arguments":{"ms":60000}}}`))
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.session)
	go func() {
		time.Sleep(50 * time.Millisecond)
		rcancel()
	}()
	if resp, err := c.hc.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("the abandoned request was answered: %d", resp.StatusCode)
	}
	waitFor(t, func() bool { return strings.Contains(s.stderr.String(), `cancelled "long"`) })

	if code := c.delete(); code != http.StatusNoContent {
		t.Errorf("DELETE: %d", code)
	}
	if err := s.stop(t); err != nil {
		t.Errorf("run = %v", err)
	}
}

// readEvent returns the data of the next event of an SSE stream, skipping comments.
func readEvent(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var data string
	for {
		line, err := readLineTimeout(t, br)
		if err != nil {
			t.Fatalf("reading the event stream: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && data != "":
			return data
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHTTPGoSDK connects the official Go SDK client to both engines.
func TestHTTPGoSDK(t *testing.T) {
	for _, args := range [][]string{{"-fast"}, nil} {
		t.Run(fmt.Sprint(args), func(t *testing.T) {
			s := startHTTPServer(t, args...)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "sdk-test", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url}, nil)
			if err != nil {
				t.Fatalf("connect: %v\n%s", err, s.stderr)
			}
			res, err := cs.ListTools(ctx, nil)
			if err != nil || len(res.Tools) == 0 || res.Tools[0].Name != "echo" {
				t.Fatalf("list tools: %v %+v", err, res)
			}
			call, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": "y"}})
			if err != nil || call.IsError || len(call.Content) != 1 {
				t.Fatalf("call: %v %+v", err, call)
			}
			if err := cs.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			waitFor(t, func() bool { st := getStats(t, s.base); return st.SessionsActive == 0 && st.GetStreamsOpen == 0 })
			if st := getStats(t, s.base); st.SessionsOpened != 1 {
				t.Errorf("stats after the SDK session: %+v", st)
			}
		})
	}
}

// TestHTTPProcess runs the test binary in -http mode: SIGTERM ends it with status 0.
func TestHTTPProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	addrFile := filepath.Join(t.TempDir(), "addr")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-fast", "-http", "127.0.0.1:0", "-http-addr-file", addrFile)
	cmd.Env = append(os.Environ(), "MISBEHAVE_AS_SERVER=1")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var addr string
	waitFor(t, func() bool {
		b, err := os.ReadFile(addrFile)
		addr = strings.TrimSpace(string(b))
		return err == nil
	})
	c := newHTTPClient(t, "http://"+addr+mcpPath)
	c.handshake()
	ctxGet, cancelGet := context.WithCancel(context.Background())
	defer cancelGet()
	resp, _ := c.openGET(ctxGet) // an open stream must not hold up the exit
	defer resp.Body.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "serving Streamable HTTP on http://"+addr+"/mcp") {
		t.Errorf("stderr: %q", stderr.String())
	}
}
