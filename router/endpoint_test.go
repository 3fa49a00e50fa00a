package router

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/search"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// wordRanker is the tests' stand-in for a ranker (the product's is package search's):
// a document scores the number of the query's words its name and description contain.
type wordRanker struct{ builds int }

type wordIndex struct{ docs []search.Doc }

func (w *wordRanker) Build(docs []search.Doc, prev search.Index) search.Index {
	w.builds++
	return &wordIndex{docs: slices.Clone(docs)}
}

func (x *wordIndex) Len() int { return len(x.docs) }

func (x *wordIndex) Search(query string, limit int, visible func(string) bool) []search.Hit {
	var hits []search.Hit
	for i := range x.docs {
		d := &x.docs[i]
		if visible != nil && !visible(d.Name) {
			continue
		}
		score := 0.0
		for _, w := range strings.Fields(strings.ToLower(query)) {
			if strings.Contains(strings.ToLower(d.Name+" "+d.Description), w) {
				score++
			}
		}
		if score > 0 {
			hits = append(hits, search.Hit{Doc: d, Score: score})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].Doc.Name < hits[j].Doc.Name
	})
	return hits[:min(limit, len(hits))]
}

func epRequest(method, endpoint, params string) *Request {
	return &Request{Method: method, Endpoint: endpoint, Params: json.RawMessage(params)}
}

