package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// An upstream that records what it receives, for the cancellation tests: an MCP server
// of one era (legacy 2025-11-25 or modern 2026-07-28) over Streamable HTTP, served by the
// test process itself, or over stdio, served by the test binary re-executed as the
// proxy's child (E2E_RECORDER=<era>,<addr>: it copies every line it reads to addr).
// Its tools: echo answers at once; hang answers only when cancelled (over HTTP, the
// recorder also reports when a hang call's POST ended: its connection was closed).

func init() {
	if spec := os.Getenv("E2E_RECORDER"); spec != "" {
		era, addr, _ := strings.Cut(spec, ",")
		os.Exit(stdioRecorder(era, addr))
	}
}

// recSeen is one thing a recorder saw: a message (method, params, raw id), or the end
// of a hang call's POST (ended: the call's raw id).
type recSeen struct {
	method string
	id     string
	params json.RawMessage
	ended  string
}

// rpcIn is the part of a message the recorder reads.
type rpcIn struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// recorderAnswer is the result the recorder of era gives m ("" for none: a
// notification, or a call that hangs).
func recorderAnswer(era string, m rpcIn) string {
	modern := era == "modern"
	complete := ""
	if modern {
		complete = `"resultType":"complete",`
	}
	cacheable := complete
	if modern {
		cacheable += `"ttlMs":0,"cacheScope":"private",`
	}
	switch m.Method {
	case "server/discover":
		if !modern {
			return "" // answered with an error by the caller
		}
		return `{` + cacheable + `"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},` +
			`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"recorder","version":"1"}}}`
	case "initialize":
		return `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"recorder","version":"1"}}`
	case "ping":
		return `{}`
	case "tools/list":
		return `{` + cacheable + `"tools":[` +
			`{"name":"echo","description":"answers at once","inputSchema":{"type":"object"}},` +
			`{"name":"hang","description":"answers only when cancelled","inputSchema":{"type":"object"}}]}`
	case "tools/call":
		var p struct{ Name string }
		_ = json.Unmarshal(m.Params, &p)
		if p.Name == "hang" {
			return ""
		}
		return `{` + complete + `"content":[{"type":"text","text":"echo"}]}`
	}
	return `{` + complete + `}`
}

// isHang reports whether m is a call of the hang tool.
func isHang(m rpcIn) bool {
	var p struct{ Name string }
	_ = json.Unmarshal(m.Params, &p)
	return m.Method == "tools/call" && p.Name == "hang"
}

// stdioRecorder serves the recorder of era on stdin/stdout, copying each line it reads
// to addr first.
func stdioRecorder(era, addr string) int {
	report, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "recorder:", err)
		return 1
	}
	defer report.Close()
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return 0
		}
		if _, err := report.Write(line); err != nil {
			return 1
		}
		var m rpcIn
		if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 || m.Method == "" {
			continue
		}
		if era == "legacy" && m.Method == "server/discover" {
			fmt.Printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}\n", m.ID)
			continue
		}
		if result := recorderAnswer(era, m); result != "" {
			fmt.Printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n", m.ID, result)
		}
	}
}

// recorder collects what one upstream received.
type recorder struct {
	t   *testing.T
	era string
	got chan recSeen

	mu        sync.Mutex
	cancelled map[string]chan struct{} // raw request id → closed by its notifications/cancelled
}

func newRecorder(t *testing.T, era string) *recorder {
	return &recorder{t: t, era: era, got: make(chan recSeen, 1024), cancelled: map[string]chan struct{}{}}
}

// cancelledCh is closed when a notifications/cancelled for id arrives.
func (rec *recorder) cancelledCh(id string) chan struct{} {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	ch := rec.cancelled[id]
	if ch == nil {
		ch = make(chan struct{})
		rec.cancelled[id] = ch
	}
	return ch
}

// saw records m, and notes the cancellation it carries.
func (rec *recorder) saw(m rpcIn) {
	rec.got <- recSeen{method: m.Method, id: string(m.ID), params: m.Params}
	if m.Method == "notifications/cancelled" {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			ch := rec.cancelledCh(string(p.RequestID))
			rec.mu.Lock()
			select {
			case <-ch:
			default:
				close(ch)
			}
			rec.mu.Unlock()
		}
	}
}

