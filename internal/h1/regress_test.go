package h1

// Regression tests from the review of the h1 server: each failed while the bug it
// describes was present; most run the same case against net/http, whose behaviour is
// the reference.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// startNetHTTP serves h with net/http on a loopback port, for comparisons.
func startNetHTTP(t *testing.T, h http.Handler, opts ...func(*http.Server)) (*http.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h}
	for _, o := range opts {
		o(s)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String()
}

// rawResponse sends raw on a new connection and returns every byte the server sends
// until it closes or d passes.
func rawResponse(t *testing.T, addr, raw string, d time.Duration) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, raw)
	c.SetReadDeadline(time.Now().Add(d))
	b, _ := io.ReadAll(c)
	return string(b)
}

// Changing the header map after WriteHeader (or the first Write) is ignored by net/http
// (it snapshots the map); h1 reads the map only when it sends the head, and then adds its
// own framing next to the handler's Content-Length: two Content-Length fields that
// disagree, or Content-Length together with Transfer-Encoding: chunked.
func TestRegressHeaderChangedAfterWriteHeaderBreaksFraming(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.Header().Set("Content-Length", "3") // too late: net/http ignores it
		if r.URL.Path == "/big" {
			w.Write(bytes.Repeat([]byte("x"), writeBufSize+1))
			return
		}
		io.WriteString(w, "hello")
	})
	_, addr := start(t, h)
	req := "GET %s HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
	small := rawResponse(t, addr, fmt.Sprintf(req, "/small"), 5*time.Second)
	big := rawResponse(t, addr, fmt.Sprintf(req, "/big"), 5*time.Second)
	head := func(s string) string { i := strings.Index(s, "\r\n\r\n"); return s[:max(i, 0)] }
	if n := strings.Count(head(small), "Content-Length:"); n != 1 {
		t.Errorf("small body: %d Content-Length fields in\n%s", n, head(small))
	}
	if strings.Contains(head(big), "Content-Length:") && strings.Contains(head(big), "Transfer-Encoding: chunked") {
		t.Errorf("big body: both Content-Length and Transfer-Encoding in\n%s", head(big))
	}
	// net/http, for contrast: one framing, the real one.
	_, naddr := startNetHTTP(t, h)
	nsmall := rawResponse(t, naddr, fmt.Sprintf(req, "/small"), 5*time.Second)
	if strings.Count(head(nsmall), "Content-Length:") != 1 || !strings.Contains(nsmall, "Content-Length: 5") {
		t.Logf("net/http unexpectedly: %q", head(nsmall))
	}
}

// A 1xx response carries the handler's header map; net/http leaves out Content-Length
// and Transfer-Encoding there (a 1xx has no content), h1 sends them.
func TestRegressInformationalCarriesFraming(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2")
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "ok")
	})
	_, addr := start(t, h)
	all := rawResponse(t, addr, "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", 5*time.Second)
	first := all[:max(strings.Index(all, "\r\n\r\n"), 0)]
	if strings.HasPrefix(first, "HTTP/1.1 103") && strings.Contains(first, "Content-Length") {
		t.Errorf("103 response carries Content-Length:\n%s", first)
	}
}

// The client-gone watch starts after WatchDelay only if the body has been read by
// then; a body that finishes arriving later (a slow or large upload) is never followed
// by a watch, so the request's context is not cancelled when the client leaves.
// net/http starts its background read when the body hits EOF.
func TestRegressNoWatchWhenBodyEndsAfterWatchDelay(t *testing.T) {
	run := func(t *testing.T, addr string, bodyRead, ended chan error) error {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n")
		time.Sleep(100 * time.Millisecond) // past WatchDelay
		io.WriteString(c, "{}")
		if err := <-bodyRead; err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		c.Close()
		return <-ended
	}
	handler := func(bodyRead, ended chan error) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.ReadAll(r.Body)
			bodyRead <- err
			select {
			case <-r.Context().Done():
				ended <- nil
			case <-time.After(2 * time.Second):
				ended <- errors.New("context still alive 2s after the client left")
			}
		})
	}
	t.Run("h1", func(t *testing.T) {
		bodyRead, ended := make(chan error, 1), make(chan error, 1)
		_, addr := start(t, handler(bodyRead, ended), func(s *Server) { s.WatchDelay = 5 * time.Millisecond })
		if err := run(t, addr, bodyRead, ended); err != nil {
			t.Error(err)
		}
	})
	t.Run("net/http", func(t *testing.T) {
		bodyRead, ended := make(chan error, 1), make(chan error, 1)
		_, addr := startNetHTTP(t, handler(bodyRead, ended))
		if err := run(t, addr, bodyRead, ended); err != nil {
			t.Error(err)
		}
	})
}

