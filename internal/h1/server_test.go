package h1

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
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// start serves h on a loopback port and returns the address; the server is closed and
// its goroutines checked for leaks at the end of the test.
func start(t *testing.T, h http.Handler, opts ...func(*Server)) (*Server, string) {
	t.Helper()
	before := runtime.NumGoroutine()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h}
	for _, o := range opts {
		o(s)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before+2 {
			buf := make([]byte, 1<<16)
			t.Errorf("goroutines: %d before, %d after\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
	return s, ln.Addr().String()
}

// echo answers with what it saw of the request.
func echo(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "%s %s %s host=%s q=%s len=%d sid=%s body=%s",
		r.Method, r.URL.Path, r.Proto, r.Host, r.URL.Query().Get("sessionId"), r.ContentLength,
		r.Header.Get("Mcp-Session-Id"), b)
}

// exchange writes raw to a new connection and reads n responses.
func exchange(t *testing.T, addr, raw string, n int) ([]*http.Response, []string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var resps []*http.Response
	var bodies []string
	for range n {
		resp, err := http.ReadResponse(br, nil)
		for err == nil && resp.StatusCode == http.StatusContinue {
			resp, err = http.ReadResponse(br, nil)
		}
		if err != nil {
			t.Fatalf("reading response %d: %v", len(resps)+1, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resps = append(resps, resp)
		bodies = append(bodies, string(b))
	}
	return resps, bodies
}

func TestKeepAlivePipelined(t *testing.T) {
	var conns atomic.Int32
	_, addr := start(t, http.HandlerFunc(echo), func(s *Server) {})
	req := "POST /mcp?sessionId=abc HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: s1\r\nContent-Length: 5\r\n\r\nhello"
	get := "GET /x%2Fy HTTP/1.1\r\nhost: localhost:8080\r\nmcp-session-id:   s2  \r\n\r\n"
	resps, bodies := exchange(t, addr, req+get+req, 3)
	want := []string{
		"POST /mcp HTTP/1.1 host=127.0.0.1 q=abc len=5 sid=s1 body=hello",
		"GET /x/y HTTP/1.1 host=localhost:8080 q= len=0 sid=s2 body=",
		"POST /mcp HTTP/1.1 host=127.0.0.1 q=abc len=5 sid=s1 body=hello",
	}
	for i, r := range resps {
		if bodies[i] != want[i] {
			t.Errorf("response %d: %q, want %q", i, bodies[i], want[i])
		}
		if r.ContentLength != int64(len(want[i])) || r.TransferEncoding != nil || r.Close {
			t.Errorf("response %d framing: length %d, TE %v, close %v", i, r.ContentLength, r.TransferEncoding, r.Close)
		}
		if r.Header.Get("Date") == "" || r.Header.Get("Content-Type") != "text/plain" {
			t.Errorf("response %d header %v", i, r.Header)
		}
	}
	_ = conns.Load()
}

func TestHandoffToNetHTTP(t *testing.T) {
	var sawFast atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(*response); ok {
			sawFast.Add(1)
		}
		echo(w, r)
	})
	_, addr := start(t, h)
	cases := []struct {
		name, raw, want string
		status          int
	}{
		{"http/1.0", "POST /mcp HTTP/1.0\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi", "POST /mcp HTTP/1.0 host=h q= len=2 sid= body=hi", 200},
		{"chunked", "POST /mcp HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", "POST /mcp HTTP/1.1 host=h q= len=-1 sid= body=hi", 200},
		{"expect", "POST /mcp HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", "POST /mcp HTTP/1.1 host=h q= len=2 sid= body=hi", 200},
		{"put", "PUT /mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi", "PUT /mcp HTTP/1.1 host=h q= len=2 sid= body=hi", 200},
		{"leading crlf", "\r\nGET /a HTTP/1.1\r\nHost: h\r\n\r\n", "", 400},
		{"big head", "GET /a HTTP/1.1\r\nHost: h\r\nX-Big: " + strings.Repeat("b", 5000) + "\r\n\r\n", "GET /a HTTP/1.1 host=h q= len=0 sid= body=", 200},
		{"absolute form", "GET http://h/a HTTP/1.1\r\nHost: h\r\n\r\n", "GET /a HTTP/1.1 host=h q= len=0 sid= body=", 200},
		{"no host", "GET /a HTTP/1.1\r\n\r\n", "", 400},
		{"two hosts", "GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "", 400},
		{"two lengths", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "", 400},
		{"signed length", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: +2\r\n\r\nab", "", 400},
		{"space before colon", "GET /a HTTP/1.1\r\nHost: a\r\nX-A : b\r\n\r\n", "", 400},
		{"folded", "GET /a HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", "GET /a HTTP/1.1 host=a q= len=0 sid= body=", 200},
		{"ctl in value", "GET /a HTTP/1.1\r\nHost: a\r\nX-A: b\x01c\r\n\r\n", "", 400},
		{"bare lf", "GET /a HTTP/1.1\nHost: a\n\n", "GET /a HTTP/1.1 host=a q= len=0 sid= body=", 200},
		{"bad host", "GET /a HTTP/1.1\r\nHost: a b\r\n\r\n", "", 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resps, bodies := exchange(t, addr, tc.raw, 1)
			if resps[0].StatusCode != tc.status {
				t.Fatalf("status %d, want %d (%q)", resps[0].StatusCode, tc.status, bodies[0])
			}
			if tc.want != "" && bodies[0] != tc.want {
				t.Errorf("body %q, want %q", bodies[0], tc.want)
			}
		})
	}
	if n := sawFast.Load(); n != 0 {
		t.Errorf("%d of these requests reached the fast path", n)
	}
	// A request the fast path can read does reach it.
	if _, bodies := exchange(t, addr, "GET /a HTTP/1.1\r\nHost: a\r\n\r\n", 1); bodies[0] == "" || sawFast.Load() != 1 {
		t.Errorf("plain GET: fast path used %d times", sawFast.Load())
	}
}

// After a handoff the connection stays with net/http, pipelined requests included.
func TestHandoffKeepsConnection(t *testing.T) {
	_, addr := start(t, http.HandlerFunc(echo))
	raw := "GET /a HTTP/1.1\r\nHost: h\r\n\r\n" + // fast
		"PUT /b HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx" + // handed over
		"GET /c HTTP/1.1\r\nHost: h\r\n\r\n" // net/http from now on
	_, bodies := exchange(t, addr, raw, 3)
	for i, want := range []string{"GET /a", "PUT /b", "GET /c"} {
		if !strings.HasPrefix(bodies[i], want) {
			t.Errorf("response %d: %q", i, bodies[i])
		}
	}
}

func TestStreamingIsChunked(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: two\n\n")
	})
	_, addr := start(t, h)
	resp, err := http.Get("http://" + addr + "/s")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("transfer encoding %v", resp.TransferEncoding)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event before the handler ended: %q %v", line, err)
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: two\n\n" {
		t.Fatalf("rest %q %v", rest, err)
	}
}