// serveHTTP serves the recorder over Streamable HTTP on a loopback port; it returns
// the URL.
func (rec *recorder) serveHTTP() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rec.t.Fatal(err)
	}
	srv := &http.Server{Handler: rec}
	go srv.Serve(l)
	rec.t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String() + "/mcp"
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	var m rpcIn
	if err != nil || json.Unmarshal(body, &m) != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	rec.saw(m)
	if len(m.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if rec.era == "legacy" {
		w.Header().Set("Mcp-Session-Id", "recorder-session")
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case m.Method == "subscriptions/listen":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":%s}}}\n\n", m.ID)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case isHang(m):
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // the head: the call is under way
		select {
		case <-r.Context().Done():
			rec.got <- recSeen{ended: string(m.ID)}
		case <-rec.cancelledCh(string(m.ID)):
			fmt.Fprintf(w, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32603,\"message\":\"cancelled\"}}", m.ID)
		}
	case rec.era == "legacy" && m.Method == "server/discover":
		fmt.Fprintf(w, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}", m.ID)
	default:
		fmt.Fprintf(w, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}", m.ID, recorderAnswer(rec.era, m))
	}
}

// listenStdio listens for the reports of a stdio recorder child; it returns the
// address to give the child.
func (rec *recorder) listenStdio() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rec.t.Fatal(err)
	}
	rec.t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				in := bufio.NewReader(c)
				for {
					line, err := in.ReadBytes('\n')
					if err != nil {
						return
					}
					var m rpcIn
					if json.Unmarshal(line, &m) == nil {
						rec.saw(m)
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// next returns the next thing the recorder saw.
func (rec *recorder) next() recSeen {
	rec.t.Helper()
	select {
	case r := <-rec.got:
		return r
	case <-time.After(60 * time.Second):
		rec.t.Fatal("the upstream received nothing more")
	}
	return recSeen{}
}

// TestCancelPerEraAndTransport: a client's cancellation of a call reaches the upstream
// the way the upstream's era and transport define it. A 2026-07-28 upstream over HTTP
// has the call's POST closed (it sees its request end) and is sent no
// notifications/cancelled (that era has none on HTTP); a legacy upstream over HTTP, and
// an upstream of either era over stdio, get notifications/cancelled naming the call's
// own id (no era requires _meta on a notification).
func TestCancelPerEraAndTransport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		era, transport string
	}{
		{"modern", "http"},
		{"legacy", "http"},
		{"modern", "stdio"},
		{"legacy", "stdio"},
	} {
		t.Run(tc.era+"-"+tc.transport, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, tc.era)
			var block string
			if tc.transport == "http" {
				block = fmt.Sprintf("  url = %q\n", rec.serveHTTP())
			} else {
				block = fmt.Sprintf("  command = [%s]\n  env = { E2E_RECORDER = %q }\n", q(os.Args[0]), tc.era+","+rec.listenStdio())
			}
			cfg := writeConfig(t, fmt.Sprintf("upstream \"r\" {\n%s  namespace = \"r\"\n  protocol = %q\n}\n", block, tc.era))
			rc := startRaw(t, cfg)
			// The client speaks the upstream's era (the proxy bridges either way).
			meta := ""
			if tc.era == "modern" {
				meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
			} else {
				rc.initialize()
			}
			call := func(id int, tool string) {
				rc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"r__%s","arguments":{}%s}}`, id, tool, meta))
			}

			call(1, "hang")
			var hang recSeen
			for hang.method != "tools/call" {
				hang = rec.next()
			}
			if tc.era == "modern" && !strings.Contains(string(hang.params), "io.modelcontextprotocol/protocolVersion") {
				t.Errorf("the modern call carries no protocol version: %s", hang.params)
			}
			// The proxy handles a client's lines in order: whatever it sends the upstream
			// for the cancellation leaves before the next call does.
			rc.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"test"}}`)
			call(2, "echo")
			var notified, ended bool
			for {
				r := rec.next()
				if r.ended == hang.id {
					ended = true
				}
				if r.method == "notifications/cancelled" {
					var p struct {
						RequestID json.RawMessage `json:"requestId"`
					}
					_ = json.Unmarshal(r.params, &p)
					if string(p.RequestID) != hang.id {
						t.Errorf("cancelled %s, want the call's id %s", p.RequestID, hang.id)
					}
					notified = true
				}
				if r.method == "tools/call" {
					break
				}
			}
			for { // the echo's answer (the cancelled call may get none, or an error)
				var m map[string]json.RawMessage
				if err := json.Unmarshal(rc.next(60*time.Second), &m); err != nil {
					t.Fatal(err)
				}
				if string(m["id"]) == "2" {
					if _, ok := m["result"]; !ok {
						t.Errorf("the call after the cancellation: %s", m["error"])
					}
					break
				}
			}
			if tc.era == "modern" && tc.transport == "http" {
				if notified {
					t.Errorf("a modern HTTP upstream was sent notifications/cancelled")
				}
				for !ended { // the POST was closed: the upstream's request ends
					if r := rec.next(); r.ended == hang.id {
						ended = true
					}
				}
				return
			}
			if !notified {
				t.Errorf("a %s %s upstream was not sent notifications/cancelled", tc.era, tc.transport)
			}
		})
	}
}