// A fresh connection that sends nothing: net/http closes it after ReadHeaderTimeout, h1
// keeps it for IdleTimeout (2 minutes by default, 10 s in net/http's place), so an
// attacker holds 12 times more sockets open for the same rate of new connections.
func TestRegressSilentNewConnectionHeldForIdleTimeout(t *testing.T) {
	measure := func(t *testing.T, addr string) time.Duration {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		t0 := time.Now()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		io.ReadAll(c)
		return time.Since(t0)
	}
	t.Run("h1", func(t *testing.T) {
		_, addr := start(t, http.HandlerFunc(echo), func(s *Server) {
			s.ReadHeaderTimeout = 100 * time.Millisecond
			s.IdleTimeout = 2 * time.Second
		})
		if d := measure(t, addr); d > time.Second {
			t.Errorf("silent new connection closed after %v; ReadHeaderTimeout is 100ms", d.Round(time.Millisecond))
		}
	})
	t.Run("net/http", func(t *testing.T) {
		_, addr := startNetHTTP(t, http.HandlerFunc(echo), func(s *http.Server) {
			s.ReadHeaderTimeout = 100 * time.Millisecond
			s.IdleTimeout = 2 * time.Second
		})
		if d := measure(t, addr); d > time.Second {
			t.Errorf("net/http: closed after %v", d)
		}
	})
}

// A keep-alive connection whose next head has begun but not ended is "active" for h1's
// Shutdown, which then waits for ReadHeaderTimeout; net/http counts it idle and closes
// it at once. One client that sends a byte and stalls makes every drain run to its
// deadline (the proxy then hard-closes the requests still in flight).
func TestRegressShutdownWaitsForPartialHead(t *testing.T) {
	try := func(t *testing.T, addr string, shutdown func(context.Context) error) error {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		exchangeOn(t, c, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n")
		io.WriteString(c, "GET /b HT") // the next request begins, then stalls
		time.Sleep(50 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		return shutdown(ctx)
	}
	t.Run("h1", func(t *testing.T) {
		s, addr := start(t, http.HandlerFunc(echo), func(s *Server) { s.ReadHeaderTimeout = 10 * time.Second })
		if err := try(t, addr, s.Shutdown); err != nil {
			t.Errorf("Shutdown: %v (a stalled head holds it)", err)
		}
	})
	t.Run("net/http", func(t *testing.T) {
		s, addr := startNetHTTP(t, http.HandlerFunc(echo), func(s *http.Server) { s.ReadHeaderTimeout = 10 * time.Second })
		if err := try(t, addr, s.Shutdown); err != nil {
			t.Errorf("net/http Shutdown: %v", err)
		}
	})
}

// A body larger than maxDiscard that the handler leaves unread makes h1 close the
// connection after the response, but the response does not say so: no
// "Connection: close" (net/http sends one), so the client believes it can reuse it.
func TestRegressUnreadBigBodyCloseNotAnnounced(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	check := func(t *testing.T, addr string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n", 1<<20)
		go c.Write(make([]byte, 64<<10))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		if !resp.Close {
			t.Errorf("the server closes the connection after this response, which lacks Connection: close (%v)", resp.Header)
		}
	}
	t.Run("h1", func(t *testing.T) { _, addr := start(t, h); check(t, addr) })
	t.Run("net/http", func(t *testing.T) { _, addr := startNetHTTP(t, h); check(t, addr) })
}

// The request body is one object per connection (&c.bodyReader): a reference kept past
// the handler reads the NEXT request's body off the connection. net/http returns
// "http: invalid Read on closed Body" instead. (Needs a handler that misbehaves; the
// point is that the failure mode is a cross-request leak, not an error.)
func TestRegressStaleBodyReadsNextRequest(t *testing.T) {
	var (
		mu    sync.Mutex
		stale io.Reader
	)
	inB, stolen, seen := make(chan struct{}), make(chan struct{}), make(chan string, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a" {
			io.ReadAll(r.Body)
			mu.Lock()
			stale = r.Body
			mu.Unlock()
			io.WriteString(w, "a")
			return
		}
		close(inB)
		<-stolen
		b, _ := io.ReadAll(r.Body)
		seen <- string(b)
		io.WriteString(w, "b")
	})
	_, addr := start(t, h)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchangeOn(t, c, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nA")
	io.WriteString(c, "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\nSECRET")
	<-inB
	mu.Lock()
	got, err := io.ReadAll(stale)
	mu.Unlock()
	close(stolen)
	if len(got) > 0 {
		t.Errorf("request /a's Body, read after its handler returned, gave request /b's body %q (%v); /b's handler then saw %q",
			got, err, <-seen)
	}
}

// Likewise the ResponseWriter (&c.resp) and its header map are reused: a write through a
// ResponseWriter kept past its handler lands in the next request's response.
func TestRegressStaleResponseWriterWritesIntoNextResponse(t *testing.T) {
	var (
		mu    sync.Mutex
		stale http.ResponseWriter
	)
	inB, injected := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a" {
			mu.Lock()
			stale = w
			mu.Unlock()
			io.WriteString(w, "a")
			return
		}
		close(inB)
		<-injected
		io.WriteString(w, "b")
	})
	_, addr := start(t, h)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchangeOn(t, c, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n")
	io.WriteString(c, "GET /b HTTP/1.1\r\nHost: h\r\n\r\n")
	<-inB
	mu.Lock()
	stale.Header().Set("X-Injected", "by /a")
	io.WriteString(stale, "INJECTED-")
	mu.Unlock()
	close(injected)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "b" || resp.Header.Get("X-Injected") != "" {
		t.Errorf("response to /b: %q, X-Injected=%q", b, resp.Header.Get("X-Injected"))
	}
}

