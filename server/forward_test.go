package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/router"
)

// TestForwardHook: session ids start with SessionIDPrefix; Forward is offered exactly the
// requests that name (once) a session the handler does not hold, on the MCP endpoint and
// on /message, and a request it declines is answered as without it.
func TestForwardHook(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	r := router.New(router.Options{}, log)
	defer r.Close()
	var offered []string
	forward := func(w http.ResponseWriter, req *http.Request, sid string) bool {
		offered = append(offered, sid)
		if strings.HasPrefix(sid, "peer-") {
			w.WriteHeader(http.StatusTeapot)
			return true
		}
		return false
	}
	h := New(r, Options{}, log).NewHTTPHandler(context.Background(), HTTPOptions{Loopback: true,
		SessionIDPrefix: "self-", Forward: forward})
	defer h.Close()
	hs := h.newHTTPSession("", "")
	if !strings.HasPrefix(hs.id, "self-") || len(hs.id) != len("self-")+32 {
		t.Fatalf("session id %q", hs.id)
	}
	h.mu.Lock()
	h.sessions[hs.id] = hs
	h.mu.Unlock()

	do := func(method, target string, ids ...string) int {
		req := httptest.NewRequest(method, target, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
		req.Host = "127.0.0.1"
		req.Header.Set("Accept", "application/json, text/event-stream")
		for _, id := range ids {
			req.Header.Add("Mcp-Session-Id", id)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, tc := range []struct {
		name, method, target string
		ids                  []string
		want                 int
		offered              string
	}{
		{"held session: served here", http.MethodPost, "/mcp", []string{hs.id}, http.StatusAccepted, ""},
		{"a peer's session: forwarded", http.MethodPost, "/mcp", []string{"peer-1"}, http.StatusTeapot, "peer-1"},
		{"a peer's GET stream: forwarded", http.MethodGet, "/mcp", []string{"peer-2"}, http.StatusTeapot, "peer-2"},
		{"a peer's DELETE: forwarded", http.MethodDelete, "/mcp", []string{"peer-3"}, http.StatusTeapot, "peer-3"},
		{"declined: 404 as always", http.MethodPost, "/mcp", []string{"gone-1"}, http.StatusNotFound, "gone-1"},
		{"the id twice: not offered", http.MethodPost, "/mcp", []string{"peer-4", "peer-4"}, http.StatusBadRequest, ""},
		{"no session: not offered", http.MethodGet, "/mcp", nil, http.StatusBadRequest, ""},
		{"HTTP+SSE message for a peer", http.MethodPost, "/message?sessionId=peer-5", nil, http.StatusTeapot, "peer-5"},
	} {
		offered = nil
		if got := do(tc.method, tc.target, tc.ids...); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
		if want := []string{tc.offered}; (tc.offered == "" && len(offered) != 0) || (tc.offered != "" && (len(offered) != 1 || offered[0] != want[0])) {
			t.Errorf("%s: offered %q, want %q", tc.name, offered, tc.offered)
		}
	}
}
