package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Slow and stuck consumers, and floods: a client that stops reading is disconnected
// once max_client_buffer bytes wait for it, without stalling anyone else; a client that
// sends requests without waiting gets at most max_client_in_flight in flight.

// mcpHTTP is a minimal Streamable HTTP client of one session, for byte-level control.
type mcpHTTP struct {
	t   *testing.T
	url string
	sid string
	hc  *http.Client
}

// openMCP initializes a legacy session (2025-03-26: batches allowed).
func openMCP(t *testing.T, url string) *mcpHTTP {
	t.Helper()
	c := &mcpHTTP{t: t, url: url, hc: &http.Client{Timeout: 2 * time.Minute}}
	_, resp := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"e2e-consumers","version":"1"}}}`)
	if c.sid = resp.Header.Get("Mcp-Session-Id"); c.sid == "" {
		t.Fatal("initialize: no session id")
	}
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// post sends body and returns the messages of the answer (a JSON body or an event
// stream; a batch's array is flattened).
func (c *mcpHTTP) post(body string) ([]map[string]json.RawMessage, *http.Response) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("reading the answer: %v", err)
	}
	var payloads [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range bytes.Lines(b) {
			if d, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: ")); ok && len(d) > 0 {
				payloads = append(payloads, d)
			}
		}
	} else if len(bytes.TrimSpace(b)) > 0 {
		payloads = append(payloads, b)
	}
	var msgs []map[string]json.RawMessage
	for _, p := range payloads {
		p = bytes.TrimSpace(p)
		if p[0] == '[' {
			var arr []map[string]json.RawMessage
			if err := json.Unmarshal(p, &arr); err != nil {
				c.t.Fatalf("decoding %.200s: %v", p, err)
			}
			msgs = append(msgs, arr...)
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(p, &m); err != nil {
			c.t.Fatalf("decoding %.200s: %v", p, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, resp
}

// call makes one tools/call and returns its response.
func (c *mcpHTTP) call(id int, tool, args string) map[string]json.RawMessage {
	c.t.Helper()
	msgs, resp := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
	for _, m := range msgs {
		if string(m["id"]) == strconv.Itoa(id) {
			return m
		}
	}
	c.t.Fatalf("no response to %d (HTTP %d): %v", id, resp.StatusCode, msgs)
	return nil
}

// proxyRSSkB reads the proxy's resident memory.
func proxyRSSkB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// startHTTPProxyHCL starts the proxy with a listen block on a free port and extra HCL.
func startHTTPProxyHCL(t *testing.T, hcl string) (string, *syncBuffer, *exec.Cmd) {
	t.Helper()
	addr := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("listen \"http\" {\n  address = %q\n  path = \"/mcp\"\n}\n", addr)+hcl)
	stderr, cmd := startProxyAt(t, cfg, addr)
	return "http://" + addr + "/mcp", stderr, cmd
}

// TestStuckEventStream: a client opens its GET event stream and never reads it while an
// upstream floods notifications (broadcast to every session). The proxy queues at most
// max_client_buffer bytes for it, then ends its session with a log line; the upstream's
// reader is never blocked by it, so the other client's calls (the flood itself, then
// an echo) are answered; the proxy's memory grows by a bounded amount.
func TestStuckEventStream(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	url, stderr, cmd := startHTTPProxyHCL(t, fmt.Sprintf("proxy {\n  max_client_buffer = %d\n}\n", limit)+
		testUpstream("t", "t", []string{"-flood"}, ""))
	good := openMCP(t, url)
	good.call(1, "t__echo", `{"warm":1}`)
	stuck := openMCP(t, url)

	// The stuck client's GET stream, on a connection with a small receive buffer that
	// nobody reads.
	addr := strings.TrimPrefix(strings.TrimSuffix(url, "/mcp"), "http://")
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(nc, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-03-26\r\n\r\n", addr, stuck.sid)
	time.Sleep(200 * time.Millisecond) // let the stream attach (not an assertion: the flood below outlasts it)

	before := proxyRSSkB(t, cmd.Process.Pid)
	// 40 MB of notifications: far more than the cap and the socket buffers hold.
	res := good.call(2, "t__flood", `{"count":40000,"bytes":1000}`)
	if !strings.Contains(string(res["result"]), "sent 40000") {
		t.Fatalf("the flood call: %s\n%s", res["result"], stderr)
	}
	after := proxyRSSkB(t, cmd.Process.Pid)
	t.Logf("proxy RSS %d kB before the flood, %d kB after (+%d kB; max_client_buffer %d kB)", before, after, after-before, limit>>10)
	if grown := (after - before) << 10; grown > 16*limit+64<<20 {
		t.Errorf("the proxy grew by %d bytes with one stuck client capped at %d", grown, limit)
	}
	if res := good.call(3, "t__echo", `{"after":"flood"}`); !strings.Contains(string(res["result"]), "flood") {
		t.Errorf("echo after the flood: %v", res)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), "not reading its event stream"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stuck client was not disconnected:\n%s", stderr)
		}
	}
	// Its session is gone.
	_, resp := stuck.post(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the stuck client's session after the disconnect: HTTP %d", resp.StatusCode)
	}
}

// TestStuckStdout: a stdio client that never reads the proxy's stdout while an upstream
// floods notifications: the proxy disconnects it (ends, with an error and a log line)
// instead of growing, and stops its children.
func TestStuckStdout(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "proxy {\n  max_client_buffer = 1048576\n}\n"+testUpstream("t", "t", []string{"-flood"}, ""))
	cmd, stderr := proxyCmd(cfg)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, outW, err := os.Pipe() // never read
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout = outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	defer stdin.Close()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	send := func(line string) {
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stuck","version":"1"}}}`)
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(stderr.String(), "client initialized"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not initialized:\n%s", stderr)
		}
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__flood","arguments":{"count":40000,"bytes":1000}}}`)
	var children []int
	select {
	case err := <-waited:
		if err == nil {
			t.Errorf("the proxy exited cleanly after disconnecting a stuck client")
		}
	case <-time.After(60 * time.Second):
		children = childPIDs(cmd.Process.Pid)
		cmd.Process.Kill()
		t.Fatalf("the proxy still runs with a client that reads nothing\n%s", stderr)
	}
	if !strings.Contains(stderr.String(), "not reading its stdout") {
		t.Errorf("no log line about the stuck client:\n%s", stderr)
	}
	checkStderr(t, stderr)
	assertGone(t, children)
}

