package router

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/clock"
	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

func TestExposedName(t *testing.T) {
	long := strings.Repeat("x", 140)
	tests := []struct {
		ns, sep, name string
		max           int
		want          string // "" means: check the rules only
	}{
		{"gh", "__", "create_issue", 128, "gh__create_issue"},
		{"", "__", "create_issue", 128, "create_issue"},
		{"fs", ".", "read", 128, "fs.read"},
		{"gh", "__", "has space", 128, ""},
		{"gh", "__", "slash/name", 128, ""},
		{"gh", "__", long, 128, ""},
		{"gh", "__", strings.Repeat("y", 60), 64, ""},
		{"gh", "__", "ünïcode", 128, ""},
	}
	for _, tt := range tests {
		got := exposedName(tt.ns, tt.sep, tt.name, tt.max)
		if tt.want != "" && got != tt.want {
			t.Errorf("exposedName(%q,%q,%q) = %q, want %q", tt.ns, tt.sep, tt.name, got, tt.want)
		}
		if !ValidName(got, tt.max) {
			t.Errorf("exposedName(%q,%q,%q) = %q breaks the name rules (max %d)", tt.ns, tt.sep, tt.name, got, tt.max)
		}
		if again := exposedName(tt.ns, tt.sep, tt.name, tt.max); again != got {
			t.Errorf("not deterministic: %q then %q", got, again)
		}
	}
	// Two long names that share a 128-character prefix stay distinct.
	a := exposedName("ns", "__", long+"a", 128)
	b := exposedName("ns", "__", long+"b", 128)
	if a == b {
		t.Errorf("shortened names collide: %q", a)
	}
}

func newTestRouter(t testing.TB, opts Options, ups ...struct {
	u  *fakeUpstream
	ns string
}) *Router {
	r := New(opts, zerolog.Nop())
	for _, x := range ups {
		r.Add(x.u, x.ns)
	}
	r.rebuild()
	return r
}

type nsUp = struct {
	u  *fakeUpstream
	ns string
}

func call(t testing.TB, r *Router, method, params string) (json.RawMessage, error) {
	t.Helper()
	return r.Call(context.Background(), &Request{Method: method, Params: json.RawMessage(params)})
}

func TestMergeOrderAndCollisions(t *testing.T) {
	a := newFake("a", "zeta", "alpha", "shared")
	b := newFake("b", "shared", "beta")
	r := newTestRouter(t, Options{}, nsUp{a, ""}, nsUp{b, ""})
	var names []string
	for _, tl := range r.Tools() {
		names = append(names, tl.Name+"@"+tl.Upstream)
	}
	got := strings.Join(names, " ")
	// Config order, then name; the later upstream's colliding tool is disambiguated.
	if !strings.HasPrefix(got, "alpha@a shared@a zeta@a beta@b shared_") || !strings.HasSuffix(got, "@b") {
		t.Fatalf("merged order: %s", got)
	}
	alt := r.Tools()[4].Name
	if _, err := call(t, r, "tools/call", `{"name":"shared"}`); err != nil {
		t.Fatal(err)
	}
	if a.lastCall() == nil || b.lastCall() != nil {
		t.Fatalf("shared must go to a")
	}
	if _, err := call(t, r, "tools/call", `{"name":"`+alt+`"}`); err != nil {
		t.Fatal(err)
	}
	sent := b.lastCall()
	if sent == nil {
		t.Fatalf("%s must go to b", alt)
	}
	if n, _, _ := jsonx.GetString(sent.Params, "name"); n != "shared" {
		t.Errorf("original name not restored: %s", sent.Params)
	}
}

