package router

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

// countingGuard hides tools whose name contains "secret" from everyone but admins, and
// counts how often it is asked.
type countingGuard struct{ asked atomic.Int32 }

func (g *countingGuard) Visible(req *Request, t *Target) bool {
	g.asked.Add(1)
	return !strings.Contains(t.Name, "secret") || req.Principal.InGroup("admins")
}

// TestListViewsCachedPerPrincipalClass: a list asks the guard once per item for each
// catalogue change and class of principal, not on every request.
func TestListViewsCachedPerPrincipalClass(t *testing.T) {
	a := newFake("a", "x", "secret_y", "z")
	r := newTestRouter(t, Options{}, nsUp{a, "a"})
	g := &countingGuard{}
	r.SetGuard(g)
	alice := &principal.Principal{Name: "alice", Groups: []string{"admins"}}
	bob := &principal.Principal{Name: "bob"}
	list := func(p *principal.Principal) string {
		t.Helper()
		res, err := r.Call(t.Context(), &Request{Method: mcp.MethodToolsList, Principal: p})
		if err != nil {
			t.Fatal(err)
		}
		return string(res)
	}
	for i := 0; i < 3; i++ {
		if l := list(bob); strings.Contains(l, "secret") || !strings.Contains(l, "a__x") {
			t.Fatalf("bob's list: %s", l)
		}
	}
	if n := g.asked.Load(); n != 3 {
		t.Errorf("three lists for bob asked the guard %d times, want 3 (once per tool)", n)
	}
	if l := list(alice); !strings.Contains(l, "a__secret_y") {
		t.Fatalf("alice's list: %s", l)
	}
	if n := g.asked.Load(); n != 6 {
		t.Errorf("another principal class: %d asks, want 6", n)
	}
	// A catalogue change replaces the snapshot and its views.
	a.cat.Tools = a.cat.Tools[:2]
	r.rebuild()
	if l := list(bob); strings.Contains(l, "a__z") {
		t.Fatalf("bob's list after the change: %s", l)
	}
	if n := g.asked.Load(); n != 8 {
		t.Errorf("after a change: %d asks, want 8", n)
	}
}

// identityGuard shows tools whose name contains "secret" to API keys in the group
// admins only: what a principal sees depends on its identity, not its name alone.
type identityGuard struct{}

func (identityGuard) Visible(req *Request, t *Target) bool {
	p := req.Principal
	return !strings.Contains(t.Name, "secret") || (p != nil && p.Via == principal.ViaAPIKey && p.InGroup("admins"))
}

// TestListViewsPerIdentity: the cached views never merge two principals that rules can
// tell apart: the same name established two ways (an API key and a token), the same
// name with other groups, and a name that spells another's name and groups.
func TestListViewsPerIdentity(t *testing.T) {
	a := newFake("a", "x", "secret_y")
	r := newTestRouter(t, Options{}, nsUp{a, "a"})
	r.SetGuard(identityGuard{})
	list := func(p *principal.Principal) bool {
		t.Helper()
		res, err := r.Call(t.Context(), &Request{Method: mcp.MethodToolsList, Principal: p})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(res), "a__secret_y")
	}
	key := (&principal.Principal{Name: "alice", Via: principal.ViaAPIKey, Groups: []string{"admins"}}).Identify()
	token := (&principal.Principal{Name: "alice", Via: principal.ViaJWT, Issuer: "https://idp.example.com", Groups: []string{"admins"}}).Identify()
	keyNoGroup := (&principal.Principal{Name: "alice", Via: principal.ViaAPIKey}).Identify()
	spelled := (&principal.Principal{Name: "alice\x00admins", Via: principal.ViaAPIKey}).Identify()
	for i, c := range []struct {
		p    *principal.Principal
		want bool
	}{
		{key, true}, {token, false}, {key, true}, {keyNoGroup, false}, {spelled, false}, {token, false}, {key, true},
	} {
		if got := list(c.p); got != c.want {
			t.Errorf("list %d, %s %q: sees the secret tool = %v, want %v", i, c.p.ID(), c.p.Groups, got, c.want)
		}
	}
	classes := map[string]bool{}
	for _, p := range []*principal.Principal{key, token, keyNoGroup, spelled,
		{Name: "alice", Groups: []string{"a", "b"}}, {Name: "alice", Groups: []string{"a\x00b"}}, {Name: "alice\x001:a"}} {
		classes[principalClass(&Request{Principal: p})] = true
	}
	if len(classes) != 7 {
		t.Errorf("seven principals, %d classes", len(classes))
	}
	if principalClass(&Request{}) != "" || principalClass(&Request{Principal: &principal.Principal{}}) == "" {
		t.Error("nobody in particular and a principal without a name share a class")
	}
}
