package cluster

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
)

// TestForwardTo: a request another replica must serve goes there with the body the
// handler read, marked with both headers; one ForwardTo sent already, one for this
// replica and one for an unregistered replica are declined; a replica that refuses
// connections answers the error of what the request continues (a parked call: -32602
// telling the client to start over), never a 404 that would end a session, and is then
// known to be gone.
func TestForwardTo(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	r := startRedis(t)
	type seen struct{ body, by, to string }
	got := make(chan seen, 1)
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		got <- seen{string(b), req.Header.Get(ForwardedHeader), req.Header.Get(ForwardedToHeader)}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":7,"result":{}}`)
	}))
	peer := newForwarder(t, r, strings.TrimPrefix(owner.URL, "http://"))
	self := newForwarder(t, r, "127.0.0.1:1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := self.lookup(t.Context(), peer.ID()); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the peer never registered")
		}
		time.Sleep(20 * time.Millisecond)
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","requestState":"r.` + peer.ID() + `.abc"}}`
	post := func(h map[string]string) *http.Request {
		req := httptest.NewRequest(http.MethodPost, "/mcp", http.NoBody) // the body was read by the handler
		for k, v := range h {
			req.Header.Set(k, v)
		}
		return req
	}
	rec := httptest.NewRecorder()
	if !self.ForwardTo(rec, post(nil), peer.ID(), []byte(body)) {
		t.Fatal("not forwarded")
	}
	if s := <-got; s.body != body || s.by != self.ID() || s.to != peer.ID() {
		t.Errorf("the peer got %+v", s)
	}
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"result"`) {
		t.Errorf("answer: %d %s", rec.Code, rec.Body)
	}
	for name, tc := range map[string]struct {
		h       map[string]string
		replica string
	}{
		"sent by ForwardTo already": {map[string]string{ForwardedToHeader: peer.ID()}, peer.ID()},
		"this replica":              {nil, self.ID()},
		"not registered":            {nil, "0badc0de"},
		"no replica":                {nil, ""},
	} {
		if self.ForwardTo(httptest.NewRecorder(), post(tc.h), tc.replica, []byte(body)) {
			t.Errorf("%s: forwarded", name)
		}
	}
	// A session's forward (Forward) does not keep ForwardTo from sending a task on.
	if !self.ForwardTo(httptest.NewRecorder(), post(map[string]string{ForwardedHeader: "ffffffff"}), peer.ID(), []byte(body)) {
		t.Error("a request Forward sent was not sent on to the task's replica")
	}
	<-got

	owner.Close()                      // the replica is gone, still registered
	self.client.CloseIdleConnections() // a new connection is refused (a pooled one would break: 502)
	rec = httptest.NewRecorder()
	if !self.ForwardTo(rec, post(nil), peer.ID(), []byte(body)) {
		t.Fatal("not answered")
	}
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"code":-32602`) || !strings.Contains(rec.Body.String(), "stopped") {
		t.Errorf("a gone replica: %d %s", rec.Code, rec.Body)
	}
	// Known gone now: declined without a try (the handler answers: the call is gone).
	task := `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"t"}}`
	if self.ForwardTo(httptest.NewRecorder(), post(nil), peer.ID(), []byte(task)) {
		t.Error("a request for a replica known to be gone was forwarded")
	}
}