func TestRouteRestoresNameAndKeepsParams(t *testing.T) {
	a := newFake("gh", "create_issue")
	r := newTestRouter(t, Options{}, nsUp{a, "gh"})
	params := `{"name":"gh__create_issue","arguments":{"title":"<x>","n":9007199254740993},"_meta":{"k":"v"},"extra":[1,2]}`
	if _, err := call(t, r, "tools/call", params); err != nil {
		t.Fatal(err)
	}
	want := `{"name":"create_issue","arguments":{"title":"<x>","n":9007199254740993},"_meta":{"k":"v"},"extra":[1,2]}`
	if got := string(a.lastCall().Params); got != want {
		t.Errorf("forwarded params\n got %s\nwant %s", got, want)
	}
	_, err := call(t, r, "tools/call", `{"name":"create_issue"}`)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("unprefixed name must be unknown, got %v", err)
	}
}

func TestPagination(t *testing.T) {
	var tools []string
	for i := 0; i < 25; i++ {
		tools = append(tools, string(rune('a'+i)))
	}
	r := newTestRouter(t, Options{PageSize: 10}, nsUp{newFake("u", tools...), "u"})
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		params := `{}`
		if cursor != "" {
			params = `{"cursor":"` + cursor + `"}`
		}
		res, err := call(t, r, "tools/list", params)
		if err != nil {
			t.Fatal(err)
		}
		var lr struct {
			Tools      []struct{ Name string }
			NextCursor string
		}
		json.Unmarshal(res, &lr)
		for _, tl := range lr.Tools {
			got = append(got, tl.Name)
		}
		if lr.NextCursor == "" {
			break
		}
		cursor = lr.NextCursor
		if page > 5 {
			t.Fatal("too many pages")
		}
	}
	if len(got) != 25 || got[0] != "u__a" || got[24] != "u__y" {
		t.Errorf("pages: %v", got)
	}
	// A cursor from another list, a forged one and a truncated one are all refused.
	res, _ := call(t, r, "tools/list", `{}`)
	next, _, _ := jsonx.GetString(res, "nextCursor")
	for _, bad := range []string{`{"cursor":"` + next[:len(next)-2] + `"}`, `{"cursor":"AAAAAAAAAA"}`, `{"cursor":42}`} {
		_, err := call(t, r, "tools/list", bad)
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("cursor %s: got %v, want -32602", bad, err)
		}
	}
	if _, err := call(t, r, "prompts/list", `{"cursor":"`+next+`"}`); err == nil {
		t.Errorf("a tools cursor was accepted by prompts/list")
	}
}

func TestURIRouting(t *testing.T) {
	a := newFake("a")
	a.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"file:///same","name":"s"}`), json.RawMessage(`{"uri":"a://x","name":"x"}`)}
	a.cat.Templates = []json.RawMessage{json.RawMessage(`{"uriTemplate":"item://{id}","name":"t"}`)}
	b := newFake("b")
	b.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"file:///same","name":"s2"}`)}
	b.cat.Templates = []json.RawMessage{json.RawMessage(`{"uriTemplate":"item://special/{id}","name":"t2"}`)}
	r := newTestRouter(t, Options{}, nsUp{a, "a"}, nsUp{b, "b"})
	snap := r.snap.Load()

	cases := []struct {
		uri, owner, orig string
	}{
		{"a://x", "a", "a://x"},
		{"file:///same", "a", "file:///same"},
		{"item://42", "a", "item://42"},
		{"item://special/42", "b", "item://special/42"}, // more specific template wins
	}
	for _, c := range cases {
		o, orig, _ := snap.resolveURI(c.uri, c.uri)
		if o == nil || o.name != c.owner || orig != c.orig {
			t.Errorf("resolveURI(%s) = %v %q, want %s %q", c.uri, o, orig, c.owner, c.orig)
		}
	}
	// Other spellings of a listed URI reach its owner as the owner listed it, and every
	// spelling is a form the policy sees.
	for _, uri := range []string{"FILE:///same", "file:///x/../same", "file:///./s%61me"} {
		tg, o, err := r.resolveResource(&Request{}, uri)
		if err != nil || o.name != "a" || tg.Original != "file:///same" || tg.Name != "file:///same" || !slices.Contains(tg.Forms, uri) {
			t.Errorf("resolveResource(%s) = %+v, %v, %v", uri, tg, o, err)
		}
	}
	if _, _, err := r.resolveResource(&Request{}, "file:///x%2F..%2Fsame"); err == nil {
		t.Errorf("a dot segment behind %%2F was resolved")
	}
	// b's duplicate URI is exposed under a proxy URI that routes back to b's original.
	var exposed string
	for _, res := range snap.resources {
		if res.owner.name == "b" {
			exposed = res.exposed
		}
	}
	if exposed == "" || exposed == "file:///same" {
		t.Fatalf("duplicate URI not rewritten: %q", exposed)
	}
	if o, orig, _ := snap.resolveURI(exposed, exposed); o == nil || o.name != "b" || orig != "file:///same" {
		t.Errorf("rewritten URI routes to %v %q", o, orig)
	}
	// Rules see the original URI of a rewritten one (and a deny on it hides it).
	tg, _, err := r.resolveResource(&Request{}, exposed)
	if err != nil || tg.Name != exposed || !slices.Contains(tg.Forms, "file:///same") {
		t.Errorf("resolveResource(%s) = %+v, %v; want the original among its forms", exposed, tg, err)
	}
}

