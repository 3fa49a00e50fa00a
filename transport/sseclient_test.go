package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// rotatingAuthorizer hands out tok-1, tok-2, …: Renew moves to the next token (once for
// the token that was refused, however many requests were).
type rotatingAuthorizer struct {
	mu       sync.Mutex
	n        int
	cur      *Bearer
	renewals int
	accepted int
}

func (a *rotatingAuthorizer) Authorization(context.Context) (*Bearer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur == nil {
		a.n++
		a.cur = NewBearer(fmt.Sprintf("tok-%d", a.n))
	}
	return a.cur, nil
}

func (a *rotatingAuthorizer) Renew(_ context.Context, status int, _ http.Header, sent *Bearer) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if status != http.StatusUnauthorized {
		return fmt.Errorf("HTTP %d", status)
	}
	if a.cur == sent {
		a.renewals++
		a.n++
		a.cur = NewBearer(fmt.Sprintf("tok-%d", a.n))
	}
	return nil
}

func (a *rotatingAuthorizer) Accepted() {
	a.mu.Lock()
	a.accepted++
	a.mu.Unlock()
}

// TestSSERenewsToken: the legacy HTTP+SSE link (a Go SDK server over HTTP+SSE, behind a
// check that takes one token at a time) renews a refused token once and sends the
// request again, for its GET stream as for its POSTs, so that a per-user token that
// expires does not end the principal's session.
func TestSSERenewsToken(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "sse", Version: "1"}, nil)
	var mu sync.Mutex
	valid := "tok-2" // the first token (tok-1) is refused at once
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ok := r.Header.Get("Authorization") == "Bearer "+valid
		mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	a := &rotatingAuthorizer{}
	l, err := DialSSE(HTTPSpec{URL: srv.URL, Authorizer: a}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop(0)
	if a.renewals != 1 || a.accepted != 1 {
		t.Errorf("opening the stream: %d renewals, %d accepted", a.renewals, a.accepted)
	}
	call := func(id int64, method, params string) *jsonrpc.Message {
		t.Helper()
		if err := l.Write(&jsonrpc.Message{ID: jsonrpc.IntID(id), Method: method, Params: json.RawMessage(params)}); err != nil {
			t.Fatal(err)
		}
		line, err := l.ReadLine()
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		m, err := jsonrpc.Decode(line)
		if err != nil || m.Error != nil {
			t.Fatalf("%s: %s %v", method, line, err)
		}
		return m
	}
	call(1, "initialize", `{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	if err := l.Write(&jsonrpc.Message{Method: "notifications/initialized"}); err != nil {
		t.Fatal(err)
	}
	// The token expires at the server: the next POST is refused once, renewed, sent again.
	mu.Lock()
	valid = "tok-3"
	mu.Unlock()
	if m := call(2, "tools/list", `{}`); !strings.Contains(string(m.Result), `"tools"`) {
		t.Errorf("tools/list after the token was renewed: %s", m.Result)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.renewals != 2 || a.n != 3 {
		t.Errorf("%d renewals (tok-%d), want 2 (tok-3)", a.renewals, a.n)
	}
}