// The request's context ends when the client goes away: at once for a stream, after
// WatchDelay for a handler that has not written.
func TestClientGoneCancels(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			started, ended := make(chan struct{}), make(chan error, 1)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.ReadAll(r.Body) // the watch starts once the body is read
				if stream {
					w.Write([]byte("x"))
					w.(http.Flusher).Flush()
				}
				close(started)
				select {
				case <-r.Context().Done():
					ended <- nil
				case <-time.After(10 * time.Second):
					ended <- errors.New("context still alive 10s after the client left")
				}
			})
			_, addr := start(t, h, func(s *Server) { s.WatchDelay = 5 * time.Millisecond })
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}")
			<-started
			time.Sleep(20 * time.Millisecond)
			c.Close()
			if err := <-ended; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestBodyLeftUnread(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	_, addr := start(t, h)
	small := "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789"
	resps, _ := exchange(t, addr, small+small, 2)
	if resps[0].Close || resps[1].Close {
		t.Errorf("small unread body closed the connection")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	big := maxDiscard + 1
	io.WriteString(c, fmt.Sprintf("POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n", big))
	go c.Write(make([]byte, 64<<10)) // part of it only
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	if _, err := br.ReadByte(); err == nil {
		t.Errorf("connection still open after an unread body over %d bytes", maxDiscard)
	}
}

func TestContentLengthMismatch(t *testing.T) {
	var writeErr atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "3")
		if r.URL.Path == "/long" {
			_, err := io.WriteString(w, "abcd")
			writeErr.Store(fmt.Sprint(err))
			return
		}
		io.WriteString(w, "ab") // short: the connection must close
	})
	_, addr := start(t, h)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /short HTTP/1.1\r\nHost: h\r\n\r\n")
	all, _ := io.ReadAll(c)
	if !bytes.HasSuffix(all, []byte("\r\n\r\nab")) {
		t.Errorf("short response %q", all)
	}
	exchange(t, addr, "GET /long HTTP/1.1\r\nHost: h\r\n\r\n", 0)
	time.Sleep(50 * time.Millisecond)
	if got := writeErr.Load(); got != http.ErrContentLength.Error() {
		t.Errorf("writing past Content-Length: %v", got)
	}
}

