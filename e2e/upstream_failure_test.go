package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHTTPUpstreamRequestFailureIsProxyError: when the POST of one call to an HTTP
// upstream fails (here the server answers 500 without a JSON-RPC body), the client gets
// the proxy's own error, -31002 with data.origin "mcp-proxy", never something that passes
// for the upstream's answer; the upstream stays usable for the next call.
func TestHTTPUpstreamRequestFailureIsProxyError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		json.Unmarshal(b, &m)
		answer := func(result string) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
		}
		switch m.Method {
		case "initialize":
			answer(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"flaky","version":"1"}}`)
		case "tools/list":
			answer(`{"tools":[{"name":"ok","inputSchema":{"type":"object"}},{"name":"boom","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			if m.Params.Name == "boom" {
				http.Error(w, "internal error", http.StatusInternalServerError)
				return
			}
			answer(`{"content":[{"type":"text","text":"fine"}]}`)
		case "":
			w.WriteHeader(http.StatusAccepted) // a response or notification
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	rc := startRaw(t, writeConfig(t, fmt.Sprintf("upstream \"flaky\" {\n  url = %q\n  namespace = \"f\"\n  protocol = \"legacy\"\n}\n", srv.URL+"/mcp")))
	rc.initialize()
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"f__boom","arguments":{}}}`)
	m := rc.response("1")
	var e struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Origin   string `json:"origin"`
			Upstream string `json:"upstream"`
		} `json:"data"`
	}
	if err := json.Unmarshal(m["error"], &e); err != nil {
		t.Fatalf("want an error, got %s", m["result"])
	}
	if e.Code != -31002 || e.Data.Origin != "mcp-proxy" || e.Data.Upstream != "flaky" || !strings.Contains(e.Message, "HTTP 500") {
		t.Errorf("error %s: want -31002 from mcp-proxy naming the upstream and the HTTP status", m["error"])
	}
	rc.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"f__ok","arguments":{}}}`)
	if m := rc.response("2"); !strings.Contains(string(m["result"]), "fine") {
		t.Errorf("the next call: %s %s", m["result"], m["error"])
	}
}
