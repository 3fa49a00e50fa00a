package server

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// memShare is a SessionShare in memory: what a cluster keeps, for one replica.
type memShare struct {
	mu      sync.Mutex
	descs   map[string][]byte
	states  map[string][3]any // level, subscriptions, activated tools
	claimed map[string]bool   // sessions this replica may adopt
	opened  []string
	ended   []string
}

func newMemShare() *memShare {
	return &memShare{descs: map[string][]byte{}, states: map[string][3]any{}, claimed: map[string]bool{}}
}

func (m *memShare) NewID(desc []byte) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := "r0-sealed" + string(rune('a'+len(m.descs)))
	m.descs[id] = desc
	return id
}

func (m *memShare) Opened(_ context.Context, id string) {
	m.mu.Lock()
	m.opened = append(m.opened, id)
	m.mu.Unlock()
}

func (m *memShare) Changed(id, level string, subs, active []string) {
	m.mu.Lock()
	m.states[id] = [3]any{level, subs, active}
	m.mu.Unlock()
}

func (m *memShare) Ended(_ context.Context, id string) {
	m.mu.Lock()
	m.ended = append(m.ended, id)
	delete(m.states, id)
	m.mu.Unlock()
}

func (m *memShare) Adopt(_ context.Context, id string) ([]byte, string, []string, []string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.claimed[id] || m.descs[id] == nil {
		return nil, "", nil, nil, errors.New("not claimed")
	}
	st := m.states[id]
	level, _ := st[0].(string)
	subs, _ := st[1].([]string)
	active, _ := st[2].([]string)
	return m.descs[id], level, subs, active, nil
}

// TestAdopt: a session this replica claimed is rebuilt under its id for the principal
// sealed into it, initialized with the sealed version; another principal's request
// adopts nothing; a session not claimed is not adopted. An adopted session's stream ids
// are its own, and a client resuming a stream of the gone replica's gets the proxy's
// error for the call that stream carried.
func TestAdopt(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	r := router.New(router.Options{}, log)
	defer r.Close()
	share := newMemShare()
	h := New(r, Options{}, log).NewHTTPHandler(context.Background(), HTTPOptions{Share: share,
		Forward: func(http.ResponseWriter, *http.Request, string) bool { return false }})
	defer h.Close()
	alice := &principal.Principal{Name: "alice", Via: "api_key"}
	bob := &principal.Principal{Name: "bob", Via: "api_key"}
	init := &jsonrpc.Message{Method: "initialize", Params: []byte(`{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"c","version":"1"}}`)}
	sid := share.NewID(describe(init, alice, ""))
	share.Changed(sid, "debug", nil, nil)

	req := func(p *principal.Principal, method string, hdr map[string]string) *http.Request {
		q := httptest.NewRequest(method, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		q.Header.Set("Mcp-Session-Id", sid)
		q.Header.Set("Accept", "application/json, text/event-stream")
		q.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			q.Header.Set(k, v)
		}
		return q.WithContext(principal.With(q.Context(), p))
	}
	serve := func(q *http.Request) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, q)
		return w
	}
	if w := serve(req(alice, http.MethodPost, nil)); w.Code != http.StatusNotFound || h.holds(sid) {
		t.Fatalf("a session not claimed: HTTP %d, held %v", w.Code, h.holds(sid))
	}
	share.claimed[sid] = true
	if w := serve(req(bob, http.MethodPost, nil)); w.Code != http.StatusNotFound || h.holds(sid) {
		t.Fatalf("another principal: HTTP %d, held %v", w.Code, h.holds(sid))
	}
	if w := serve(req(alice, http.MethodPost, nil)); w.Code != http.StatusOK || !h.holds(sid) {
		t.Fatalf("the session's principal: HTTP %d %s, held %v", w.Code, w.Body, h.holds(sid))
	}
	h.mu.RLock()
	hs := h.sessions[sid]
	h.mu.RUnlock()
	if hs.version != "2025-11-25" || hs.streamPrefix == "" || hs.state.level != "debug" || !hs.ss.initialized {
		t.Errorf("adopted session: version %q, stream prefix %q, level %q, initialized %v", hs.version, hs.streamPrefix, hs.state.level, hs.ss.initialized)
	}
	if len(share.opened) != 1 || share.opened[0] != sid {
		t.Errorf("Opened after the adoption: %v", share.opened)
	}

	own := hs.streamIDFor(3, jsonrpc.StringID("x"))
	if !strings.HasPrefix(own, hs.streamPrefix+"p3.") {
		t.Errorf("an adopted session's stream id %q", own)
	}
	if _, lost := hs.lostCall(own); lost {
		t.Errorf("its own stream %q taken for the gone replica's", own)
	}
	goneStream := "p3." + base64.RawURLEncoding.EncodeToString([]byte(`"slow-1"`))
	if id, lost := hs.lostCall(goneStream); !lost || id.String() != `"slow-1"` {
		t.Errorf("lostCall(%q) = %v %v", goneStream, id, lost)
	}
	w := serve(req(alice, http.MethodGet, map[string]string{"Accept": "text/event-stream", "Last-Event-ID": goneStream + "-4"}))
	body, _ := io.ReadAll(w.Result().Body)
	if w.Code != http.StatusOK || !strings.Contains(string(body), `"id":"slow-1"`) || !strings.Contains(string(body), `"code":-32603`) ||
		!strings.Contains(string(body), "stopped while the call was in flight") || !strings.Contains(string(body), `"origin":"mcp-proxy"`) {
		t.Errorf("resuming the gone replica's stream: HTTP %d %s", w.Code, body)
	}

	if w := serve(req(alice, http.MethodDelete, nil)); w.Code != http.StatusNoContent {
		t.Fatalf("DELETE: HTTP %d", w.Code)
	}
	if len(share.ended) != 1 || share.ended[0] != sid {
		t.Errorf("Ended after DELETE: %v", share.ended)
	}
}
