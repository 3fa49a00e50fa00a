package policy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// TestProxyToolRules: the proxy's own search_tools is decided on by the rules that name
// it (a condition may read the query), not by the rules that name no tools nor by the
// default, which are about the upstreams' tools; the same for rate limits.
func TestProxyToolRules(t *testing.T) {
	e, err := NewEngine([]Rule{
		{Name: "contractors-nothing", Deny: true, Groups: []string{"contractors"}},
		{Name: "no-salary-searches", Deny: true, Tools: []string{"search_tools"}, Condition: expr(t, `contains(lower(args.query), "salary")`)},
		{Name: "no-search-on-ops", Deny: true, Tools: []string{"search_*"}, Endpoints: []string{"ops"}},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	search := func(endpoint string) *Item {
		return &Item{Kind: KindTool, Name: "search_tools", Endpoint: endpoint, Proxy: true}
	}
	for _, c := range []struct {
		name     string
		it       *Item
		who      string
		query    string
		allow    bool
		rule     string
		upstream bool
	}{
		{"no rule names it: allowed whatever the default", search("ide"), "alice", "open a pull request", true, "none", false},
		{"a rule without tools does not apply", search("ide"), "bob", "open a pull request", true, "none", false},
		{"a condition on the query", search("ide"), "alice", "the Salary sheet", false, "no-salary-searches", false},
		{"a rule for an endpoint", search("ops"), "alice", "read a file", false, "no-search-on-ops", false},
		{"an upstream tool is as before", &Item{Kind: KindTool, Name: "fs__read", Upstream: "fs", Endpoint: "ide"}, "alice", "", false, "default", true},
	} {
		p := alice
		if c.who == "bob" {
			p = bob
		}
		args, _ := json.Marshal(map[string]string{"query": c.query})
		d := e.Decide(p, c.it, args)
		if d.Allow != c.allow || d.Rule != c.rule {
			t.Errorf("%s: %+v, want allow %v by %s", c.name, d, c.allow, c.rule)
		}
	}
	l, err := NewLimiter([]Limit{
		{Name: "everything", Rate: rate.Limit(0.001), Burst: 1},
		{Name: "searches", Rate: rate.Limit(0.001), Burst: 2, Tools: []string{"search_tools"}, Per: []string{"principal"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var refused string
	for range 3 {
		if _, ref := l.Admit(alice, search("ide")); ref != nil {
			refused = ref.Limit
		}
	}
	if refused != "searches" {
		t.Errorf("the third search was refused by %q, want the limit that names search_tools", refused)
	}
}

// TestProxyToolChain: through the chain, a search is audited like a call (its query
// hashed, or redacted in full mode), a denied one is refused with the policy's error
// (not answered as an unknown tool: the proxy lists it), and an allowed one is answered.
func TestProxyToolChain(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.jsonl")
	au, err := NewAuditor(AuditOptions{File: audit, Arguments: "full", Redact: []string{"query"}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	rules, err := NewEngine([]Rule{{Name: "contractors-no-search", Deny: true, Tools: []string{"search_tools"}, Groups: []string{"contractors"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	c := &Chain{Rules: rules, Audit: au, Log: zerolog.Nop()}
	defer c.Close()
	r := router.New(router.Options{}, zerolog.Nop())
	r.UseLocalTools(c.Stages()...)
	if err := r.SetEndpoints([]router.Endpoint{{Name: "ide", Search: true}}); err != nil {
		t.Fatal(err)
	}
	call := func(who string) (json.RawMessage, error) {
		p := alice
		if who == "bob" {
			p = bob
		}
		return r.Call(context.Background(), &router.Request{Method: mcp.MethodToolsCall, Endpoint: "ide", Principal: p,
			Params: json.RawMessage(`{"name":"search_tools","arguments":{"query":"the salary sheet"}}`)})
	}
	if res, err := call("alice"); err != nil || !strings.Contains(string(res), `"structuredContent":{"tools":[]}`) {
		t.Errorf("alice's search: %s %v", res, err)
	}
	if _, err := call("bob"); err == nil || !strings.Contains(err.Error(), `denied by rule "contractors-no-search"`) {
		t.Errorf("bob's search: %v", err)
	}
	c.Close()
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("audit:\n%s", b)
	}
	t.Logf("%s", lines[0])
	for i, want := range []string{`"principal":"alice"`, `"principal":"bob"`} {
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &rec); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(lines[i], want) || rec["name"] != "search_tools" || rec["endpoint"] != "ide" || rec["method"] != "tools/call" ||
			strings.Contains(lines[i], "salary") {
			t.Errorf("record %d: %s", i, lines[i])
		}
	}
	if !strings.Contains(lines[0], `"decision":"allow"`) || !strings.Contains(lines[1], `"decision":"deny"`) || !strings.Contains(lines[1], `"rule":"contractors-no-search"`) {
		t.Errorf("decisions:\n%s", b)
	}
}