// A body still arriving has IdleTimeout in all (a deadline set once, when the head is
// read), however steadily it arrives; net/http (no ReadTimeout) lets it take as long as
// it needs.
func TestRegressSteadyUploadCutAtIdleTimeout(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d", len(b))
	})
	upload := func(t *testing.T, addr string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST /u HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n")
		for range 10 { // 10 bytes over ~500ms, one every 50ms
			time.Sleep(50 * time.Millisecond)
			c.Write([]byte("x"))
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no response: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Errorf("steady upload: %d %q", resp.StatusCode, b)
		}
	}
	t.Run("h1", func(t *testing.T) {
		_, addr := start(t, h, func(s *Server) { s.IdleTimeout = 300 * time.Millisecond })
		upload(t, addr)
	})
	t.Run("net/http", func(t *testing.T) {
		_, addr := startNetHTTP(t, h, func(s *http.Server) { s.IdleTimeout = 300 * time.Millisecond })
		upload(t, addr)
	})
}

// net/http's ReadRequest turns "Pragma: no-cache" without Cache-Control into
// "Cache-Control: no-cache" too; the fast path does not (FuzzParse would catch it
// given the input).
func TestRegressPragmaNoCache(t *testing.T) {
	head := []byte("GET / HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\n\r\n")
	c := &conn{remote: "r"}
	ours := c.parse(head)
	if ours == nil {
		t.Skip("not on the fast path")
	}
	theirs, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		t.Fatal(err)
	}
	if ours.Header.Get("Cache-Control") != theirs.Header.Get("Cache-Control") {
		t.Errorf("Cache-Control: ours %q, net/http %q", ours.Header.Get("Cache-Control"), theirs.Header.Get("Cache-Control"))
	}
}

// net/http sniffs a Content-Type from the first bytes written whenever the handler set
// none; h1 sniffs only a body it staged, so a handler that sets Content-Length, or
// whose first Write exceeds writeBufSize, gets no Content-Type at all.
func TestRegressContentTypeNotSniffed(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/cl" {
			w.Header().Set("Content-Length", "14")
			io.WriteString(w, "<html><body>hi")
			return
		}
		w.Write(append([]byte("<html><body>"), bytes.Repeat([]byte("x"), writeBufSize)...))
	})
	_, addr := start(t, h)
	for _, p := range []string{"/cl", "/big"} {
		resps, _ := exchange(t, addr, "GET "+p+" HTTP/1.1\r\nHost: h\r\n\r\n", 1)
		if ct := resps[0].Header.Get("Content-Type"); ct == "" {
			t.Errorf("%s: no Content-Type (net/http sends text/html; charset=utf-8)", p)
		}
	}
}