// TestCancelByClosingTheStream: a 2026-07-28 client over HTTP cancels a call by closing
// its request; the proxy passes the cancellation on as the upstream's era and transport
// define it, as for a stdio client (TestCancelPerEraAndTransport).
func TestCancelByClosingTheStream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ era, transport string }{
		{"modern", "http"},
		{"legacy", "http"},
		{"modern", "stdio"},
	} {
		t.Run(tc.era+"-"+tc.transport, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, tc.era)
			var block string
			var srv *http.Server
			if tc.transport == "http" {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				srv = &http.Server{Handler: rec}
				go srv.Serve(l)
				t.Cleanup(func() { srv.Close() })
				block = fmt.Sprintf("  url = %q\n", "http://"+l.Addr().String()+"/mcp")
			} else {
				block = fmt.Sprintf("  command = [%s]\n  env = { E2E_RECORDER = %q }\n", q(os.Args[0]), tc.era+","+rec.listenStdio())
			}
			url, _, cmd := startHTTPProxyCmd(t, fmt.Sprintf("upstream \"r\" {\n%s  namespace = \"r\"\n  protocol = %q\n}\n", block, tc.era))
			const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
			ctx, cancel := context.WithCancel(ctxT(t, 60*time.Second))
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url,
				strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"r__hang","arguments":{},`+meta+`}}`))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
				"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "r__hang"} {
				req.Header.Set(k, v)
			}
			go func() {
				if resp, err := http.DefaultClient.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
			var hang recSeen
			for hang.method != "tools/call" {
				hang = rec.next()
			}
			cancel() // the client closes its request: the cancellation

			if tc.era == "modern" && tc.transport == "http" {
				for r := rec.next(); r.ended != hang.id; r = rec.next() {
					if r.method == "notifications/cancelled" {
						t.Errorf("a modern HTTP upstream was sent notifications/cancelled")
					}
				}
				// Whatever the proxy would send for the cancellation has been received once
				// it has exited and the upstream has finished every request it took.
				cmd.Process.Signal(interruptSignal())
				cmd.Wait()
				sctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
				defer stop()
				srv.Shutdown(sctx)
				for len(rec.got) > 0 {
					if r := <-rec.got; r.method == "notifications/cancelled" {
						t.Errorf("a modern HTTP upstream was sent notifications/cancelled")
					}
				}
				return
			}
			for {
				r := rec.next()
				if r.method != "notifications/cancelled" {
					continue
				}
				var p struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				_ = json.Unmarshal(r.params, &p)
				if string(p.RequestID) != hang.id {
					t.Errorf("cancelled %s, want the call's id %s", p.RequestID, hang.id)
				}
				return
			}
		})
	}
}