func TestPanicClosesOnlyItsConnection(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		io.WriteString(w, "ok")
	})
	_, addr := start(t, h)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /panic HTTP/1.1\r\nHost: h\r\n\r\n")
	if b, _ := io.ReadAll(c); len(b) != 0 {
		t.Errorf("panicking handler answered %q", b)
	}
	if _, bodies := exchange(t, addr, "GET /ok HTTP/1.1\r\nHost: h\r\n\r\n", 1); bodies[0] != "ok" {
		t.Errorf("after a panic: %q", bodies[0])
	}
}

func TestShutdownDrains(t *testing.T) {
	inHandler, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(inHandler)
			<-release
		}
		io.WriteString(w, "done")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	addr := ln.Addr().String()
	idle, err := net.Dial("tcp", addr) // an idle keep-alive connection
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	exchangeOn(t, idle, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n")
	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
	<-inHandler
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle connection after Shutdown: %v, want EOF", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	busy.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Close {
		t.Errorf("response during shutdown lacks Connection: close")
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve: %v", err)
	}
}

func exchangeOn(t *testing.T, c net.Conn, raw string) {
	t.Helper()
	io.WriteString(c, raw)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
}

// The Go HTTP client, many requests on a pool of connections, every size of body.
func TestClientRoundTrips(t *testing.T) {
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for _, n := range []int{0, 1, 100, writeBufSize - 1, writeBufSize, writeBufSize + 1, 3 * writeBufSize, 1 << 20} {
		body := bytes.Repeat([]byte{'z'}, n)
		resp, err := client.Post("http://"+addr+"/e", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("size %d: got %d bytes, %v", n, len(got), err)
		}
	}
}

