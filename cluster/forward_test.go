package cluster

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

func newForwarder(t *testing.T, r *topology.Redis, advertise string) *Forwarder {
	t.Helper()
	f, err := NewForwarder(&config.Cluster{Redis: r.URL(), Timeout: time.Second, KeyPrefix: "test:"}, advertise, 1<<20,
		zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
		f.Close() // safe twice
	})
	return f
}

// TestForward: a request for a peer's session goes to the peer as it came (method, path,
// query, body, credentials, Host), marked as forwarded, and its streamed answer comes
// back; what is not a registered peer's is declined; a peer gone answers 404.
func TestForward(t *testing.T) {
	leaktest.Check(t, 5*time.Second) // the clients, pools, heartbeats and sweepers are closed
	r := startRedis(t)
	type seen struct {
		method, uri, body, auth, host, forwardedBy, conn string
	}
	got := make(chan seen, 1)
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		got <- seen{req.Method, req.URL.RequestURI(), string(b), req.Header.Get("Authorization"), req.Host,
			req.Header.Get(ForwardedHeader), req.Header.Get("X-Hop")}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Mcp-Session-Id", "kept")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n")
	}))
	defer owner.Close()
	peer := newForwarder(t, r, strings.TrimPrefix(owner.URL, "http://"))
	self := newForwarder(t, r, "127.0.0.1:1")
	sid := peer.SessionIDPrefix() + "0123456789abcdef0123456789abcdef"

	waitRegistered := time.Now().Add(10 * time.Second)
	for {
		if _, ok := self.lookup(t.Context(), peer.ID()); ok {
			break
		}
		if time.Now().After(waitRegistered) {
			t.Fatal("the peer never registered")
		}
		time.Sleep(20 * time.Millisecond)
	}

	req := httptest.NewRequest(http.MethodPost, "/mcp?x=1", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"ping"}`))
	req.Host = "mcp.example.com"
	req.Header.Set("Authorization", "Bearer k")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "not for the next hop")
	rec := httptest.NewRecorder()
	if !self.Forward(rec, req, sid) {
		t.Fatal("a peer's session was not forwarded")
	}
	s := <-got
	want := seen{http.MethodPost, "/mcp?x=1", `{"jsonrpc":"2.0","id":7,"method":"ping"}`, "Bearer k", "mcp.example.com", self.ID(), ""}
	if s != want {
		t.Errorf("the owner saw %+v, want %+v", s, want)
	}
	if rec.Code != http.StatusOK || rec.Header().Get("Mcp-Session-Id") != "kept" || !strings.Contains(rec.Body.String(), `"id":7`) {
		t.Errorf("answer: %d %v %q", rec.Code, rec.Header(), rec.Body)
	}

	for name, tc := range map[string]struct {
		sid       string
		forwarded bool
	}{
		"already forwarded": {sid, true},
		"own session":       {self.SessionIDPrefix() + "00", false},
		"unknown replica":   {"deadbeef-00", false},
		"no replica":        {"0123456789", false},
	} {
		req := httptest.NewRequest(http.MethodGet, "/mcp", nil)
		if tc.forwarded {
			req.Header.Set(ForwardedHeader, "someone")
		}
		if self.Forward(httptest.NewRecorder(), req, tc.sid) {
			t.Errorf("%s: forwarded", name)
		}
	}

	// The peer's address stops answering: 404, so that the client starts a new session.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := l.Addr().String()
	l.Close()
	dead := newForwarder(t, r, deadAddr)
	for {
		if _, ok := self.lookup(t.Context(), dead.ID()); ok {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	rec = httptest.NewRecorder()
	req = httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":"a","method":"ping"}`))
	if !self.Forward(rec, req, dead.SessionIDPrefix()+"00") || rec.Code != http.StatusNotFound ||
		!strings.Contains(rec.Body.String(), `"id":"a"`) || !strings.Contains(rec.Body.String(), "Session not found") {
		t.Errorf("a dead owner: %d %s", rec.Code, rec.Body)
	}
}

// TestForwardDrain: a GET stream being forwarded ends when the forwarding replica drains
// (its client resumes through another one); the owner sees its request end.
func TestForwardDrain(t *testing.T) {
	leaktest.Check(t, 5*time.Second) // the clients, pools, heartbeats and sweepers are closed
	r := startRedis(t)
	ended := make(chan struct{})
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "id: g-1\ndata: {}\n\n")
		http.NewResponseController(w).Flush()
		<-req.Context().Done()
		close(ended)
	}))
	defer owner.Close()
	peer := newForwarder(t, r, strings.TrimPrefix(owner.URL, "http://"))
	self := newForwarder(t, r, "127.0.0.1:1")
	for {
		if _, ok := self.lookup(t.Context(), peer.ID()); ok {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		self.Forward(w, req, peer.SessionIDPrefix()+"00")
	}))
	defer front.Close()
	resp, err := http.Get(front.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	if n, err := resp.Body.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "g-1") {
		t.Fatalf("first event: %q %v", buf[:n], err)
	}
	self.Drain()
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
	<-ended
}
