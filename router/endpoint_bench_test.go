package router

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/search"
)

// BenchmarkEndpointCall is BenchmarkHotPath through an endpoint: the same tools/call,
// routed through no endpoint, through an endpoint that filters the catalogue, and
// through one in search mode (the tool called by its name), so that the cost of a view
// on a call shows as a ratio in one run.
func BenchmarkEndpointCall(b *testing.B) {
	var tools []string
	for i := 0; i < 200; i++ {
		tools = append(tools, "tool_"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	up := newFake("github", tools...)
	r := newTestRouter(b, Options{Ranker: search.BM25F{}}, nsUp{up, "github"})
	if err := r.SetEndpoints([]Endpoint{
		{Name: "view", Tools: Patterns{Include: []string{"github__tool_a*"}}},
		{Name: "find", Search: true},
	}); err != nil {
		b.Fatal(err)
	}
	line := []byte(`{"jsonrpc":"2.0","id":"req-12345","method":"tools/call","params":{"name":"github__tool_ab","arguments":{"owner":"modelcontextprotocol","repo":"go-sdk","title":"A bug report","body":"Steps to reproduce: run the proxy, call a tool, observe the result."},"_meta":{"progressToken":"abc"}}}`)
	ctx := context.Background()
	for _, endpoint := range []string{"", "view", "find"} {
		name := endpoint
		if name == "" {
			name = "none"
		}
		b.Run(name, func(b *testing.B) {
			var out []byte
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				msg, err := jsonrpc.Decode(line)
				if err != nil {
					b.Fatal(err)
				}
				r.Dispatch(ctx, &Request{Method: msg.Method, Params: msg.Params, Endpoint: endpoint}, func(res json.RawMessage, err error) {
					if err != nil {
						b.Fatal(err)
					}
					out, err = jsonrpc.NewResult(msg.ID, res).Append(out[:0])
					if err != nil {
						b.Fatal(err)
					}
				})
			}
		})
	}
}

// corpusRouter is a router over the committed corpus of real servers' tools (package
// search's testdata), each server an upstream, the whole repeated copies times under
// other namespaces (3 copies: about 1,000 tools), with an endpoint "ide" in search mode
// and a guard that hides every delete tool from principals outside "admins".
func corpusRouter(b testing.TB, copies int) (*Router, int) {
	files, err := filepath.Glob(filepath.Join("..", "search", "testdata", "corpus", "*.json"))
	if err != nil || len(files) == 0 {
		b.Skip("no corpus")
	}
	var ups []nsUp
	n := 0
	for c := range copies {
		for _, f := range files {
			var srv struct {
				Server  string            `json:"server"`
				Package string            `json:"package"`
				Tools   []json.RawMessage `json:"tools"`
			}
			data, err := os.ReadFile(f)
			if err != nil || json.Unmarshal(data, &srv) != nil || srv.Server == "" {
				continue // servers.json, the corpus's index
			}
			ns := srv.Server
			if c > 0 {
				ns = fmt.Sprintf("%s%d", srv.Server, c+1)
			}
			up := newFake(ns)
			// The corpus keeps no serverInfo: the package's name stands in for the
			// server's (longer than most servers' own names, so the sizes err high).
			up.info.ServerInfo, _ = json.Marshal(map[string]string{"name": srv.Package, "version": "1"})
			for _, raw := range srv.Tools {
				var t map[string]any
				if json.Unmarshal(raw, &t) != nil {
					continue
				}
				name, _ := t["name"].(string)
				t["name"] = strings.TrimPrefix(name, srv.Server+"__") // the upstream's own name
				b, _ := json.Marshal(t)
				up.cat.Tools = append(up.cat.Tools, b)
				n++
			}
			ups = append(ups, nsUp{up, ns})
		}
	}
	r := newTestRouter(b, Options{Ranker: search.BM25F{}}, ups...)
	r.SetGuard(guardFunc(func(req *Request, t *Target) bool {
		return !strings.Contains(t.Name, "delete") || req.Principal.InGroup("admins")
	}))
	if err := r.SetEndpoints([]Endpoint{{Name: "ide", Search: true, Limit: 5}}); err != nil {
		b.Fatal(err)
	}
	return r, n
}

// BenchmarkSearchTools is one search_tools call through an endpoint in search mode over
// about 1,000 real tools, as the client's request reaches the router and its answer
// leaves it (the matches' definitions as text and structured content, and their
// activation in the session), for a principal whose view hides some tools.
func BenchmarkSearchTools(b *testing.B) {
	r, n := corpusRouter(b, 3)
	queries := []string{
		"show me the contents of notes.txt",
		"open a pull request for my branch",
		"what pods are crashing in the cluster",
		"remember that Ada prefers tea",
		"take a screenshot of the page",
	}
	lines := make([][]byte, len(queries))
	for i, q := range queries {
		lines[i] = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":` +
			string(jsonrpc.AppendString(nil, q)) + `,"limit":5}}}`)
	}
	ctx := context.Background()
	p := &principal.Principal{Name: "bob"}
	active, sess := &Active{}, discardClient{}
	b.Logf("%d tools", n)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		msg, _ := jsonrpc.Decode(lines[i%len(lines)])
		r.Dispatch(ctx, &Request{Method: mcp.MethodToolsCall, Params: msg.Params, Endpoint: "ide", Principal: p, Active: active, Session: sess},
			func(res json.RawMessage, err error) {
				if err != nil || len(res) < 100 {
					b.Fatalf("%v %s", err, res)
				}
			})
	}
}

// discardClient is a session that drops what it is told.
type discardClient struct{}

func (discardClient) Notify(string, json.RawMessage) {}
func (discardClient) Cork()                          {}
func (discardClient) Uncork()                        {}
func (discardClient) Request(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	return nil, nil
}

// TestSearchModeListSize: over the corpus of real servers (one copy: 331 tools), the
// first tools/list of a search-mode endpoint, as the router encodes it, is at most 5%
// of the bytes of the whole catalogue's (every page).
func TestSearchModeListSize(t *testing.T) {
	r, n := corpusRouter(t, 1)
	if err := r.SetEndpoints([]Endpoint{{Name: "ide", Search: true}, {Name: "all"}}); err != nil {
		t.Fatal(err)
	}
	size := func(endpoint string) int {
		total, cursor := 0, ""
		for {
			params := `{}`
			if cursor != "" {
				params = `{"cursor":` + string(jsonrpc.AppendString(nil, cursor)) + `}`
			}
			res, err := r.Call(t.Context(), &Request{Method: mcp.MethodToolsList, Params: json.RawMessage(params), Endpoint: endpoint})
			if err != nil {
				t.Fatal(err)
			}
			total += len(res)
			var page struct {
				NextCursor string `json:"nextCursor"`
			}
			json.Unmarshal(res, &page)
			if cursor = page.NextCursor; cursor == "" {
				return total
			}
		}
	}
	all, search := size("all"), size("ide")
	t.Logf("%d tools: mode all lists %d bytes, search mode %d (%.2f%%)", n, all, search, 100*float64(search)/float64(all))
	if search*20 > all {
		t.Errorf("search mode's list is %d bytes, more than 5%% of %d", search, all)
	}
}
