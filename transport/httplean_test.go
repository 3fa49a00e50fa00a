package transport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// seenPost is what a test server read of one POST.
type seenPost struct {
	target, host string
	header       http.Header
	body         string
}

// recordingServer answers every POST with a JSON response to its id (202 for a
// notification) carrying Mcp-Session-Id, refuses GET (no stream), and records what it
// read. hold, when not nil, is waited on before answering (closed by the test).
func recordingServer(t *testing.T, hold chan struct{}) (url string, seen chan seenPost) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seen = make(chan seenPost, 64)
	var wg sync.WaitGroup
	var mu sync.Mutex // guards conns
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body, _ := io.ReadAll(req.Body)
					if req.Method != http.MethodPost {
						io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
						continue
					}
					seen <- seenPost{target: req.RequestURI, host: req.Host, header: req.Header, body: string(body)}
					if hold != nil {
						<-hold
					}
					m, err := jsonrpc.Decode(body)
					if err != nil || !m.IsRequest() {
						io.WriteString(c, "HTTP/1.1 202 Accepted\r\nMcp-Session-Id: sess-1\r\nContent-Length: 0\r\n\r\n")
						continue
					}
					answer := `{"jsonrpc":"2.0","id":` + m.ID.Raw() + `,"result":{}}`
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: sess-1\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer)
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String() + "/mcp?x=1", seen
}

// TestLeanPostSendsWhatNetHTTPWould: a link's lean POSTs reach the server with the same
// request line, Host, fields and body as the same messages sent the net/http-shaped way
// (the path a link takes without the lean client): the link's own headers (replacing
// the defaults they name), session, version, Mcp-Method, Mcp-Name (plain, escaped,
// base64-encoded), the trace context, and none of it for a notification.
func TestLeanPostSendsWhatNetHTTPWould(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	url, seen := recordingServer(t, nil)
	spec := HTTPSpec{URL: url, Headers: map[string]string{"x-api-key": "k", "accept": "application/json, text/event-stream, */*", "User-Agent": "mine"}}
	msgs := []*jsonrpc.Message{
		jsonrpc.NewRequest(jsonrpc.IntID(1), "initialize", json.RawMessage(`{"protocolVersion":"2025-06-18"}`)),
		jsonrpc.NewNotification("notifications/initialized", nil),
		jsonrpc.NewRequest(jsonrpc.IntID(2), "tools/call", json.RawMessage(`{"name":"echo","arguments":{},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":" a=b "}}`)),
		jsonrpc.NewRequest(jsonrpc.IntID(3), "tools/call", json.RawMessage(`{"name":"h\u00e9llo"}`)),
		jsonrpc.NewRequest(jsonrpc.IntID(4), "prompts/get", json.RawMessage(`{"name":"a\"b"}`)),
		jsonrpc.NewRequest(jsonrpc.IntID(5), "resources/read", json.RawMessage(`{"uri":"file:///x y"}`)),
		jsonrpc.NewRequest(jsonrpc.IntID(6), "tools/call", json.RawMessage(`{"name":" padded"}`)),
		jsonrpc.NewRequest(jsonrpc.IntID(7), "tools/list", nil),
	}
	var got [2][]seenPost
	for i, lean := range []bool{true, false} {
		l := DialHTTP(spec)
		if l.lean == nil {
			t.Fatal("the link to a plain-http upstream has no lean path")
		}
		if !lean {
			l.lean = nil // the net/http-shaped path
		}
		answers := make(chan []byte, len(msgs))
		for j, m := range msgs {
			if j == 1 {
				l.SetProtocolVersion("2025-06-18")
			}
			if err := l.ExchangeInline(m, nil, func(line []byte) { answers <- line }, nil); err != nil {
				t.Fatal(err)
			}
			got[i] = append(got[i], <-seen)
			if m.IsRequest() {
				if a := <-answers; !strings.Contains(string(a), `"id":`+m.ID.Raw()) {
					t.Errorf("lean %v: answer %s to %s", lean, a, m.Method)
				}
			}
		}
		l.Stop(time.Second)
	}
	for j := range msgs {
		a, b := got[0][j], got[1][j]
		if a.target != b.target || a.host != b.host || a.body != b.body || !maps.EqualFunc(a.header, b.header, slices.Equal) {
			t.Errorf("%s: lean\n  %s %s %v %s\nnet/http-shaped\n  %s %s %v %s", msgs[j].Method, a.target, a.host, a.header, a.body, b.target, b.host, b.header, b.body)
		}
	}
	if h := got[0][2].header; h.Get("Mcp-Session-Id") != "sess-1" || h.Get("Mcp-Name") != "echo" || h.Get("Tracestate") != "a=b" || h.Get("X-Api-Key") != "k" {
		t.Errorf("the fields of a call: %v", h)
	}
}

// TestLeanPostAbortAndStop: an exchange's abort ends its POST while the server holds the
// answer, and the request is reported failed; Stop ends a POST in flight and the link's
// goroutines, reporting nothing (the link is closed).
func TestLeanPostAbortAndStop(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	hold := make(chan struct{})
	url, seen := recordingServer(t, hold)
	defer close(hold)
	l := DialHTTP(HTTPSpec{URL: url})
	var mu sync.Mutex // guards failed
	var failed []error
	l.OnRequestFailure(func(id jsonrpc.ID, err error) {
		mu.Lock()
		failed = append(failed, err)
		mu.Unlock()
	})
	var abort func()
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.ExchangeInline(jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/call", json.RawMessage(`{"name":"slow"}`)), nil,
			func([]byte) { t.Error("an aborted exchange was answered") }, func(a func()) { abort = a })
	}()
	<-seen // the server has the request and holds its answer
	abort()
	<-done
	mu.Lock()
	if len(failed) != 1 || !strings.Contains(failed[0].Error(), "aborted") {
		t.Errorf("failures %v, want the aborted request's", failed)
	}
	mu.Unlock()

	if err := l.Exchange(jsonrpc.NewRequest(jsonrpc.IntID(2), "tools/call", json.RawMessage(`{"name":"slow"}`)), nil,
		func([]byte) { t.Error("a stopped exchange was answered") }, nil); err != nil {
		t.Fatal(err)
	}
	<-seen
	stopped := make(chan error, 1)
	go func() { stopped <- l.Stop(time.Second) }()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) != 1 {
		t.Errorf("failures after Stop %v, want none more", failed[1:])
	}
	if err := l.Exchange(jsonrpc.NewRequest(jsonrpc.IntID(3), "ping", nil), nil, nil, nil); err == nil {
		t.Errorf("an exchange after Stop: %v", err)
	}
}
