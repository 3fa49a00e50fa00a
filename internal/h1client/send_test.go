package h1client

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
)

// wireOf is a POST of body to target on host, as Send's callers write one.
func wireOf(t *testing.T, host, target, body string, fields ...string) []byte {
	t.Helper()
	b := []byte("POST " + target + " HTTP/1.1\r\n")
	var err error
	if b, err = AppendField(b, "Host", host); err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		if b, err = AppendField(b, fields[i], fields[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	b = fmt.Appendf(b, "Content-Length: %d\r\n\r\n%s", len(body), body)
	return b
}

// TestSendShapes: JSON with a length, a chunked event stream, an empty 202 and a 204
// come back with their status, length and body; the head's fields are read in any case
// (Field, Header) before the body, also of an empty answer; the request reaches the
// server as written; every request after the first reuses the connection.
func TestSendShapes(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Mcp-Session-Id", "s-"+r.URL.Path[1:])
		w.Header().Set("X-Echo", r.Header.Get("X-Asked")+"|"+string(body))
		switch r.URL.Path {
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"ok":true}`)
		case "/sse":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
			}
		case "/accepted":
			w.WriteHeader(http.StatusAccepted)
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
		}
	})
	host := strings.TrimPrefix(srv.URL, "http://")
	tr := newTransport(t)
	for _, tc := range []struct {
		path   string
		status int
		length int64
		body   string
		ctype  string
	}{
		{"/json", 200, 11, `{"ok":true}`, "application/json"},
		{"/sse", 200, -1, "data: 0\n\ndata: 1\n\ndata: 2\n\n", "text/event-stream"},
		{"/accepted", 202, 0, "", ""},
		{"/nocontent", 204, 0, "", ""},
		{"/json", 200, 11, `{"ok":true}`, "application/json"},
	} {
		r, err := tr.Send(HostPort(host), http.MethodPost, wireOf(t, host, tc.path, "hello", "X-Asked", " yes "), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if got := string(r.Field("mcp-session-id")); got != "s-"+tc.path[1:] {
			t.Errorf("%s: Mcp-Session-Id %q", tc.path, got)
		}
		if got := string(r.Field("X-ECHO")); got != "yes|hello" {
			t.Errorf("%s: the server saw %q, want the field trimmed and the body", tc.path, got)
		}
		if got := string(r.Field("Content-Type")); !strings.HasPrefix(got, tc.ctype) {
			t.Errorf("%s: Content-Type %q", tc.path, got)
		}
		if r.Field("X-None") != nil {
			t.Errorf("%s: a field the answer lacks is not nil", tc.path)
		}
		if h := r.Header(); h.Get("Mcp-Session-Id") != "s-"+tc.path[1:] {
			t.Errorf("%s: Header %v", tc.path, h)
		}
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil || r.StatusCode != tc.status || r.ContentLength != tc.length || string(b) != tc.body {
			t.Errorf("%s: %d, length %d, body %q, %v", tc.path, r.StatusCode, r.ContentLength, b, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestSendFieldOfEmptyAnswerRacesNothing: the connection of an empty answer goes back to
// the pool only once the body is closed, so Field never reads a buffer another request
// is filling (run with -race).
func TestSendFieldOfEmptyAnswerRacesNothing(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Mcp-Session-Id", "abc")
		w.WriteHeader(http.StatusAccepted)
	})
	host := strings.TrimPrefix(srv.URL, "http://")
	tr := newTransport(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				r, err := tr.Send(HostPort(host), http.MethodPost, wireOf(t, host, "/", "x"), nil)
				if err != nil {
					t.Error(err)
					return
				}
				if string(r.Field("Mcp-Session-Id")) != "abc" {
					t.Error("lost the field")
				}
				r.Body.Close()
			}
		}()
	}
	wg.Wait()
}

// TestSendAbortBeforeSending: an aborted request is not sent at all.
func TestSendAbortBeforeSending(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	addr, accepted := rawServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	tr := newTransport(t)
	var a Abort
	a.Abort()
	a.Abort() // twice is fine
	if _, err := tr.Send(addr, http.MethodPost, wireOf(t, addr, "/", "x"), &a); !errors.Is(err, ErrAborted) {
		t.Fatalf("err %v, want ErrAborted", err)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections for an aborted request", n)
	}
	select {
	case <-a.Done():
	default:
		t.Error("Done is not closed after Abort")
	}
}

// TestSendAbortWhileWaiting and mid-body: Abort ends the wait for the answer's head, or
// the read of its body, at once with ErrAborted; the connection is not pooled.
func TestSendAbortWhileWaiting(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	for _, midBody := range []bool{false, true} {
		received := make(chan struct{}, 1)
		release := make(chan struct{})
		addr, _ := rawServer(t, func(c net.Conn) {
			if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			if midBody {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
			}
			received <- struct{}{}
			<-release
		})
		tr := newTransport(t)
		var a Abort
		errc := make(chan error, 1)
		go func() {
			r, err := tr.Send(addr, http.MethodPost, wireOf(t, addr, "/", "x"), &a)
			if err == nil {
				_, err = io.ReadAll(r.Body)
				r.Body.Close()
			}
			errc <- err
		}()
		<-received
		a.Abort()
		if err := <-errc; !errors.Is(err, ErrAborted) {
			t.Errorf("mid-body %v: err %v, want ErrAborted", midBody, err)
		}
		close(release)
		tr.mu.Lock()
		n := len(tr.idle)
		tr.mu.Unlock()
		if n != 0 {
			t.Errorf("mid-body %v: %d pooled hosts after an aborted request", midBody, n)
		}
	}
}

// TestSendNotResentAfterReceiving: a reused connection that the server closes after
// reading the request fails it; it is not sent again.
func TestSendNotResentAfterReceiving(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	var received atomic.Int64
	addr, _ := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for n := 0; ; n++ {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			received.Add(1)
			if n == 1 {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	tr := newTransport(t)
	r, err := tr.Send(addr, http.MethodPost, wireOf(t, addr, "/", "one"), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(r.Body)
	r.Body.Close()
	if _, err := tr.Send(addr, http.MethodPost, wireOf(t, addr, "/", "two"), nil); err == nil || !strings.Contains(err.Error(), "not sent again") {
		t.Fatalf("err %v, want a failure saying it was not retried", err)
	}
	if n := received.Load(); n != 2 {
		t.Errorf("the server received %d requests, want 2", n)
	}
}

// TestAppendFieldRefuses: a name that is not a token, or a value with a line break, is
// refused (nothing can be smuggled into the head).
func TestAppendFieldRefuses(t *testing.T) {
	for _, f := range [][2]string{{"X Bad", "v"}, {"", "v"}, {"X", "a\r\nEvil: 1"}, {"X", "a\nb"}, {"X", "\x00"}} {
		if _, err := AppendField(nil, f[0], f[1]); err == nil {
			t.Errorf("AppendField(%q, %q) accepted", f[0], f[1])
		}
	}
	if b, err := AppendField(nil, "X-Ok", "\t v \t"); err != nil || string(b) != "X-Ok: v\r\n" {
		t.Errorf("%q %v", b, err)
	}
}
