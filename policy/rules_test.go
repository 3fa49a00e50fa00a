package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

func expr(t testing.TB, src string) hcl.Expression {
	t.Helper()
	e, diags := hclsyntax.ParseExpression([]byte(src), "test.hcl", hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		t.Fatalf("parse %q: %v", src, diags)
	}
	return e
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pat, s string
		want   bool
	}{
		{"fs__read_file", "fs__read_file", true},
		{"fs__read_file", "fs__read_files", false},
		{"fs__read_file", "FS__read_file", false}, // case-sensitive, like names
		{"fs__*", "fs__read_file", true},
		{"fs__*", "fs_", false},
		{"*", "", true},
		{"*__delete*", "gh__delete_repo", true},
		{"*__delete*", "gh__remove", false},
		{"file:///srv/*", "file:///srv/a/b/c.txt", true},
		{"file:///srv/*", "file:///etc/passwd", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a*b*b", "ab", false},
		{"a*b*b", "abxb", true},
		{`lit\*`, "lit*", true},
		{`lit\*`, "litx", false},
		{"*_file", "read_file", true},
		{"*_file", "file", false},
	} {
		g, err := CompileGlob(tc.pat)
		if err != nil {
			t.Fatalf("%q: %v", tc.pat, err)
		}
		if got := g.Match(tc.s); got != tc.want {
			t.Errorf("%q.Match(%q) = %v, want %v", tc.pat, tc.s, got, tc.want)
		}
	}
	for _, bad := range []string{"", `trailing\`} {
		if _, err := CompileGlob(bad); err == nil {
			t.Errorf("CompileGlob(%q) accepted", bad)
		}
	}
}

func TestUnder(t *testing.T) {
	for _, tc := range []struct {
		p, dir string
		want   bool
	}{
		{"/srv/data/a.txt", "/srv/data", true},
		{"/srv/data", "/srv/data", true},
		{"/srv/data/../../etc/passwd", "/srv/data", false},
		{"/srv/database", "/srv/data", false},
		{"srv/data/a", "/srv/data", false},
		{"file:///srv/data/x", "/srv/data", true},
		{"/srv/data/./x/../y", "/srv/data/", true},
		{"/anything", "/", true},
		{"/srv/data/\x00", "/srv/data", false},
		// file: URLs are percent-decoded before the check.
		{"file:///srv/data/%2e%2e/etc/passwd", "/srv/data", false},
		{"file:///srv/data/%2E%2E/etc/passwd", "/srv/data", false},
		{"file:///srv/data/.%2e/etc/passwd", "/srv/data", false},
		{"file:///srv/data/%2e%2e%2fetc/passwd", "/srv/data", false},
		{"file:///srv/data/%61.txt", "/srv/data", true},
		{"FILE:///srv/data/x", "/srv/data", true},
		{"file://localhost/srv/data/x", "/srv/data", true},
		{"file:/srv/data/x", "/srv/data", true},
		{"file://evil.example/srv/data/x", "/srv/data", false},
		{"file:///srv/data/x?y=/../..", "/srv/data", false},
		{"file:///srv/data/%zz", "/srv/data", false},
		{"file:///srv/data/%00", "/srv/data", false},
		{"http://host/srv/data/x", "/srv/data", false},
		// A backslash is a separator to some readers: never vouched for.
		{`/srv/data\..\..\etc\passwd`, "/srv/data", false},
		{"/srv/data/%2e%2e/etc", "/srv/data", true}, // a plain path is taken literally
	} {
		if got := Under(tc.p, tc.dir); got != tc.want {
			t.Errorf("Under(%q, %q) = %v, want %v", tc.p, tc.dir, got, tc.want)
		}
	}
}

var (
	alice = &principal.Principal{Name: "alice", Groups: []string{"dev"}}
	bob   = &principal.Principal{Name: "bob", Groups: []string{"contractors"}}
)

func tool(name, upstream, annotations string) *Item {
	raw := `{"name":"` + name + `"`
	if annotations != "" {
		raw += `,"annotations":` + annotations
	}
	return &Item{Kind: KindTool, Name: name, Upstream: upstream, Raw: json.RawMessage(raw + "}")}
}

func TestDecidePrecedenceAndMatchers(t *testing.T) {
	rules := []Rule{
		{Name: "contractors-read-only", Groups: []string{"contractors"}, Annotations: map[string]bool{"readOnlyHint": true}},
		{Name: "no-destructive", Deny: true, Annotations: map[string]bool{"destructiveHint": true}, Groups: []string{"contractors"}},
		{Name: "devs-fs", Tools: []string{"fs__*"}, Groups: []string{"dev"}},
		{Name: "fs-under-srv", Tools: []string{"fs__read_file"}, Principals: []string{"bob"},
			Condition: expr(t, `under(args.path, "/srv/data")`)},
		{Name: "no-etc", Deny: true, Tools: []string{"fs__*"}, Condition: expr(t, `startswith(args.path, "/etc")`)},
		{Name: "gh-upstream", Upstreams: []string{"github"}, Principals: []string{"alice"}},
		{Name: "docs-prompts", Prompts: []string{"docs__*"}},
		{Name: "public-resources", Resources: []string{"file:///public/*"}},
		{Name: "deny-secrets", Deny: true, Resources: []string{"*secret*"}},
	}
	e, err := NewEngine(rules, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		p    *principal.Principal
		it   *Item
		args string
		want bool
		rule string
	}{
		{"no rule: default deny", alice, tool("other__x", "other", ""), `{}`, false, "default"},
		{"group + glob", alice, tool("fs__write_file", "fs", `{"destructiveHint":true}`), `{"path":"/tmp/x"}`, true, "devs-fs"},
		{"deny condition beats allow", alice, tool("fs__write_file", "fs", ""), `{"path":"/etc/passwd"}`, false, "no-etc"},
		{"deny condition error denies", alice, tool("fs__write_file", "fs", ""), `{"path":["/etc"]}`, false, "no-etc"},
		{"annotation allow", bob, tool("x__list", "x", `{"readOnlyHint":true,"destructiveHint":false}`), `{}`, true, "contractors-read-only"},
		{"annotation default destructive denies", bob, tool("x__list2", "x", `{"readOnlyHint":true}`), `{}`, false, "no-destructive"},
		{"not read-only", bob, tool("x__mutate", "x", `{"readOnlyHint":false,"destructiveHint":false}`), `{}`, false, "default"},
		{"argument condition true", bob, tool("fs__read_file", "fs", `{"readOnlyHint":false,"destructiveHint":false}`), `{"path":"/srv/data/report.txt"}`, true, "fs-under-srv"},
		{"argument condition traversal", bob, tool("fs__read_file", "fs", `{"destructiveHint":false}`), `{"path":"/srv/data/../../etc/shadow"}`, false, "default"},
		// A deny rule whose condition cannot be checked denies (write can(...) or try(...)
		// in the condition to make a missing argument pass).
		{"argument missing", bob, tool("fs__read_file", "fs", `{"destructiveHint":false}`), `{}`, false, "no-etc"},
		{"principal glob", alice, tool("gh__issue", "github", ""), `{}`, true, "gh-upstream"},
		{"principal mismatch", bob, tool("gh__issue", "github", `{"destructiveHint":false}`), `{}`, false, "default"},
		{"prompt kind", bob, &Item{Kind: KindPrompt, Name: "docs__intro", Upstream: "docs"}, `{}`, true, "docs-prompts"},
		{"tool rule does not apply to prompt", alice, &Item{Kind: KindPrompt, Name: "fs__prompt", Upstream: "fs"}, `{}`, false, "default"},
		{"resource allowed", bob, &Item{Kind: KindResource, Name: "file:///public/a.txt", Upstream: "fs"}, ``, true, "public-resources"},
		{"resource deny wins", bob, &Item{Kind: KindResource, Name: "file:///public/secret.txt", Upstream: "fs"}, ``, false, "deny-secrets"},
		{"nil principal", nil, &Item{Kind: KindResource, Name: "file:///public/b", Upstream: "fs"}, ``, true, "public-resources"},
	} {
		d := e.Decide(tc.p, tc.it, json.RawMessage(tc.args))
		if d.Allow != tc.want || d.Rule != tc.rule {
			t.Errorf("%s: Decide = %+v, want allow=%v by %q", tc.name, d, tc.want, tc.rule)
		}
		if !d.Allow && d.Reason == "" {
			t.Errorf("%s: a denial without a reason", tc.name)
		}
	}
}

func TestVisible(t *testing.T) {
	e, err := NewEngine([]Rule{
		{Name: "fs", Tools: []string{"fs__*"}, Condition: expr(t, `under(args.path, "/srv")`)},
		{Name: "hide-admin", Deny: true, Tools: []string{"*admin*"}},
		{Name: "no-etc", Deny: true, Tools: []string{"*"}, Condition: expr(t, `startswith(args.path, "/etc")`)},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"fs__read", true},     // a conditional allow: callable with the right arguments
		{"fs__admin_x", false}, // an unconditional deny hides it
		{"other__tool", false}, // default deny
	} {
		if got := e.Visible(alice, tool(tc.name, "u", "")); got != tc.want {
			t.Errorf("Visible(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
	open, _ := NewEngine(nil, true)
	if !open.Visible(alice, tool("anything", "u", "")) || !open.Decide(nil, tool("anything", "u", ""), nil).Allow {
		t.Error("default allow with no rules hides or refuses")
	}
}

func TestCheckCondition(t *testing.T) {
	e, _ := NewEngine([]Rule{{Name: "x", Condition: expr(t, `length(args.s) + length(args.l) > 0`)}}, false)
	v := e.evalVars(alice, tool("t", "u", ""), json.RawMessage(`{"s":"héllo","l":[1,2,3]}`))
	for src, want := range map[string]bool{`length(args.s) == 5`: true, `length(args.l) == 3`: true, `contains(args.s, "ll")`: true} {
		if got, err := evalCondition(expr(t, src), v); err != nil || got != want {
			t.Errorf("%s = %v, %v", src, got, err)
		}
	}
	if d := CheckCondition(expr(t, `under(args.path, "/srv") && principal.name != "x" && item.kind == "tool"`)); d.HasErrors() {
		t.Errorf("valid condition refused: %v", d)
	}
	d := CheckCondition(expr(t, `env.HOME == "x"`))
	if !d.HasErrors() || !strings.Contains(d.Error(), `no "env"`) {
		t.Errorf("unknown variable: %v", d)
	}
	d = CheckCondition(expr(t, `file("x") == "y"`))
	if !d.HasErrors() || !strings.Contains(d.Error(), `no function "file"`) {
		t.Errorf("unknown function: %v", d)
	}
}

// Arguments a condition could not see as the upstream reads them (cty holds strings in
// normal form C and drops what it cannot convert) are refused by every rule with a
// condition, whatever try() would make of them.
func TestDecideRefusesArgumentsConditionsCannotSee(t *testing.T) {
	e, err := NewEngine([]Rule{
		{Name: "short-notes", Tools: []string{"*"}, Condition: expr(t, `try(length(args.note) < 20, true)`)},
		{Name: "under-cafe", Tools: []string{"read"}, Condition: expr(t, `under(args.path, "/srv/café")`)},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	it := &Item{Kind: KindTool, Name: "echo"}
	long := `"` + strings.Repeat("x", 30) + `"`
	if d := e.Decide(alice, it, json.RawMessage(`{"note":`+long+`}`)); d.Allow {
		t.Fatalf("a long note was allowed: %+v", d)
	}
	for _, args := range []string{
		`{"note":` + long + `,"\u212A":0}`, // the Kelvin sign: cty cannot hold this object
		`{"note":"e\u0301"}`,               // not NFC
		`{"note":"\ud800"}`,                // a lone surrogate
	} {
		if d := e.Decide(alice, it, json.RawMessage(args)); d.Allow || !strings.Contains(d.Reason, "cannot be checked") {
			t.Errorf("arguments %s: %+v; want refused as uncheckable", args, d)
		}
	}
	read := &Item{Kind: KindTool, Name: "read"}
	if d := e.Decide(alice, read, json.RawMessage(`{"note":"n","path":"/srv/caf\u00e9/a"}`)); !d.Allow {
		t.Errorf("an NFC path under the directory: %+v", d)
	}
	if d := e.Decide(alice, read, json.RawMessage(`{"note":"n","path":"/srv/cafe\u0301/a"}`)); d.Allow {
		t.Errorf("an NFD twin of the directory (another directory on disk) was allowed: %+v", d)
	}
}

// TestRuleEndpoints: a rule with endpoints applies to requests through them only, and
// "default" names requests through no endpoint block.
func TestRuleEndpoints(t *testing.T) {
	e, err := NewEngine([]Rule{
		{Name: "no-writes-on-review", Deny: true, Tools: []string{"*write*"}, Endpoints: []string{"review"}},
		{Name: "ide-only", Tools: []string{"*"}, Endpoints: []string{"ide", "review"}},
		{Name: "default-reads", Tools: []string{"*read*"}, Endpoints: []string{DefaultEndpoint}},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	p := &principal.Principal{Name: "alice"}
	for _, c := range []struct {
		tool, endpoint string
		allow          bool
		rule           string
	}{
		{"fs__write_file", "review", false, "no-writes-on-review"},
		{"fs__write_file", "ide", true, "ide-only"},
		{"fs__read_file", "review", true, "ide-only"},
		{"fs__read_file", "", true, "default-reads"},
		{"fs__write_file", "", false, "default"},
		{"fs__read_file", "other", false, "default"},
	} {
		it := &Item{Kind: KindTool, Name: c.tool, Upstream: "fs", Endpoint: c.endpoint}
		d := e.Decide(p, it, nil)
		if d.Allow != c.allow || d.Rule != c.rule {
			t.Errorf("%s through %q: %+v, want allow %v by %s", c.tool, c.endpoint, d, c.allow, c.rule)
		}
		if e.Visible(p, it) != c.allow {
			t.Errorf("%s through %q: visible %v", c.tool, c.endpoint, !c.allow)
		}
	}
}

// TestCheckEndpoints: a rule naming an endpoint that is not configured is an error at
// its endpoints attribute; "default" and patterns are fine.
func TestCheckEndpoints(t *testing.T) {
	at := hcl.Range{Filename: "p.hcl", Start: hcl.Pos{Line: 7}}
	cfg := &config.Config{Endpoints: []config.Endpoint{{Name: "review"}}, Policy: &config.Policy{Rules: []config.Rule{
		{Name: "ok", Endpoints: []string{"review", "default", "re*"}},
		{Name: "typo", Endpoints: []string{"reveiw"}, Ranges: map[string]hcl.Range{"endpoints": at}},
	}}}
	diags := Check(cfg)
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, `names endpoint "reveiw", which is not configured (endpoints: default, review`) ||
		diags[0].Subject.Start.Line != 7 {
		t.Errorf("diagnostics: %v", diags)
	}
}

// TestCheckLimitEndpoints: a rate_limit naming an endpoint that is not configured is an
// error at the line of its endpoints attribute, read from a file; "default" and
// patterns are fine.
func TestCheckLimitEndpoints(t *testing.T) {
	src := `upstream "fs" {
  command = ["fs"]
}
endpoint "review" {
}
policy {
  default = "allow"
  rate_limit "ok" {
    rate      = "1/s"
    endpoints = ["review", "default", "rev*"]
    per       = ["endpoint"]
  }
  rate_limit "typo" {
    rate      = "1/s"
    endpoints = ["reveiw"]
  }
}
`
	cfg, diags := config.Parse([]byte(src), "p.hcl", "/")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	diags = Check(cfg)
	if len(diags) != 1 || diags[0].Subject == nil || diags[0].Subject.Start.Line != 15 ||
		!strings.Contains(diags[0].Detail, `rate_limit "typo" names endpoint "reveiw", which is not configured (endpoints: default, review`) {
		t.Errorf("diagnostics: %v", diags)
	}
}