func TestTemplateMatching(t *testing.T) {
	tests := []struct {
		tmpl, uri string
		match     bool
	}{
		{"test://template/{id}/data", "test://template/42/data", true},
		{"test://template/{id}/data", "test://template/4/2/data", false},
		{"file:///{+path}", "file:///a/b/c.txt", true},
		{"search://q{?query,limit}", "search://q?query=x&limit=2", true},
		{"repo://{owner}/{repo}", "repo://a/b", true},
		{"repo://{owner}/{repo}", "other://a/b", false},
	}
	for _, tt := range tests {
		ut, ok := compileTemplate(tt.tmpl)
		if !ok {
			t.Fatalf("compile %s", tt.tmpl)
		}
		if got := ut.match(tt.uri); got != tt.match {
			t.Errorf("%s ~ %s = %v, want %v", tt.tmpl, tt.uri, got, tt.match)
		}
	}
}

type recClient struct {
	mu  sync.Mutex
	got []string
}

func (c *recClient) Notify(method string, _ json.RawMessage) {
	c.mu.Lock()
	c.got = append(c.got, method)
	c.mu.Unlock()
}
func (c *recClient) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}
func (c *recClient) Cork()   {}
func (c *recClient) Uncork() {}
func (c *recClient) Request(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	return nil, nil
}

// TestListChangedCoalescedAndNotStale checks that a burst of catalogue changes gives one
// notification per kind, and that a client that subscribed after a change is not told
// about it.
func TestListChangedCoalescedAndNotStale(t *testing.T) {
	a, b := newFake("a", "x"), newFake("b", "y")
	clk := clock.NewFake()
	r := New(Options{NotifyDelay: 20 * time.Millisecond, Clock: clk}, zerolog.Nop())
	r.Add(a, "a")
	r.Add(b, "b")
	early := &recClient{}
	r.Subscribe(early)
	r.rebuild() // both upstreams' tools appear
	late := &recClient{}
	r.Subscribe(late) // sees the catalogue as rebuilt: not news for it
	a.cat.Tools = append(a.cat.Tools, json.RawMessage(`{"name":"x2","inputSchema":{"type":"object"}}`))
	r.rebuild()
	clk.Advance(10 * time.Millisecond)
	if early.count() != 0 {
		t.Fatalf("notified within the delay: %v", early.got)
	}
	clk.Advance(20 * time.Millisecond) // the burst's one timer runs
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d notifications still scheduled after the burst's", n)
	}
	early.mu.Lock()
	if len(early.got) != 1 || early.got[0] != "notifications/tools/list_changed" {
		t.Errorf("early client got %v, want one tools/list_changed for the burst", early.got)
	}
	early.mu.Unlock()
	late.mu.Lock()
	if len(late.got) != 1 {
		t.Errorf("late client got %v, want only the change after it subscribed", late.got)
	}
	late.mu.Unlock()
}