// A head and body sent in pieces are read; a head not finished within ReadHeaderTimeout,
// or a connection idle for IdleTimeout, is closed.
func TestSlowClients(t *testing.T) {
	_, addr := start(t, http.HandlerFunc(echo), func(s *Server) {
		s.ReadHeaderTimeout = 200 * time.Millisecond
		s.IdleTimeout = 300 * time.Millisecond
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, piece := range []string{"POST /p HTT", "P/1.1\r\nHost: h\r\nContent-", "Length: 4\r\n\r\n", "ab", "cd"} {
		io.WriteString(c, piece)
		time.Sleep(20 * time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if !strings.HasSuffix(string(b), "body=abcd") {
		t.Errorf("pieced request: %q", b)
	}
	// Idle past IdleTimeout: closed.
	start := time.Now()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("idle connection: %v, want EOF", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("idle connection closed after %v", d)
	}

	// An unfinished head: closed.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	io.WriteString(c2, "GET / HTTP/1.1\r\nHost: h\r\n")
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(c2); err != nil || len(b) != 0 {
		t.Errorf("unfinished head: %q %v, want a silent close", b, err)
	}
}

// TestSetContentLength: a length set with SetContentLength frames the answer as a
// Content-Length field would (the head goes out at WriteHeader, the connection stays
// open for the next request), a Content-Length field in the header wins over it, and a
// call after the status is decided changes nothing.
func TestSetContentLength(t *testing.T) {
	type lengthSetter interface{ SetContentLength(int64) }
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ls, ok := w.(lengthSetter)
		if !ok {
			t.Error("h1's ResponseWriter has no SetContentLength")
			return
		}
		w.Header()["Content-Type"] = []string{"application/json"}
		switch r.URL.Path {
		case "/set":
			ls.SetContentLength(7)
		case "/field-wins":
			ls.SetContentLength(99)
			w.Header().Set("Content-Length", "7")
		case "/late":
			w.WriteHeader(http.StatusOK)
			ls.SetContentLength(3) // the status is decided: nothing changes, the body is chunked
		}
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"a":1}`)
		w.(http.Flusher).Flush()
	})
	_, addr := start(t, h)
	resps, bodies := exchange(t, addr, "GET /set HTTP/1.1\r\nHost: h\r\n\r\n"+
		"GET /field-wins HTTP/1.1\r\nHost: h\r\n\r\nGET /late HTTP/1.1\r\nHost: h\r\n\r\n", 3)
	for i, want := range []int64{7, 7, -1} {
		if resps[i].ContentLength != want || bodies[i] != `{"a":1}` || resps[i].Close {
			t.Errorf("response %d: Content-Length %d, body %q, close %v; want %d (-1: chunked), the whole body, kept open",
				i, resps[i].ContentLength, bodies[i], resps[i].Close, want)
		}
	}
}

// TestFieldSyntaxAsNetHTTP: on the edges where h1's own copy of the syntax rules once
// differed from net/http, h1 serves as a net/http server does: a connection option is
// matched in ASCII case only ("cloſe" is not "close": the connection stays open for the
// second request), and a response field value loses spaces and tabs around it, not a
// no-break space.
func TestFieldSyntaxAsNetHTTP(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["X-Nbsp"] = []string{"a\u00a0"}
		w.Header()["X-Tabs"] = []string{"\t b \t"}
		io.WriteString(w, r.URL.Path)
	})
	raw := "GET /a HTTP/1.1\r\nHost: h\r\nConnection: clo\u017fe\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n"
	_, addr := start(t, h)
	ours, bodies := exchange(t, addr, raw, 2)
	ref := httptest.NewServer(h)
	defer ref.Close()
	theirs, _ := exchange(t, ref.Listener.Addr().String(), raw, 2)
	if bodies[0] != "/a" || bodies[1] != "/b" || ours[0].Close {
		t.Errorf("bodies %q, first response closes: %v", bodies, ours[0].Close)
	}
	for _, k := range []string{"X-Nbsp", "X-Tabs"} {
		if got, want := ours[0].Header[k], theirs[0].Header[k]; !slices.Equal(got, want) {
			t.Errorf("%s: h1 wrote %q, net/http %q", k, got, want)
		}
	}
}

// TestShutdownIdleGrace: with an IdleGrace, Shutdown refuses new connections but leaves
// an idle keep-alive connection open; a request sent on it then is answered, with
// Connection: close, the connection closes after it, and Shutdown returns then (not at
// the grace's end).
func TestShutdownIdleGrace(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "done") }),
		IdleGrace: time.Hour}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	addr := ln.Addr().String()
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	exchangeOn(t, idle, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n")
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	for { // the listener is closed: Shutdown has begun
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		c.Close()
		time.Sleep(5 * time.Millisecond)
	}
	io.WriteString(idle, "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}")
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("a request on an idle connection in the grace: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "done" || !resp.Close {
		t.Errorf("answer in the grace: %d %q close=%v, want 200 \"done\" with Connection: close", resp.StatusCode, b, resp.Close)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the answer in the grace: %v, want EOF", err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve: %v", err)
	}
}
