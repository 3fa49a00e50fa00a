package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// startHTTPTestserver runs the test server serving Streamable HTTP on a loopback port
// and returns its endpoint; the process ends with the test.
func startHTTPTestserver(t *testing.T) string {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	cmd := exec.Command(testserverBin, "-http", "127.0.0.1:0", "-http-addr-file", addrFile)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the test server: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	for deadline := time.Now().Add(waitFor); ; {
		if b, err := os.ReadFile(addrFile); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return "http://" + strings.TrimSpace(string(b)) + "/mcp"
		}
		select {
		case <-exited:
			t.Fatal("the test server exited before listening")
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the test server did not listen")
		}
	}
}

// dialStdioHTTP serves a stdio session of a proxy whose one upstream, "h", is the
// Streamable HTTP server at url, and initializes it.
func dialStdioHTTP(t *testing.T, url string) *stdioClient {
	t.Helper()
	log := testLog(t)
	r := router.New(router.Options{}, log)
	r.Add(upstream.New(upstream.Spec{Name: "h", URL: url, Timeout: 30 * time.Second, StopGrace: time.Second}, log, r.Events()), "h")
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("router close: %v", err)
		}
	})
	c := dialStdio(t, New(r, Options{Name: "test"}, log))
	if m := c.initialize("2025-11-25", `{}`); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// collect reads messages until pred has seen the one it wants, and returns them all.
func (c *stdioClient) collect(pred func(wireMsg) bool) []wireMsg {
	c.t.Helper()
	var got []wireMsg
	for {
		m := c.next()
		got = append(got, m)
		if pred(m) {
			return got
		}
	}
}

func isAnswer(id string) func(wireMsg) bool {
	return func(m wireMsg) bool { return m.Method == "" && string(m.ID) == id }
}

// TestStdioHTTPSlowCallBlocksNoOne: a call to an HTTP upstream runs its exchange on the
// goroutine that read it, so the reading must have moved on: while one call waits for
// the upstream, the session's other calls (and pings) are read and answered. The waiting
// call, cancelled by the client meanwhile, gets no answer, its exchange ends, and the
// session goes on serving.
func TestStdioHTTPSlowCallBlocksNoOne(t *testing.T) {
	noLeaks(t)
	c := dialStdioHTTP(t, startHTTPTestserver(t))
	c.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"h__slow","arguments":{"ms":600000}}}`)
	for i := range 3 {
		id := fmt.Sprint(i + 1)
		m := c.call(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"h__echo","arguments":{"i":` + id + `}}}`)
		if m.Error != nil || !strings.Contains(string(m.Result), fmt.Sprintf(`"i":%d`, i+1)) {
			t.Fatalf("call %s while another waits: %+v %s", id, m.Error, m.Result)
		}
	}
	c.sync()
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow"}}`)
	m := c.call(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"h__echo","arguments":{}}}`)
	if m.Error != nil {
		t.Fatalf("call after the cancellation: %+v", m.Error)
	}
	c.close()
	for l := range c.lines {
		t.Errorf("after the last answer: %s", l) // the cancelled call must get none
	}
}

// answerStreamServer is a Streamable HTTP server (no session, no GET stream) with two
// tools: echo answers its arguments as JSON; prog answers on an event stream, progress
// 1, 2 and 3 of 3 (when the call has a token), each flushed on its own, then the result.
func answerStreamServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Decode(body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if !m.IsRequest() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		answer := func(res string) []byte {
			b, _ := jsonrpc.NewResult(m.ID, json.RawMessage(res)).Encode()
			return b
		}
		var out []byte
		switch m.Method {
		case "initialize":
			out = answer(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"as","version":"1"}}`)
		case "tools/list":
			out = answer(`{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"prog","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			var p struct {
				Name string          `json:"name"`
				Args json.RawMessage `json:"arguments"`
				Meta struct {
					Token json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if p.Name == "prog" {
				w.Header().Set("Content-Type", "text/event-stream")
				for i := 1; i <= 3 && p.Meta.Token != nil; i++ {
					fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%s,\"progress\":%d,\"total\":3}}\n\n", p.Meta.Token, i)
					w.(http.Flusher).Flush()
				}
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", answer(`{"content":[]}`))
				return
			}
			if len(p.Args) == 0 {
				p.Args = json.RawMessage(`{}`)
			}
			out = answer(`{"content":[],"structuredContent":` + string(p.Args) + `}`)
		default:
			out, _ = jsonrpc.NewErrorResponse(m.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "no %s", m.Method)).Encode()
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestStdioHTTPOrder: what a call's own answer stream carries reaches the client in
// order before its response (progress 1, 2, 3, then the result), however the answer is
// written (by the goroutine that has it, or queued behind another write); and a burst
// of calls gets exactly one answer each.
func TestStdioHTTPOrder(t *testing.T) {
	noLeaks(t)
	c := dialStdioHTTP(t, answerStreamServer(t))
	for round := range 3 {
		id := fmt.Sprintf(`"p%d"`, round)
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"h__prog","arguments":{},"_meta":{"progressToken":"tok"}}}`)
		var progress []string
		for _, m := range c.collect(isAnswer(id)) {
			switch {
			case m.Method == "notifications/progress":
				var p struct {
					Token    string `json:"progressToken"`
					Progress int    `json:"progress"`
				}
				if err := json.Unmarshal(m.Params, &p); err != nil || p.Token != "tok" {
					t.Errorf("progress %s", m.Params)
				}
				progress = append(progress, fmt.Sprint(p.Progress))
			case m.Method != "":
				t.Errorf("unexpected %s", m.Method)
			case m.Error != nil:
				t.Fatalf("%s: %+v", id, m.Error)
			}
		}
		if strings.Join(progress, ",") != "1,2,3" {
			t.Errorf("%s: progress %v before the response, want 1,2,3", id, progress)
		}
	}

	const n = 64
	var burst strings.Builder
	for i := range n {
		fmt.Fprintf(&burst, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"h__echo","arguments":{"i":%d}}}`+"\n", i, i)
	}
	c.send(strings.TrimSuffix(burst.String(), "\n"))
	seen := map[string]int{}
	for range n {
		m := c.next()
		if m.Error != nil {
			t.Fatalf("burst call %s: %+v", m.ID, m.Error)
		}
		var want struct {
			StructuredContent struct{ I json.Number } `json:"structuredContent"`
		}
		if err := json.Unmarshal(m.Result, &want); err != nil || want.StructuredContent.I.String() != string(m.ID) {
			t.Errorf("answer %s carries %s", m.ID, m.Result)
		}
		seen[string(m.ID)]++
	}
	for i := range n {
		if seen[fmt.Sprint(i)] != 1 {
			t.Errorf("call %d answered %d times", i, seen[fmt.Sprint(i)])
		}
	}
	c.sync()
}
