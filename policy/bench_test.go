package policy

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// benchChain is a realistic chain: a dozen rules (globs, groups, annotations, one
// argument condition), two combined rate limits and an in-flight cap, and an audit
// record per call written to a JSONL file.
func benchChain(b *testing.B, auditFile bool) *Chain { return benchChainCond(b, auditFile, true) }

func benchChainCond(b *testing.B, auditFile, condition bool) *Chain {
	rules := []Rule{
		{Name: "deny-destructive-contractors", Deny: true, Groups: []string{"contractors"}, Annotations: map[string]bool{"destructiveHint": true}},
		{Name: "deny-admin", Deny: true, Tools: []string{"*admin*", "*__delete_*"}},
		{Name: "fs-under-srv", Tools: []string{"fs__*"}},
		{Name: "github", Upstreams: []string{"github"}, Groups: []string{"dev"}},
		{Name: "docs", Prompts: []string{"docs__*"}},
		{Name: "public", Resources: []string{"file:///public/*"}},
	}
	if condition {
		rules[2].Condition = expr(b, `under(args.path, "/srv/data")`)
	}
	for i := 0; i < 6; i++ {
		rules = append(rules, Rule{Name: "filler", Tools: []string{"other" + string(rune('a'+i)) + "__*"}, Principals: []string{"svc-*"}})
	}
	e, err := NewEngine(rules, false)
	if err != nil {
		b.Fatal(err)
	}
	l, err := NewLimiter([]Limit{
		{Name: "per-principal", Rate: rate.Limit(1e9), Burst: 1 << 30, Per: []string{"principal"}},
		{Name: "per-tool", Rate: rate.Limit(1e9), Burst: 1 << 30, Per: []string{"principal", "tool"}, Upstreams: []string{"fs"}},
	}, map[string]int{"fs": 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(l.Close)
	opts := AuditOptions{}
	if auditFile {
		opts.File = filepath.Join(b.TempDir(), "audit.jsonl")
	}
	a, err := NewAuditor(opts, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	return &Chain{Rules: e, Limits: l, Audit: a}
}

func benchAdmit(b *testing.B, auditFile, condition bool) {
	benchAdmitAs(b, auditFile, condition, alice)
}

func benchAdmitAs(b *testing.B, auditFile, condition bool, p *principal.Principal) {
	c := benchChainCond(b, auditFile, condition)
	req := &router.Request{Method: "tools/call", Principal: p,
		Params: json.RawMessage(`{"name":"fs__read_file","arguments":{"path":"/srv/data/reports/2026/q3.csv"}}`)}
	t := &router.Target{Kind: router.TargetTool, Name: "fs__read_file", Original: "read_file", Upstream: "fs",
		Raw: json.RawMessage(`{"name":"fs__read_file","annotations":{"readOnlyHint":true}}`)}
	res := json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
	h := compose(c, func(_ context.Context, _ *router.Call, reply router.Reply) { reply(res, nil) })
	call := &router.Call{Method: req.Method, Params: req.Params, Target: t, Request: req}
	var failed error
	done := func(_ json.RawMessage, err error) { failed = err }
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h(ctx, call, done)
		if failed != nil {
			b.Fatal(failed)
		}
	}
}

// compose builds the chain's stages around end, as router.Use does.
func compose(c *Chain, end router.Handler) router.Handler {
	h := end
	st := c.Stages()
	for i := len(st) - 1; i >= 0; i-- {
		h = st[i](h)
	}
	return h
}

// BenchmarkChainAdmit is the whole chain on the hot path: decide (with an argument
// condition), two rate limits and an in-flight slot, and the audit record (hash of the
// arguments, encoding) without a file.
func BenchmarkChainAdmit(b *testing.B) { benchAdmit(b, false, true) }

// BenchmarkChainAdmitIdentified is BenchmarkChainAdmit for a principal as an
// authenticator gives it (an API key's, its identity computed once): rules match it by
// name and identity, its bucket and its audit record carry the identity.
func BenchmarkChainAdmitIdentified(b *testing.B) {
	p := (&principal.Principal{Name: "alice", Groups: []string{"dev"}, Via: principal.ViaAPIKey}).Identify()
	benchAdmitAs(b, false, true, p)
}

// BenchmarkChainAdmitNoCondition is the chain when no rule has an argument condition.
func BenchmarkChainAdmitNoCondition(b *testing.B) { benchAdmit(b, false, false) }

// BenchmarkChainAdmitAuditFile adds the write of each record to a JSONL file.
func BenchmarkChainAdmitAuditFile(b *testing.B) { benchAdmit(b, true, true) }

// BenchmarkVisible is one list item's visibility check (a tools/list runs it per tool).
func BenchmarkVisible(b *testing.B) {
	c := benchChain(b, false)
	req := &router.Request{Principal: alice}
	t := &router.Target{Kind: router.TargetTool, Name: "github__create_issue", Upstream: "github",
		Raw: json.RawMessage(`{"name":"github__create_issue"}`)}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if !c.Visible(req, t) {
			b.Fatal("hidden")
		}
	}
}
