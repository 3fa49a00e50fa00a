package policy

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

const testIssuer = "https://idp.example.com"

// Principals of the same name, established four ways: four people.
var (
	keyAlice   = (&principal.Principal{Name: "alice", Via: principal.ViaAPIKey, Groups: []string{"dev"}}).Identify()
	jwtAlice   = (&principal.Principal{Name: "alice", Via: principal.ViaJWT, Issuer: testIssuer, Groups: []string{"dev"}}).Identify()
	otherAlice = (&principal.Principal{Name: "alice", Via: principal.ViaJWT, Issuer: "https://other.example", Groups: []string{"dev"}}).Identify()
	stdioAlice = (&principal.Principal{Name: "alice", Via: principal.ViaStdio}).Identify()
	bareAlice  = &principal.Principal{Name: "alice"} // established no known way (a test, `tools --as`)
)

// TestPrincipalPatterns: a bare name matches the name however the principal was
// established (as before identities); an identity matches only the principals
// established that way (and by that issuer); "jwt:NAME" without an issuer matches any
// issuer's subject (a configuration puts its issuer in, see config).
func TestPrincipalPatterns(t *testing.T) {
	all := []*principal.Principal{keyAlice, jwtAlice, otherAlice, stdioAlice, bareAlice, bob}
	for _, tc := range []struct {
		pats []string
		want []*principal.Principal
	}{
		{[]string{"alice"}, []*principal.Principal{keyAlice, jwtAlice, otherAlice, stdioAlice, bareAlice}},
		{[]string{"ali*"}, []*principal.Principal{keyAlice, jwtAlice, otherAlice, stdioAlice, bareAlice}},
		{[]string{"api_key:alice"}, []*principal.Principal{keyAlice}},
		{[]string{"api_key:*"}, []*principal.Principal{keyAlice}},
		{[]string{"jwt:alice"}, []*principal.Principal{jwtAlice, otherAlice}},
		{[]string{"jwt:" + testIssuer + "#alice"}, []*principal.Principal{jwtAlice}},
		{[]string{"jwt:" + testIssuer + "#a*"}, []*principal.Principal{jwtAlice}},
		{[]string{"jwt:" + testIssuer + "#bob"}, nil},
		{[]string{"stdio:alice"}, []*principal.Principal{stdioAlice}},
		{[]string{"api_key:alice", "stdio:alice"}, []*principal.Principal{keyAlice, stdioAlice}},
		{[]string{"api_key:bob"}, nil},
		{[]string{"bob", "jwt:alice"}, []*principal.Principal{jwtAlice, otherAlice, bob}},
		{[]string{"anonymous:anonymous"}, nil},
	} {
		w, err := newWho(tc.pats, nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.pats, err)
		}
		for _, p := range all {
			want := false
			for _, q := range tc.want {
				want = want || q == p
			}
			if got := w.matches(p); got != want {
				t.Errorf("%q matches %s = %v, want %v", tc.pats, p.ID(), got, want)
			}
		}
		if w.matches(nil) {
			t.Errorf("%q matches nobody in particular", tc.pats)
		}
	}
	anon, _ := newWho([]string{"anonymous:anonymous"}, nil)
	if !anon.matches(principal.Anonymous) {
		t.Error("anonymous:anonymous does not match the anonymous principal")
	}
	both, _ := newWho([]string{"jwt:alice"}, []string{"ops"})
	if both.matches(jwtAlice) {
		t.Error("a principals and groups pattern matched without the group")
	}
	if _, err := newWho([]string{`api_key:a\`}, nil); err == nil {
		t.Error("a bad name pattern after the prefix was accepted")
	}
}

// TestRulesByIdentity: a rule about the API key alice does not decide for the token
// subject alice, in calls and in lists; conditions see principal.identity and
// principal.via.
func TestRulesByIdentity(t *testing.T) {
	e, err := NewEngine([]Rule{
		{Name: "keys-no-delete", Deny: true, Tools: []string{"*delete*"}, Principals: []string{"api_key:alice"}},
		{Name: "jwt-alice", Tools: []string{"*"}, Principals: []string{"jwt:" + testIssuer + "#alice"}},
		{Name: "stdio-by-condition", Tools: []string{"*"}, Condition: expr(t, `principal.via == "stdio" && principal.identity == "stdio:alice"`)},
		{Name: "keys-read", Tools: []string{"*read*"}, Principals: []string{"api_key:*"}},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    *principal.Principal
		tool string
		want bool
		rule string
	}{
		{keyAlice, "fs__read", true, "keys-read"},
		{keyAlice, "fs__delete", false, "keys-no-delete"},
		{keyAlice, "fs__write", false, "default"},
		{jwtAlice, "fs__delete", true, "jwt-alice"},
		{jwtAlice, "fs__write", true, "jwt-alice"},
		{otherAlice, "fs__write", false, "default"}, // another issuer's alice
		{stdioAlice, "fs__delete", true, "stdio-by-condition"},
		{bareAlice, "fs__read", false, "default"},
	} {
		d := e.Decide(tc.p, tool(tc.tool, "fs", ""), nil)
		if d.Allow != tc.want || d.Rule != tc.rule {
			t.Errorf("%s calls %s: %+v, want allow=%v by %q", tc.p.ID(), tc.tool, d, tc.want, tc.rule)
		}
		if v := e.Visible(tc.p, tool(tc.tool, "fs", "")); tc.tool == "fs__delete" && v != (tc.p != keyAlice) {
			t.Errorf("%s sees %s: %v", tc.p.ID(), tc.tool, v)
		}
	}
}

// TestLimitsByIdentity: per = ["principal"] keeps a bucket per identity (the API key
// alice and the token subject alice never share one), and a limit's principals select
// by identity.
func TestLimitsByIdentity(t *testing.T) {
	l, err := NewLimiter([]Limit{
		{Name: "each", Rate: rate.Limit(0.001), Burst: 1, Per: []string{"principal"}},
		{Name: "keys", Rate: rate.Limit(0.001), Burst: 2, Principals: []string{"api_key:*"}, Tools: []string{"gh__*"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	call := func(p *principal.Principal, tool string) string {
		_, ref := l.Admit(p, &Item{Kind: KindTool, Name: tool, Upstream: strings.Split(tool, "__")[0]})
		if ref == nil {
			return "ok"
		}
		return ref.Limit
	}
	for i, c := range []struct {
		p          *principal.Principal
		tool, want string
	}{
		{keyAlice, "fs__read", "ok"},
		{keyAlice, "fs__read", "each"}, // the key's bucket is empty
		{jwtAlice, "fs__read", "ok"},   // the token's alice has her own
		{otherAlice, "fs__read", "ok"}, // and another issuer's alice hers
		{stdioAlice, "fs__read", "ok"}, // and the stdio user hers
		{bareAlice, "fs__read", "ok"},  // and a principal of no known way
		{jwtAlice, "fs__read", "each"}, // each bucket holds one token
		{bob, "gh__x", "ok"},           // "keys" selects API keys only
		{bob, "gh__x", "each"},         //
	} {
		if got := call(c.p, c.tool); got != c.want {
			t.Errorf("call %d, %s %s: %s, want %s", i, c.p.ID(), c.tool, got, c.want)
		}
	}
	keyBob := (&principal.Principal{Name: "bob", Via: principal.ViaAPIKey}).Identify()
	keyCarol := (&principal.Principal{Name: "carol", Via: principal.ViaAPIKey}).Identify()
	keyDan := (&principal.Principal{Name: "dan", Via: principal.ViaAPIKey}).Identify()
	for i, c := range []struct {
		p    *principal.Principal
		want string
	}{{keyBob, "ok"}, {keyCarol, "ok"}, {keyDan, "keys"}} {
		if got := call(c.p, "gh__x"); got != c.want {
			t.Errorf("key call %d, %s: %s, want %s", i, c.p.ID(), got, c.want)
		}
	}
	keys := map[string]bool{}
	for _, p := range []*principal.Principal{keyAlice, jwtAlice, otherAlice, stdioAlice, bareAlice} {
		keys[l.limits[0].key(p, &Item{Kind: KindTool, Name: "x"})] = true
	}
	if len(keys) != 5 {
		t.Errorf("five identities named alice have %d bucket keys: %v", len(keys), keys)
	}
}

// TestReloadKeepsIdentityBuckets: a reload (a new limiter over the running one's store)
// keeps each identity's bucket, and keeps them apart.
func TestReloadKeepsIdentityBuckets(t *testing.T) {
	store := NewMemoryBuckets(0, 0)
	defer store.Close()
	limits := []Limit{{Name: "each", Rate: rate.Limit(0.001), Burst: 2, Per: []string{"principal"}}}
	old, err := NewLimiterWith(limits, nil, LimiterOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	it := &Item{Kind: KindTool, Name: "fs__read", Upstream: "fs"}
	for range 2 {
		if _, ref := old.Admit(keyAlice, it); ref != nil {
			t.Fatalf("before the reload: %+v", ref)
		}
	}
	reloaded, err := NewLimiterWith(limits, nil, LimiterOptions{Store: store, Previous: old})
	if err != nil {
		t.Fatal(err)
	}
	if _, ref := reloaded.Admit(keyAlice, it); ref == nil {
		t.Error("the reload refilled the API key alice's bucket")
	}
	for range 2 {
		if _, ref := reloaded.Admit(jwtAlice, it); ref != nil {
			t.Errorf("the token's alice pays for the key's: %+v", ref)
		}
	}
}

// TestAuditRecordsIdentity: the audit record carries the principal's name (as before)
// and its identity, for routed calls and for refused requests.
func TestAuditRecordsIdentity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := &config.Config{Audit: &config.Audit{File: path, Arguments: "none"},
		Policy: &config.Policy{DefaultAllow: true}}
	c, err := Build(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	stage := c.AuditStage(func(_ context.Context, _ *router.Call, reply router.Reply) {
		reply(json.RawMessage(`{"content":[]}`), nil)
	})
	for _, p := range []*principal.Principal{keyAlice, jwtAlice} {
		call := &router.Call{Method: "tools/call", Request: &router.Request{Method: "tools/call", Principal: p},
			Target: &router.Target{Kind: router.TargetTool, Name: "fs__read", Original: "read", Upstream: "fs"}}
		stage(context.Background(), call, func(json.RawMessage, error) {})
	}
	c.Refused(context.Background(), &router.Refusal{Methods: []string{"tools/call"}, Principal: jwtAlice, Reason: "bad"})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var r struct{ Principal, Identity, Decision string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Principal+" "+r.Identity+" "+r.Decision)
	}
	want := []string{"alice api_key:alice allow", "alice jwt:" + testIssuer + "#alice allow", "alice jwt:" + testIssuer + "#alice invalid"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
