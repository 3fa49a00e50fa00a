package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// TestStateKeyShared: servers given the same StateKey (replicas of one proxy) accept
// each other's requestState; with another key, or a random key each, they refuse it, and
// a retry carrying it is -32602.
func TestStateKeyShared(t *testing.T) {
	key := bytes.Repeat([]byte("k"), router.MinKeyLen)
	other := bytes.Repeat([]byte("o"), router.MinKeyLen)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	r := router.New(router.Options{}, log)
	defer r.Close()
	var conn [16]byte
	conn[0] = 7
	for _, tc := range []struct {
		name     string
		mint, at []byte
		ok       bool
	}{
		{"same key", key, key, true},
		{"other key", key, other, false},
		{"random keys", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := New(r, Options{StateKey: tc.mint}, log), New(r, Options{StateKey: tc.at}, log)
			handle := a.mintState(conn, "", "alice", 42, time.Now().Add(time.Minute))
			if id, err := b.openState(conn, "", "alice", handle); (err == nil) != tc.ok || (tc.ok && id != 42) {
				t.Errorf("a parked call's handle from the other server: %d %v", id, err)
			}
			wrapped := a.wrapState("alice", "upstream-state")
			if inner, ok := b.unwrapState("alice", wrapped); ok != tc.ok || (ok && inner != "upstream-state") {
				t.Errorf("an upstream's wrapped state from the other server: %q %v", inner, ok)
			}

			// On the wire: a modern retry carrying the other server's wrapped state.
			ss := newSession(b, transport.NewOutputStream(io.Discard), log)
			params := `{"name":"nowhere__tool","requestState":` + string(jsonrpc.AppendString(nil, wrapped)) +
				`,"_meta":{"` + mcp.MetaProtocolVersion + `":"` + mcp.ModernVersion + `","` + mcp.MetaClientCapabilities + `":{}}}`
			msg := &jsonrpc.Message{ID: jsonrpc.IntID(1), Method: mcp.MethodToolsCall, Params: json.RawMessage(params)}
			meta, version := modernMeta(msg.Params)
			done := make(chan *jsonrpc.Message, 1)
			ctx := principal.With(context.Background(), &principal.Principal{Name: "alice"})
			ss.handleModern(ctx, msg, meta, version, replier{reply: func(m *jsonrpc.Message) { done <- m }})
			resp := <-done
			if resp == nil || resp.Error == nil || resp.Error.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("retry: %+v; want an error -32602", resp)
			}
			refused := strings.Contains(resp.Error.Message, "requestState")
			if refused == tc.ok {
				// Accepted, the state goes on to the router, which knows no such tool.
				t.Errorf("retry with the other server's state: %q (accepted: %v, want %v)", resp.Error.Message, !refused, tc.ok)
			}
			ss.shutdown()
		})
	}
}

// TestStateKeyTooShort: a configured key shorter than router.MinKeyLen is an error for
// CheckStateKey and a panic for New.
func TestStateKeyTooShort(t *testing.T) {
	for _, tc := range []struct {
		key []byte
		ok  bool
	}{{nil, true}, {make([]byte, router.MinKeyLen), true}, {make([]byte, router.MinKeyLen-1), false}} {
		if err := CheckStateKey(tc.key); (err == nil) != tc.ok {
			t.Errorf("CheckStateKey(%d bytes) = %v", len(tc.key), err)
		}
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "state key: 31 bytes, need at least 32") {
			t.Errorf("New with a short key: panic %v", p)
		}
	}()
	New(nil, Options{StateKey: make([]byte, router.MinKeyLen-1)}, zerolog.Nop())
}
