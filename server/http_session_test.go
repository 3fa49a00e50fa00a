package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// TestSessionOwnership: a session is found only on the transport that opened it and
// only for the principal that opened it; a session id named twice is refused; a refused
// request does not count as the session's use.
func TestSessionOwnership(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	r := router.New(router.Options{}, log)
	defer r.Close()
	h := New(r, Options{}, log).NewHTTPHandler(context.Background(), HTTPOptions{})
	defer h.Close()

	alice := &principal.Principal{Name: "alice", Groups: []string{"dev"}, Via: "api_key"}
	aliceJWT := &principal.Principal{Name: "alice", Via: "jwt"}
	bob := &principal.Principal{Name: "bob", Via: "api_key"}
	add := func(sse bool, p *principal.Principal) *httpSession {
		hs := h.newHTTPSession("", "")
		hs.sse, hs.principal = sse, p
		hs.lastUsed.Store(1)
		h.mu.Lock()
		h.sessions[hs.id] = hs
		h.mu.Unlock()
		return hs
	}
	streamable, sse, open := add(false, alice), add(true, alice), add(true, nil)
	as := func(p *principal.Principal) *http.Request {
		req := httptest.NewRequest(http.MethodPost, "/message", nil)
		if p != nil {
			req = req.WithContext(principal.With(req.Context(), p))
		}
		return req
	}

	for _, tc := range []struct {
		name string
		sid  string
		sse  bool
		req  *http.Request
		want int
	}{
		{"owner, Streamable HTTP", streamable.id, false, as(alice), http.StatusOK},
		{"owner, HTTP+SSE", sse.id, true, as(alice), http.StatusOK},
		{"same principal, fresh groups", sse.id, true, as(&principal.Principal{Name: "alice", Via: "api_key"}), http.StatusOK},
		{"unknown", "nope", true, as(alice), http.StatusNotFound},
		{"HTTP+SSE session on Streamable HTTP", sse.id, false, as(alice), http.StatusNotFound},
		{"Streamable HTTP session on /message", streamable.id, true, as(alice), http.StatusNotFound},
		{"another principal", sse.id, true, as(bob), http.StatusForbidden},
		{"same name, another kind of credential", sse.id, true, as(aliceJWT), http.StatusForbidden},
		{"no principal in a principal's session", sse.id, true, as(nil), http.StatusForbidden},
		{"a principal in a session without one", open.id, true, as(alice), http.StatusForbidden},
		{"no principal, no principal", open.id, true, as(nil), http.StatusOK},
	} {
		before := sse.lastUsed.Load()
		hs, status := h.session(tc.sid, tc.sse, tc.req, "")
		if status != tc.want || (hs != nil) != (status == http.StatusOK) {
			t.Errorf("%s: status %d (session %v), want %d", tc.name, status, hs != nil, tc.want)
		}
		if tc.sid == sse.id && status != http.StatusOK && sse.lastUsed.Load() != before {
			t.Errorf("%s: a refused request kept the session alive", tc.name)
		}
	}

	twice := as(alice)
	twice.Header.Add("Mcp-Session-Id", streamable.id)
	twice.Header.Add("Mcp-Session-Id", streamable.id)
	if _, status := h.sessionFor(twice, ""); status != http.StatusBadRequest {
		t.Errorf("Mcp-Session-Id twice: status %d", status)
	}

	for _, tc := range []struct {
		query string
		want  string
		ok    bool
	}{
		{"sessionId=abc", "abc", true},
		{"sessionId=a%62c", "abc", true},
		{"sessionId=abc&other=1", "abc", true},
		{"", "", false},
		{"sessionId=", "", false},
		{"sessionId=abc&sessionId=def", "", false},
		{"sessionId=abc&sessionId=abc", "", false},
		{"sessionId=abc;sessionId=def", "", false},
		{"sessionId=%zz", "", false},
	} {
		got, ok := singleQueryValue(tc.query, "sessionId")
		if got != tc.want || ok != tc.ok {
			t.Errorf("singleQueryValue(%q) = %q, %v; want %q, %v", tc.query, got, ok, tc.want, tc.ok)
		}
	}
}

// TestConfiguredEndpointWins: an MCP endpoint configured at /sse or /message is served
// as Streamable HTTP there, not taken for the legacy transport's.
func TestConfiguredEndpointWins(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	r := router.New(router.Options{}, log)
	defer r.Close()
	for _, tc := range []struct{ path, method string }{{"/message", http.MethodPost}, {"/sse", http.MethodGet}} {
		h := New(r, Options{}, log).NewHTTPHandler(context.Background(), HTTPOptions{Path: tc.path})
		// A client already gone: were /sse taken for the legacy transport, its stream
		// would end at once instead of being held open.
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequestWithContext(gone, tc.method, tc.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Accept", "application/json, text/event-stream")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		h.Close()
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "Mcp-Session-Id") {
			t.Errorf("%s %s as the MCP endpoint: %d %q", tc.method, tc.path, w.Code, w.Body.String())
		}
	}
}

// TestRepeatedModernHeaders: a modern request that repeats an Mcp-* header is a header
// mismatch, whichever copy agrees with the body.
func TestRepeatedModernHeaders(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	r := router.New(router.Options{}, log)
	defer r.Close()
	h := New(r, Options{}, log).NewHTTPHandler(context.Background(), HTTPOptions{})
	defer h.Close()
	msg := &jsonrpc.Message{Method: "tools/list"}
	for _, tc := range []struct {
		name   string
		header map[string][]string
		ok     bool
	}{
		{"once each", map[string][]string{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/list"}}, true},
		{"method twice", map[string][]string{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/list", "tools/call"}}, false},
		{"method twice, the same", map[string][]string{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/list", "tools/list"}}, false},
		{"version twice", map[string][]string{"Mcp-Protocol-Version": {"2026-07-28", "2025-11-25"}, "Mcp-Method": {"tools/list"}}, false},
	} {
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		for k, vs := range tc.header {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		jerr := h.checkHeaders(req, msg, "2026-07-28")
		if (jerr == nil) != tc.ok || (jerr != nil && jerr.Code != mcp.CodeHeaderMismatch) {
			t.Errorf("%s: %v", tc.name, jerr)
		}
	}
}

// TestTrimBrackets: trimBrackets is strings.Trim(s, "[]").
func TestTrimBrackets(t *testing.T) {
	for _, s := range []string{"", "[", "]", "[]", "][", "[::1]", "[[::1]]", "::1", "localhost", "[a]b]", "a[b", "]]x[["} {
		if got, want := trimBrackets(s), strings.Trim(s, "[]"); got != want {
			t.Errorf("trimBrackets(%q) = %q, want %q", s, got, want)
		}
	}
}