func listedNames(t *testing.T, list json.RawMessage) []string {
	t.Helper()
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(list, &res); err != nil {
		t.Fatalf("%v: %s", err, list)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// TestEndpointViews: two endpoints over one catalogue list different tools, and a tool
// outside an endpoint's view answers as a name nobody lists; a request through no
// endpoint sees everything, as without endpoints.
func TestEndpointViews(t *testing.T) {
	gh := newFake("github", "create_pull_request", "list_issues", "delete_repo")
	fs := newFake("fs", "read_file", "write_file")
	r := newTestRouter(t, Options{}, nsUp{gh, "github"}, nsUp{fs, "fs"})
	if err := r.SetEndpoints([]Endpoint{
		{Name: "review", Upstreams: []string{"github", "fs"}, Tools: Patterns{Include: []string{"github__*pull*", "fs__read_*"}}},
		{Name: "files", Upstreams: []string{"fs"}, Tools: Patterns{Exclude: []string{"*write*"}}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		endpoint string
		want     []string
	}{
		{"review", []string{"github__create_pull_request", "fs__read_file"}},
		{"files", []string{"fs__read_file"}},
		{"", []string{"github__create_pull_request", "github__delete_repo", "github__list_issues", "fs__read_file", "fs__write_file"}},
	} {
		res, err := r.Call(t.Context(), epRequest(mcp.MethodToolsList, c.endpoint, `{}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := listedNames(t, res); !slices.Equal(got, c.want) {
			t.Errorf("endpoint %q lists %v, want %v", c.endpoint, got, c.want)
		}
	}
	// In the view: routed, under the upstream's own name.
	if _, err := r.Call(t.Context(), epRequest(mcp.MethodToolsCall, "review", `{"name":"github__create_pull_request","arguments":{}}`)); err != nil {
		t.Fatal(err)
	}
	if got := string(gh.lastCall().Params); !strings.Contains(got, `"name":"create_pull_request"`) {
		t.Errorf("upstream got %s", got)
	}
	// Outside it: the same answer as an unknown name.
	_, err := r.Call(t.Context(), epRequest(mcp.MethodToolsCall, "review", `{"name":"github__delete_repo","arguments":{}}`))
	_, unknown := r.Call(t.Context(), epRequest(mcp.MethodToolsCall, "review", `{"name":"nope","arguments":{}}`))
	if err == nil || err.Error() != strings.Replace(unknown.Error(), "nope", "github__delete_repo", 1) {
		t.Errorf("a tool outside the view: %v (an unknown one: %v)", err, unknown)
	}
	// An endpoint a reload removed serves nothing to the sessions it leaves.
	if err := r.SetEndpoints([]Endpoint{{Name: "files", Upstreams: []string{"fs"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Call(t.Context(), epRequest(mcp.MethodToolsCall, "review", `{"name":"fs__read_file","arguments":{}}`)); err == nil {
		t.Error("a removed endpoint still routes calls")
	}
	res, _ := r.Call(t.Context(), epRequest(mcp.MethodToolsList, "files", `{}`))
	if got := listedNames(t, res); !slices.Equal(got, []string{"fs__read_file", "fs__write_file"}) {
		t.Errorf("files after the reload lists %v", got)
	}
	if err := r.SetEndpoints([]Endpoint{{Name: "x", Tools: Patterns{Include: []string{"a\\"}}}}); err == nil {
		t.Error("an invalid pattern was accepted")
	}
}

// searchRouter is a router with a search-mode endpoint "ide" over three upstreams, and
// a guard that hides tools named *secret* from everyone but admins.
func searchRouter(t *testing.T, maxActive int) (*Router, *fakeUpstream) {
	gh := newFake("github", "create_pull_request", "list_issues", "secret_admin_tokens")
	gh.cat.Tools[0] = json.RawMessage(`{"name":"create_pull_request","description":"Open a new pull request","inputSchema":{"type":"object","properties":{"title":{"type":"string"}}}}`)
	fs := newFake("fs", "read_file", "write_file")
	mem := newFake("memory", "create_entities", "search_nodes")
	r := newTestRouter(t, Options{Ranker: &wordRanker{}}, nsUp{gh, "github"}, nsUp{fs, "fs"}, nsUp{mem, "memory"})
	r.SetGuard(&countingGuard{})
	if err := r.SetEndpoints([]Endpoint{{Name: "ide", Search: true, Always: []string{"fs__read_file"}, MaxActive: maxActive, Limit: 2}}); err != nil {
		t.Fatal(err)
	}
	return r, gh
}

// TestSearchMode: the list is search_tools, call_tool and always; a search returns the
// matches' definitions and activates them in the session (one list_changed), which then
// lists them; the set is bounded, least recently found out first; call_tool reaches the
// real tool.
func TestSearchMode(t *testing.T) {
	r, gh := searchRouter(t, 2)
	sess, active := newChanClient(), &Active{}
	bob := &principal.Principal{Name: "bob"}
	req := func(method, params string) *Request {
		q := epRequest(method, "ide", params)
		q.Session, q.Active, q.Principal = sess, active, bob
		return q
	}
	list := func() []string {
		t.Helper()
		res, err := r.Call(t.Context(), req(mcp.MethodToolsList, `{}`))
		if err != nil {
			t.Fatal(err)
		}
		return listedNames(t, res)
	}
	if got := list(); !slices.Equal(got, []string{SearchToolsName, CallToolName, "fs__read_file"}) {
		t.Fatalf("initial list %v", got)
	}
	res, err := r.Call(t.Context(), req(mcp.MethodToolsCall, `{"name":"search_tools","arguments":{"query":"pull request"}}`))
	if err != nil {
		t.Fatal(err)
	}
	structured, _, _ := jsonx.Get(res, "structuredContent")
	if got := listedNames(t, structured); !slices.Equal(got, []string{"github__create_pull_request"}) {
		t.Fatalf("search found %v: %s", got, res)
	}
	if !strings.Contains(string(structured), `"Open a new pull request"`) || !strings.Contains(string(res), `"type":"text"`) {
		t.Errorf("the result lacks the full definition as text and structured content: %s", res)
	}
	if m := recvT(t, sess.notes); m != mcp.NotificationToolsListChanged {
		t.Errorf("notified %s", m)
	}
	if got := list(); !slices.Equal(got, []string{SearchToolsName, CallToolName, "fs__read_file", "github__create_pull_request"}) {
		t.Errorf("list after the search %v", got)
	}
	// The same tool again: nothing new, no notification.
	if _, err := r.Call(t.Context(), req(mcp.MethodToolsCall, `{"name":"search_tools","arguments":{"query":"pull"}}`)); err != nil {
		t.Fatal(err)
	}
	// Two more: the oldest goes (max_active 2).
	if _, err := r.Call(t.Context(), req(mcp.MethodToolsCall, `{"name":"search_tools","arguments":{"query":"create entities","limit":1}}`)); err != nil {
		t.Fatal(err)
	}
	recvT(t, sess.notes)
	if _, err := r.Call(t.Context(), req(mcp.MethodToolsCall, `{"name":"search_tools","arguments":{"query":"search nodes","limit":1}}`)); err != nil {
		t.Fatal(err)
	}
	recvT(t, sess.notes)
	if got := active.Names(); !slices.Equal(got, []string{"memory__search_nodes", "memory__create_entities"}) {
		t.Errorf("activated %v", got)
	}
	if len(sess.notes) != 0 {
		t.Errorf("a search that activated nothing new notified")
	}
	// A hidden tool is never found, not even by its own name.
	res, _ = r.Call(t.Context(), req(mcp.MethodToolsCall, `{"name":"search_tools","arguments":{"query":"secret admin tokens","limit":10}}`))
	if strings.Contains(string(res), "secret") {
		t.Errorf("bob found a hidden tool: %s", res)
	}
	// call_tool: the real tool, its arguments, its own name upstream.
	if _, err := r.Call(t.Context(), req(mcp.MethodToolsCall, `{"name":"call_tool","arguments":{"name":"github__list_issues","arguments":{"state":"open"}}}`)); err != nil {
		t.Fatal(err)
	}
	if got := string(gh.lastCall().Params); !strings.Contains(got, `"name":"list_issues"`) || !strings.Contains(got, `"state":"open"`) {
		t.Errorf("call_tool sent %s", got)
	}
	// A tool not activated is still the endpoint's: callable by name.
	if _, err := r.Call(t.Context(), req(mcp.MethodToolsCall, `{"name":"github__list_issues","arguments":{}}`)); err != nil {
		t.Errorf("a direct call: %v", err)
	}
	// call_tool of a tool outside the view: as unknown as a direct call.
	_, err = r.Call(t.Context(), req(mcp.MethodToolsCall, `{"name":"call_tool","arguments":{"name":"nope"}}`))
	if je, ok := err.(*jsonrpc.Error); !ok || je.Message != "Unknown tool: nope" {
		t.Errorf("call_tool of an unknown tool: %v", err)
	}
	// A query without words is the model's mistake: a tool error it can read.
	res, _ = r.Call(t.Context(), req(mcp.MethodToolsCall, `{"name":"search_tools","arguments":{"query":"  "}}`))
	if !strings.Contains(string(res), `"isError":true`) {
		t.Errorf("an empty query: %s", res)
	}
	// A stateless request (no session) lists no activated tools.
	res, _ = r.Call(t.Context(), epRequest(mcp.MethodToolsList, "ide", `{}`))
	if got := listedNames(t, res); len(got) != 3 {
		t.Errorf("a stateless list %v", got)
	}
}

// TestListQuery: tools/list with a query (SEP-1821) answers from the endpoint's index,
// within what the principal may see; admins see the hidden tool.
func TestListQuery(t *testing.T) {
	r, _ := searchRouter(t, 0)
	q := func(p *principal.Principal, query string) []string {
		req := epRequest(mcp.MethodToolsList, "ide", `{"query":`+string(jsonrpc.AppendString(nil, query))+`}`)
		req.Principal = p
		res, err := r.Call(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return listedNames(t, res)
	}
	if got := q(&principal.Principal{Name: "bob"}, "file"); !slices.Equal(got, []string{"fs__read_file", "fs__write_file"}) {
		t.Errorf("query file: %v", got)
	}
	if got := q(&principal.Principal{Name: "bob"}, "secret tokens"); len(got) != 0 {
		t.Errorf("bob's query found %v", got)
	}
	if got := q(&principal.Principal{Name: "ann", Groups: []string{"admins"}}, "secret tokens"); !slices.Equal(got, []string{"github__secret_admin_tokens"}) {
		t.Errorf("an admin's query found %v", got)
	}
}

// TestSearchToolReference: clients the endpoint names get tool_reference blocks.
func TestSearchToolReference(t *testing.T) {
	fs := newFake("fs", "read_file")
	r := newTestRouter(t, Options{Ranker: &wordRanker{}}, nsUp{fs, "fs"})
	if err := r.SetEndpoints([]Endpoint{{Name: "ide", Search: true,
		ToolReference: ToolReference{Clients: []string{"claude-code*"}, Prefix: "mcp__proxy__"}}}); err != nil {
		t.Fatal(err)
	}
	for client, want := range map[string]string{
		"claude-code": `{"type":"tool_reference","tool_name":"mcp__proxy__fs__read_file"}`,
		"other":       `"type":"text"`,
	} {
		req := epRequest(mcp.MethodToolsCall, "ide", `{"name":"search_tools","arguments":{"query":"read"}}`)
		req.Meta = &ClientMeta{Info: json.RawMessage(`{"name":"` + client + `"}`)}
		res, err := r.Call(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(res), want) || !strings.Contains(string(res), `"structuredContent":{"tools":[`) {
			t.Errorf("%s got %s", client, res)
		}
	}
}

// TestEndpointResources: an endpoint serves the resources of its upstreams that its
// resources block selects; another's URI is not found.
func TestEndpointResources(t *testing.T) {
	a, b := newFake("a"), newFake("b")
	a.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"file:///a/one","name":"one"}`), json.RawMessage(`{"uri":"file:///a/two","name":"two"}`)}
	b.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"file:///b/one","name":"bone"}`)}
	r := newTestRouter(t, Options{}, nsUp{a, "a"}, nsUp{b, "b"})
	if err := r.SetEndpoints([]Endpoint{{Name: "e", Upstreams: []string{"a"}, Resources: Patterns{Exclude: []string{"*/two"}}}}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Call(t.Context(), epRequest(mcp.MethodResourcesList, "e", `{}`))
	if err != nil || !strings.Contains(string(res), "file:///a/one") || strings.Contains(string(res), "two") || strings.Contains(string(res), "/b/") {
		t.Fatalf("resources %s %v", res, err)
	}
	for _, uri := range []string{"file:///a/two", "file:///b/one"} {
		_, err := r.Call(t.Context(), epRequest(mcp.MethodResourcesRead, "e", `{"uri":"`+uri+`"}`))
		if je, ok := err.(*jsonrpc.Error); !ok || je.Code != mcp.CodeResourceNotFound {
			t.Errorf("reading %s through the endpoint: %v", uri, err)
		}
	}
	if _, err := r.Call(t.Context(), epRequest(mcp.MethodResourcesRead, "e", `{"uri":"file:///a/one"}`)); err != nil {
		t.Errorf("reading a resource of the endpoint: %v", err)
	}
}

// TestActiveBounded: activation keeps the most recent, reports only real changes.
func TestActiveBounded(t *testing.T) {
	var a Active
	var told [][]string
	a.SetOnChange(func(n []string) { told = append(told, n) })
	steps := []struct {
		found   []string
		changed bool
		want    []string
	}{
		{[]string{"a", "b"}, true, []string{"a", "b"}},
		{[]string{"b"}, false, []string{"b", "a"}},
		{[]string{"c"}, true, []string{"c", "b", "a"}},
		{[]string{"d", "d"}, true, []string{"d", "c", "b"}},
	}
	for i, s := range steps {
		if got := a.activate(s.found, 3); got != s.changed || !slices.Equal(a.Names(), s.want) {
			t.Errorf("step %d: changed %v, names %v; want %v, %v", i, got, a.Names(), s.changed, s.want)
		}
	}
	if len(told) != 3 {
		t.Errorf("told %d times, want 3", len(told))
	}
}

// TestSearchToolsEscapedName: a search-mode tool named with JSON escapes is the same
// tool.
func TestSearchToolsEscapedName(t *testing.T) {
	r, _ := searchRouter(t, 0)
	res, err := r.Call(t.Context(), epRequest(mcp.MethodToolsCall, "ide", `{"name":"search\u005ftools","arguments":{"query":"read file"}}`))
	if err != nil || !strings.Contains(string(res), "fs__read_file") {
		t.Errorf("escaped search_tools: %v %s", err, res)
	}
}

// TestListQueryPassedUpstream: when an endpoint's tools all come from one upstream that
// declares tools.filtering (SEP-1821), a query goes to that upstream, and its answer,
// mapped to exposed names and kept to the endpoint's view, is the result.
func TestListQueryPassedUpstream(t *testing.T) {
	fs := newFake("fs", "read_file", "write_file", "secret_file")
	fs.info = upstream.Info{Capabilities: json.RawMessage(`{"tools":{"filtering":true}}`)}
	fs.resp = []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"write_file","inputSchema":{"type":"object"}},{"name":"secret_file","inputSchema":{"type":"object"}},{"name":"unknown","inputSchema":{"type":"object"}}]}}`)
	gh := newFake("gh", "list_issues")
	r := newTestRouter(t, Options{Ranker: &wordRanker{}}, nsUp{fs, "fs"}, nsUp{gh, "gh"})
	r.SetGuard(&countingGuard{})
	if err := r.SetEndpoints([]Endpoint{{Name: "files", Upstreams: []string{"fs"}}, {Name: "both"}}); err != nil {
		t.Fatal(err)
	}
	req := epRequest(mcp.MethodToolsList, "files", `{"query":"read"}`)
	req.Principal = &principal.Principal{Name: "bob"}
	res, err := r.Call(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := listedNames(t, res); !slices.Equal(got, []string{"fs__write_file"}) {
		t.Errorf("the upstream's answer: %v (the index would say fs__read_file)", got)
	}
	if got := string(fs.lastCall().Params); got != `{"query":"read"}` {
		t.Errorf("the upstream got %s", got)
	}
	// Two upstreams: the proxy's index answers.
	res, _ = r.Call(t.Context(), epRequest(mcp.MethodToolsList, "both", `{"query":"read"}`))
	if got := listedNames(t, res); !slices.Equal(got, []string{"fs__read_file"}) {
		t.Errorf("the index's answer: %v", got)
	}
}
