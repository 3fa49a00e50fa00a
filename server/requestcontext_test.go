package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

type traceKey struct{}

// TestHTTPRequestContext: HTTPOptions.RequestContext adds what it reads from each HTTP
// request to the context its calls run under (here the traceparent header, as tracing
// does); the router gets the client's own request id and the session's id.
func TestHTTPRequestContext(t *testing.T) {
	u := newMemUpstream("u", "echo")
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		return result(`{"content":[]}`)
	}
	type seen struct {
		trace, session string
		id             jsonrpc.ID
	}
	got := make(chan seen, 4)
	f := newHTTPFront(t, HTTPOptions{RequestContext: func(ctx context.Context, r *http.Request) context.Context {
		return context.WithValue(ctx, traceKey{}, r.Header.Get("traceparent"))
	}}, u)
	f.r.Use(func(next router.Handler) router.Handler {
		return func(ctx context.Context, c *router.Call, reply router.Reply) {
			s := seen{id: c.Request.ID}
			s.trace, _ = ctx.Value(traceKey{}).(string)
			if sess, ok := c.Request.Session.(interface{ SessionID() string }); ok {
				s.session = sess.SessionID()
			}
			got <- s
			next(ctx, c, reply)
		}
	})
	sid := f.initialize("2025-06-18")
	f.post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp, body := f.post(sid, `{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"u__echo"}}`, "traceparent", "tp-1"); resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/call: %d %s", resp.StatusCode, body)
	}
	if s := recv(t, got); s.trace != "tp-1" || s.session != sid || s.id.Raw() != `"c-1"` {
		t.Errorf("the call saw trace %q, session %q, id %s; want tp-1, %s, \"c-1\"", s.trace, s.session, s.id.Raw(), sid)
	}
	// A modern request: the client's id, though the session handles it under its own.
	if resp, body := f.post("", `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"u__echo","_meta":{`+
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},`+
		`"io.modelcontextprotocol/clientInfo":{"name":"m","version":"1"}}}}`,
		"traceparent", "tp-2", "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "u__echo"); resp.StatusCode != http.StatusOK {
		t.Fatalf("modern tools/call: %d %s", resp.StatusCode, body)
	}
	if s := recv(t, got); s.trace != "tp-2" || s.session != "" || s.id.Raw() != "42" {
		t.Errorf("the modern call saw trace %q, session %q, id %s; want tp-2, none, 42", s.trace, s.session, s.id.Raw())
	}
}
