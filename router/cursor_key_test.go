package router

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// TestCursorKeyShared: routers given the same CursorKey (replicas of one proxy) accept
// each other's cursors; with another key, or with a random key each, a cursor from one
// is refused by the other with -32602.
func TestCursorKeyShared(t *testing.T) {
	key := bytes.Repeat([]byte("k"), MinKeyLen)
	other := bytes.Repeat([]byte("o"), MinKeyLen+8)
	router := func(key []byte) *Router {
		return newTestRouter(t, Options{PageSize: 1, CursorKey: key}, nsUp{newFake("u", "a", "b", "c"), "u"})
	}
	firstCursor := func(r *Router) string {
		res, err := call(t, r, mcp.MethodToolsList, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		cur, ok, _ := jsonx.GetString(res, "nextCursor")
		if !ok {
			t.Fatalf("no nextCursor in %s", res)
		}
		return cur
	}
	for _, tc := range []struct {
		name     string
		mint, at []byte
		ok       bool
	}{
		{"same key", key, key, true},
		{"other key", key, other, false},
		{"random keys", nil, nil, false},
		{"configured, then random", key, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := firstCursor(router(tc.mint))
			res, err := call(t, router(tc.at), mcp.MethodToolsList, `{"cursor":"`+cur+`"}`)
			if tc.ok {
				if err != nil || !strings.Contains(string(res), `"name":"u__b"`) {
					t.Errorf("the other replica's cursor: %s %v; want the second page", res, err)
				}
				return
			}
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("a cursor under another key: %s %v; want -32602", res, err)
			}
		})
	}
}

// TestCursorKeyTooShort: a configured key shorter than MinKeyLen is an error for
// CheckCursorKey, and a panic for New (the wiring checks first).
func TestCursorKeyTooShort(t *testing.T) {
	for _, tc := range []struct {
		key []byte
		ok  bool
	}{{nil, true}, {[]byte{}, true}, {make([]byte, MinKeyLen), true}, {make([]byte, MinKeyLen-1), false}, {[]byte("secret"), false}} {
		if err := CheckCursorKey(tc.key); (err == nil) != tc.ok {
			t.Errorf("CheckCursorKey(%d bytes) = %v", len(tc.key), err)
		}
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "cursor key: 6 bytes, need at least 32") {
			t.Errorf("New with a short key: panic %v", p)
		}
	}()
	New(Options{CursorKey: []byte("secret")}, zerolog.Nop())
}
