package h1client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
)

// countingServer is an httptest server that counts the TCP connections it accepts.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func newTransport(t *testing.T) *Transport {
	tr := &Transport{Fallback: &http.Transport{}}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func post(t *testing.T, tr *Transport, url, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp, b
}

// TestRoundTripShapes: JSON with a length, a chunked event stream, an empty 202, a 204,
// a close-delimited body and a head net/http must read (HTTP/1.0) all arrive whole, with
// the request's method, target, fields and body as sent; connections are reused where
// the framing allows.
func TestRoundTripShapes(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Mcp-Session-Id", "s-1")
		w.Header().Set("Echo-Header", r.Header.Get("X-Test"))
		switch r.URL.Query().Get("shape") {
		case "sse":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: %d %s\n\n", i, b)
				w.(http.Flusher).Flush()
			}
		case "accepted":
			w.WriteHeader(http.StatusAccepted)
		case "nocontent":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"method":%q,"path":%q,"body":%q}`, r.Method, r.URL.Path, b)
		}
	})
	tr := newTransport(t)
	resp, b := post(t, tr, srv.URL+"/mcp", `{"x":1}`, map[string]string{"X-Test": "v"})
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") != "s-1" || resp.Header.Get("Echo-Header") != "v" ||
		string(b) != `{"method":"POST","path":"/mcp","body":"{\"x\":1}"}` || resp.ContentLength != int64(len(b)) {
		t.Fatalf("json: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	resp, b = post(t, tr, srv.URL+"/mcp?shape=sse", `q`, nil)
	if string(b) != "data: 0 q\n\ndata: 1 q\n\ndata: 2 q\n\n" || resp.ContentLength != -1 {
		t.Fatalf("sse: %q %d", b, resp.ContentLength)
	}
	for _, shape := range []string{"accepted", "nocontent"} {
		resp, b = post(t, tr, srv.URL+"/mcp?shape="+shape, `{}`, nil)
		if resp.StatusCode/100 != 2 || len(b) != 0 {
			t.Fatalf("%s: %d %q", shape, resp.StatusCode, b)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for four sequential requests, want 1", n)
	}
	if st := tr.Stats(); st.Dials != 1 || st.Reuses != 3 {
		t.Errorf("stats %+v", st)
	}
}

// rawServer accepts connections and hands each to serve.
func rawServer(t *testing.T, serve func(c net.Conn)) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	accepted = new(atomic.Int64)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String(), accepted
}

// readRequest reads one request's head and body off c.
func readRequest(br *bufio.Reader) (*http.Request, []byte, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(req.Body)
	return req, b, err
}

// TestClosedAfterReceivingIsNotRetried: a server that reads a POST and closes the
// connection without answering may have acted on it, so the request fails and is not
// sent again, whether the connection was new or reused.
func TestClosedAfterReceivingIsNotRetried(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	var received atomic.Int64
	addr, _ := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for n := 0; ; n++ {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			received.Add(1)
			if n == 1 { // the second request on this connection: read, then hang up
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	tr := newTransport(t)
	post(t, tr, "http://"+addr+"/", "one", nil)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader("two"))
	_, err := tr.RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "not sent again") {
		t.Fatalf("err %v, want a failure saying it was not retried", err)
	}
	if n := received.Load(); n != 2 {
		t.Errorf("the server received %d requests, want 2 (no resend)", n)
	}
}

// TestStalePooledConnectionIsNotUsed: a pooled connection the server has closed while it
// was idle is dropped before it carries a request (the request goes on a new
// connection, sent once).
func TestStalePooledConnectionIsNotUsed(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	var received atomic.Int64
	first := make(chan struct{})
	var once sync.Once
	addr, accepted := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			received.Add(1)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			closeNow := false
			once.Do(func() { closeNow = true })
			if closeNow {
				close(first)
				return // an idle timeout: close after answering, without saying so
			}
		}
	})
	tr := newTransport(t)
	post(t, tr, "http://"+addr+"/", "one", nil)
	<-first
	time.Sleep(2 * probeIdle) // the server's FIN arrives, and the connection is old enough to be checked
	_, b := post(t, tr, "http://"+addr+"/", "two", nil)
	if string(b) != "ok" || received.Load() != 2 || accepted.Load() != 2 {
		t.Errorf("answer %q, received %d, accepted %d", b, received.Load(), accepted.Load())
	}
}

// TestResetBeforeWriteIsRetried: when the server has reset a pooled connection, the
// write fails with nothing sent, and the request goes on a new connection.
func TestResetBeforeWriteIsRetried(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	var received atomic.Int64
	addr, accepted := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, _, err := readRequest(br); err != nil {
			return
		}
		received.Add(1)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		if accepted := c.(*net.TCPConn); accepted != nil && received.Load() == 1 {
			accepted.SetLinger(0) // close with RST
		}
	})
	tr := newTransport(t)
	post(t, tr, "http://"+addr+"/", "one", nil)
	// Defeat the idle probe so the write meets the reset: mark the connection fresh.
	time.Sleep(50 * time.Millisecond)
	tr.mu.Lock()
	for _, s := range tr.idle {
		for _, c := range s {
			c.since = time.Now()
		}
	}
	tr.mu.Unlock()
	_, b := post(t, tr, "http://"+addr+"/", "two", nil)
	if string(b) != "ok" || received.Load() != 2 || accepted.Load() != 2 {
		t.Errorf("answer %q, received %d, accepted %d", b, received.Load(), accepted.Load())
	}
}

// TestCancelWhileWaiting: cancelling the request's context ends a wait for the answer at
// once, with the context's error, and the connection is not pooled.
func TestCancelWhileWaiting(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	release := make(chan struct{})
	addr, _ := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, _, err := readRequest(br); err != nil {
			return
		}
		<-release
	})
	defer close(release)
	tr := newTransport(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", strings.NewReader("x"))
	errc := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(req)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	tr.mu.Lock()
	n := len(tr.idle)
	tr.mu.Unlock()
	if n != 0 {
		t.Errorf("%d pooled hosts after a cancelled request", n)
	}
}

// TestCancelMidBody: cancelling while the body of an event stream is being read ends
// the read with an error.
func TestCancelMidBody(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	tr := newTransport(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); line != "data: 1\n" {
		t.Fatalf("first line %q", line)
	}
	cancel()
	if _, err := io.ReadAll(br); err == nil {
		t.Fatal("the body read on after cancellation")
	}
}

// TestFallbackHeads: answers the fast path leaves to net/http (HTTP/1.0, a 100 Continue
// before the answer, a trailer) are read correctly, and the connection is reused when
// their framing allows.
func TestFallbackHeads(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	answers := []string{
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTrailer: X-T\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\no\r\n1\r\nk\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
	}
	addr, accepted := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, _, err := readRequest(br)
			if err != nil {
				return
			}
			var i int
			fmt.Sscanf(req.URL.Path, "/%d", &i)
			io.WriteString(c, answers[i])
		}
	})
	tr := newTransport(t)
	for i := range answers {
		resp, b := post(t, tr, fmt.Sprintf("http://%s/%d", addr, i), "x", nil)
		if resp.StatusCode != 200 || string(b) != "ok" {
			t.Errorf("answer %d: %d %q", i, resp.StatusCode, b)
		}
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("%d connections; the HTTP/1.0 answer is last, so all should share one", n)
	}
}

// TestBadRequestFields: a field value with a line break is refused before anything is
// sent (as net/http refuses it), never written into the head.
func TestBadRequestFields(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	addr, accepted := rawServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	tr := newTransport(t)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader("x"))
	req.Header["X-Bad"] = []string{"a\r\nInjected: yes"}
	if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "invalid header") {
		t.Fatalf("err %v", err)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections opened for a request refused before sending", n)
	}
}

// TestConcurrentReuse: many concurrent requests share a pool of connections: the
// connections opened are at most the concurrency, however many requests are made.
func TestConcurrentReuse(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	tr := newTransport(t)
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				body := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
				req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader([]byte(body)))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != body {
					t.Errorf("%q %v, want %q", b, err, body)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := conns.Load(); n > workers {
		t.Errorf("%d connections for %d workers", n, workers)
	}
}

// TestHTTPSGoesToFallback: what is not plain http is the fallback's.
func TestHTTPSGoesToFallback(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls") }))
	defer srv.Close()
	tr := &Transport{Fallback: srv.Client().Transport}
	defer tr.CloseIdleConnections()
	resp, b := post(t, tr, srv.URL, "x", nil)
	if resp.TLS == nil || string(b) != "tls" || tr.Stats().Dials != 0 {
		t.Errorf("%q tls=%v dials=%d", b, resp.TLS != nil, tr.Stats().Dials)
	}
}

// TestHugeHeadRefused: a response head larger than the read buffer fails the request
// instead of growing without bound (net/http's reader has no limit of its own), also when
// its lines end in bare LFs.
func TestHugeHeadRefused(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	for _, eol := range []string{"\r\n", "\n"} {
		addr, _ := rawServer(t, func(c net.Conn) {
			br := bufio.NewReader(c)
			if _, _, err := readRequest(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK"+eol)
			for i := 0; i < 2000; i++ {
				if _, err := fmt.Fprintf(c, "X-Filler-%d: %s%s", i, strings.Repeat("x", 20), eol); err != nil {
					return
				}
			}
		})
		tr := newTransport(t)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader("x"))
		if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "exceeds") {
			t.Errorf("eol %q: err %v", eol, err)
		}
	}
}

// TestBodySentAsIs: a Body reaches the server whole, whether this transport takes its
// bytes as they are (unread) or reads what is left of it (partly read: only the rest is
// the request's body), and over the fallback (net/http) too.
func TestBodySentAsIs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	defer srv.Close()
	tr := &Transport{Fallback: http.DefaultTransport}
	defer tr.CloseIdleConnections()
	send := func(rt http.RoundTripper, body *Body, n int64) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Body, req.ContentLength = body, n
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(got)
	}
	if got := send(tr, NewBody([]byte(`{"a":1}`)), 7); got != `{"a":1}` {
		t.Errorf("unread body: the server got %q", got)
	}
	partly := NewBody([]byte(`xx{"b":2}`))
	partly.Read(make([]byte, 2))
	if got := send(tr, partly, 7); got != `{"b":2}` {
		t.Errorf("partly read body: the server got %q", got)
	}
	if got := send(http.DefaultTransport, NewBody([]byte(`{"c":3}`)), 7); got != `{"c":3}` {
		t.Errorf("over net/http: the server got %q", got)
	}
}
