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