// TestFloodInFlightCap: one client sends 10,000 requests at once (a batch) while
// another makes calls one at a time: the flooding session gets at most
// max_client_in_flight of them in flight and the rest refused with -31006, every one
// answered exactly once under its own id; the other client's calls all succeed (their
// latency before and during the flood is logged, not asserted: timing is the load
// tool's to report).
func TestFloodInFlightCap(t *testing.T) {
	t.Parallel()
	url, stderr, _ := startHTTPProxyHCL(t, "proxy {\n  max_client_in_flight = 64\n}\n"+testUpstream("t", "t", nil, ""))
	flooder, other := openMCP(t, url), openMCP(t, url)
	latencies := func(from, n int) []time.Duration {
		var ds []time.Duration
		for i := range n {
			t0 := time.Now()
			res := other.call(from+i, "t__echo", `{"x":1}`)
			ds = append(ds, time.Since(t0))
			if _, ok := res["result"]; !ok {
				t.Errorf("the other client's call %d: %v", from+i, res)
			}
		}
		slices.Sort(ds)
		return ds
	}
	base := latencies(1, 200)

	const n = 10000
	var batch strings.Builder
	batch.WriteByte('[')
	for i := 1; i <= n; i++ {
		if i > 1 {
			batch.WriteByte(',')
		}
		fmt.Fprintf(&batch, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t__slow","arguments":{"ms":20}}}`, i)
	}
	batch.WriteByte(']')
	type floodResult struct {
		msgs []map[string]json.RawMessage
	}
	done := make(chan floodResult, 1)
	go func() {
		msgs, _ := flooder.post(batch.String())
		done <- floodResult{msgs}
	}()
	during := latencies(1000, 200)
	fr := <-done

	seen := map[string]int{}
	refused, results := 0, 0
	for _, m := range fr.msgs {
		seen[string(m["id"])]++
		switch {
		case m["result"] != nil:
			results++
		case strings.Contains(string(m["error"]), "-31006") && strings.Contains(string(m["error"]), "max_client_in_flight"):
			refused++
		default:
			t.Errorf("unexpected answer: %v", m)
		}
	}
	for i := 1; i <= n; i++ {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Fatalf("request %d answered %d times (%d answers in all)\n%s", i, c, len(fr.msgs), stderr)
		}
	}
	if len(fr.msgs) != n || refused == 0 || results == 0 {
		t.Errorf("%d answers: %d results, %d refused", len(fr.msgs), results, refused)
	}
	t.Logf("flood of %d: %d served, %d refused (-31006); the other client's echo p50 %v before, %v during (%.2fx)",
		n, results, refused, base[len(base)/2], during[len(during)/2], float64(during[len(during)/2])/float64(base[len(base)/2]))
}
