package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

func sp(s string) *string { return &s }

// filteredRouter is a router over ups whose upstreams are filtered as filters says (by
// upstream name), rebuilt once; its log goes to logBuf when that is not nil.
func filteredRouter(t testing.TB, filters map[string]Filter, logBuf *syncBuf, ups ...nsUp) *Router {
	t.Helper()
	log := zerolog.Nop()
	if logBuf != nil {
		log = zerolog.New(logBuf)
	}
	r := New(Options{}, log)
	for _, x := range ups {
		r.Add(x.u, x.ns)
	}
	for name, f := range filters {
		if err := r.SetFilter(name, f); err != nil {
			t.Fatal(err)
		}
	}
	r.rebuild()
	return r
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func toolNames(r *Router) string {
	var names []string
	for _, tl := range r.Tools() {
		names = append(names, tl.Name+"="+tl.OriginalName)
	}
	return strings.Join(names, " ")
}

// errText is the error a call gets, as text ("" when it succeeds).
func errText(t *testing.T, r *Router, method, params string) string {
	t.Helper()
	_, err := call(t, r, method, params)
	if err == nil {
		return ""
	}
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("%s %s: not a JSON-RPC error: %v", method, params, err)
	}
	return je.Error()
}

func TestFilterIncludeExclude(t *testing.T) {
	gh := newFake("gh", "create_issue", "create_admin", "get_me", "delete_repo", "list_x")
	r := filteredRouter(t, map[string]Filter{"gh": {Tools: Selection{
		Include: []string{"create_*", "get_*"},
		Exclude: []string{"*_admin"},
	}}}, nil, nsUp{gh, "gh"})
	if got, want := toolNames(r), "gh__create_issue=create_issue gh__get_me=get_me"; got != want {
		t.Fatalf("listed %q, want %q", got, want)
	}
	res, err := call(t, r, "tools/list", `{}`)
	if err != nil || bytes.Contains(res, []byte("delete_repo")) || bytes.Contains(res, []byte("create_admin")) {
		t.Fatalf("tools/list: %s %v", res, err)
	}
	// A left-out tool does not exist: the same answer as a name nobody ever listed.
	for _, name := range []string{"gh__delete_repo", "gh__create_admin", "gh__list_x"} {
		got := errText(t, r, "tools/call", `{"name":"`+name+`"}`)
		if want := UnknownError(TargetTool, name).Error(); got != want {
			t.Errorf("calling %s: %q, want %q", name, got, want)
		}
	}
	if gh.lastCall() != nil {
		t.Fatalf("a left-out tool reached the upstream: %s", gh.lastCall().Params)
	}
	if got := errText(t, r, "tools/call", `{"name":"gh__get_me"}`); got != "" {
		t.Fatalf("an included tool: %s", got)
	}
	// No include: every tool but the excluded ones.
	r = filteredRouter(t, map[string]Filter{"gh": {Tools: Selection{Exclude: []string{"create_*", "?et_me"}}}}, nil, nsUp{gh, "gh"})
	if got, want := toolNames(r), "gh__delete_repo=delete_repo gh__list_x=list_x"; got != want {
		t.Fatalf("listed %q, want %q", got, want)
	}
}

// recMiddleware records the calls routed through the middleware chain.
type recMiddleware struct {
	mu    sync.Mutex
	calls []Call
}

func (m *recMiddleware) wrap(next Handler) Handler {
	return func(ctx context.Context, c *Call, reply Reply) {
		m.mu.Lock()
		m.calls = append(m.calls, *c)
		m.mu.Unlock()
		next(ctx, c, reply)
	}
}

func TestFilterRenameRoutesToOriginal(t *testing.T) {
	gh := newFake("gh", "create_issue", "get_me")
	r := New(Options{}, zerolog.Nop())
	r.Add(gh, "gh")
	mw := &recMiddleware{}
	r.Use(mw.wrap)
	if err := r.SetFilter("gh", Filter{Tools: Selection{Overrides: map[string]Override{
		"create_issue": {Name: "new_issue"},
	}}}); err != nil {
		t.Fatal(err)
	}
	r.rebuild()
	if got, want := toolNames(r), "gh__get_me=get_me gh__new_issue=create_issue"; got != want {
		t.Fatalf("listed %q, want %q", got, want)
	}
	if got, want := errText(t, r, "tools/call", `{"name":"gh__create_issue"}`), UnknownError(TargetTool, "gh__create_issue").Error(); got != want {
		t.Errorf("the old exposed name: %q, want %q", got, want)
	}
	params := `{"name":"gh__new_issue","arguments":{"title":"<x>","n":9007199254740993},"_meta":{"k":"v"}}`
	if _, err := call(t, r, "tools/call", params); err != nil {
		t.Fatal(err)
	}
	want := `{"name":"create_issue","arguments":{"title":"<x>","n":9007199254740993},"_meta":{"k":"v"}}`
	if got := string(gh.lastCall().Params); got != want {
		t.Errorf("forwarded params\n got %s\nwant %s", got, want)
	}
	// Middlewares (the policy) decide on the exposed name; the audit's original_name is
	// the upstream's, as are the params going upstream.
	if len(mw.calls) != 1 {
		t.Fatalf("middleware saw %d calls", len(mw.calls))
	}
	if c := mw.calls[0]; c.Target.Name != "gh__new_issue" || c.Target.Original != "create_issue" || c.Target.Upstream != "gh" || string(c.Params) != want {
		t.Errorf("middleware saw %+v with params %s", c.Target, c.Params)
	}
}

func TestFilterOverridePreservesOtherBytes(t *testing.T) {
	gh := newFake("gh")
	orig := `{"name":"t","title":"Old","description":"old","inputSchema":{"type":"object","properties":{"a":{"description":"<b>&amp;"}}},` +
		`"annotations":{"readOnlyHint":true},"x-ext":[1,2.50,"\u00e9"],"_meta":{"k":{"z":1,"a":2}}}`
	gh.cat.Tools = []json.RawMessage{json.RawMessage(orig), json.RawMessage(`{"name":"u","inputSchema":{"type":"object"}}`)}
	r := filteredRouter(t, map[string]Filter{"gh": {Tools: Selection{Overrides: map[string]Override{
		"t": {Title: sp("New <title>"), Description: sp(`Opens <x> & "y"` + "\n\u2028")},
		"u": {Name: "renamed", Title: sp("Added"), Description: sp("")},
	}}}}, nil, nsUp{gh, "gh"})
	tools := r.Tools()
	if len(tools) != 2 {
		t.Fatalf("tools: %s", toolNames(r))
	}
	want := `{"name":"gh__renamed","inputSchema":{"type":"object"},"title":"Added","description":""}`
	if got := string(tools[0].Raw); got != want {
		t.Errorf("renamed tool\n got %s\nwant %s", got, want)
	}
	want = `{"name":"gh__t","title":"New <title>","description":"Opens <x> & \"y\"\n\u2028","inputSchema":{"type":"object","properties":{"a":{"description":"<b>&amp;"}}},` +
		`"annotations":{"readOnlyHint":true},"x-ext":[1,2.50,"\u00e9"],"_meta":{"k":{"z":1,"a":2}}}`
	if got := string(tools[1].Raw); got != want {
		t.Errorf("overridden tool\n got %s\nwant %s", got, want)
	}
	if d, _, _ := jsonx.GetString(tools[1].Raw, "description"); d != "Opens <x> & \"y\"\n\u2028" {
		t.Errorf("description decodes to %q", d)
	}
	// The upstream's catalogue is not edited in place.
	if string(gh.cat.Tools[0]) != orig {
		t.Errorf("the upstream's catalogue changed: %s", gh.cat.Tools[0])
	}
	// tools/list serves the edited items.
	res, err := call(t, r, "tools/list", `{}`)
	if err != nil || !bytes.Contains(res, tools[1].Raw) || !bytes.Contains(res, tools[0].Raw) {
		t.Errorf("tools/list: %s %v", res, err)
	}
}

// TestFilterCollisions: a rename onto a name that is taken is resolved by the router's
// rule for every collision, deterministically, and both tools stay callable.
func TestFilterCollisions(t *testing.T) {
	t.Run("within an upstream the upstream's own name wins", func(t *testing.T) {
		ts := newFake("t", "echo", "fail", "zzz")
		logs := &syncBuf{}
		f := map[string]Filter{"t": {Tools: Selection{Overrides: map[string]Override{"echo": {Name: "fail"}, "zzz": {Name: "aaa"}}}}}
		r := filteredRouter(t, f, logs, nsUp{ts, "t"})
		tools := r.Tools()
		if len(tools) != 3 || tools[0].Name != "t__aaa" || tools[0].OriginalName != "zzz" ||
			tools[1].Name != "t__fail" || tools[1].OriginalName != "fail" ||
			!strings.HasPrefix(tools[2].Name, "t__fail_") || tools[2].OriginalName != "echo" || !ValidName(tools[2].Name, 128) {
			t.Fatalf("listed %s", toolNames(r))
		}
		if !strings.Contains(logs.String(), `"tool":"echo","exposed":"`+tools[2].Name+`"`) ||
			!strings.Contains(logs.String(), "collides with another tool of the same upstream") {
			t.Errorf("collision not logged clearly:\n%s", logs)
		}
		for exposed, orig := range map[string]string{"t__fail": "fail", tools[2].Name: "echo", "t__aaa": "zzz"} {
			if _, err := call(t, r, "tools/call", `{"name":"`+exposed+`"}`); err != nil {
				t.Fatal(err)
			}
			if n, _, _ := jsonx.GetString(ts.lastCall().Params, "name"); n != orig {
				t.Errorf("%s reached the upstream as %q, want %q", exposed, n, orig)
			}
		}
		again := filteredRouter(t, f, nil, nsUp{ts, "t"})
		if toolNames(again) != toolNames(r) {
			t.Errorf("not deterministic: %s then %s", toolNames(r), toolNames(again))
		}
	})
	t.Run("between upstreams the earlier one wins", func(t *testing.T) {
		a, b := newFake("a", "x"), newFake("b", "y")
		for _, order := range [][]nsUp{{{a, ""}, {b, ""}}, {{b, ""}, {a, ""}}} {
			r := filteredRouter(t, map[string]Filter{"b": {Tools: Selection{Overrides: map[string]Override{"y": {Name: "x"}}}}}, nil, order...)
			tools := r.Tools()
			if len(tools) != 2 || tools[0].Name != "x" || tools[0].Upstream != order[0].u.name || !strings.HasPrefix(tools[1].Name, "x_") {
				t.Fatalf("listed %s", toolNames(r))
			}
			for _, tl := range tools {
				if _, err := call(t, r, "tools/call", `{"name":"`+tl.Name+`"}`); err != nil {
					t.Fatal(err)
				}
				up := a
				if tl.Upstream == "b" {
					up = b
				}
				if n, _, _ := jsonx.GetString(up.lastCall().Params, "name"); n != tl.OriginalName {
					t.Errorf("%s reached %s as %q", tl.Name, tl.Upstream, n)
				}
			}
		}
	})
	t.Run("a rename onto a left-out name is free", func(t *testing.T) {
		ts := newFake("t", "echo", "fail")
		r := filteredRouter(t, map[string]Filter{"t": {Tools: Selection{Exclude: []string{"fail"},
			Overrides: map[string]Override{"echo": {Name: "fail"}}}}}, nil, nsUp{ts, "t"})
		if got := toolNames(r); got != "t__fail=echo" {
			t.Fatalf("listed %s", got)
		}
	})
	t.Run("a rename too long is shortened", func(t *testing.T) {
		ts := newFake("t", "echo")
		long := strings.Repeat("n", 128)
		r := filteredRouter(t, map[string]Filter{"t": {Tools: Selection{Overrides: map[string]Override{"echo": {Name: long}}}}}, nil, nsUp{ts, "t"})
		tools := r.Tools()
		if len(tools) != 1 || !ValidName(tools[0].Name, 128) || !strings.HasPrefix(tools[0].Name, "t__nnn") {
			t.Fatalf("listed %s", toolNames(r))
		}
	})
}

func TestFilterPrompts(t *testing.T) {
	ev := newFake("ev")
	ev.cat.Prompts = []json.RawMessage{
		json.RawMessage(`{"name":"greet","description":"Says hello","arguments":[{"name":"who"}]}`),
		json.RawMessage(`{"name":"secret_plan","description":"no"}`),
	}
	r := filteredRouter(t, map[string]Filter{"ev": {Prompts: Selection{
		Exclude:   []string{"secret_*"},
		Overrides: map[string]Override{"greet": {Name: "hello", Description: sp("Greets")}},
	}}}, nil, nsUp{ev, "ev"})
	res, err := call(t, r, "prompts/list", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"prompts":[{"name":"ev__hello","description":"Greets","arguments":[{"name":"who"}]}]}`; string(res) != want {
		t.Errorf("prompts/list\n got %s\nwant %s", res, want)
	}
	if got, want := errText(t, r, "prompts/get", `{"name":"ev__secret_plan"}`), UnknownError(TargetPrompt, "ev__secret_plan").Error(); got != want {
		t.Errorf("a left-out prompt: %q, want %q", got, want)
	}
	if _, err := call(t, r, "prompts/get", `{"name":"ev__hello","arguments":{"who":"Ann"}}`); err != nil {
		t.Fatal(err)
	}
	if got := string(ev.lastCall().Params); got != `{"name":"greet","arguments":{"who":"Ann"}}` {
		t.Errorf("prompts/get sent %s", got)
	}
	if _, err := call(t, r, "completion/complete", `{"ref":{"type":"ref/prompt","name":"ev__hello"},"argument":{"name":"who","value":"A"}}`); err != nil {
		t.Fatal(err)
	}
	if got := string(ev.lastCall().Params); got != `{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"who","value":"A"}}` {
		t.Errorf("completion sent %s", got)
	}
	if got := errText(t, r, "completion/complete", `{"ref":{"type":"ref/prompt","name":"ev__secret_plan"},"argument":{"name":"x","value":""}}`); !strings.Contains(got, "Unknown prompt") {
		t.Errorf("completion of a left-out prompt: %q", got)
	}
}

// refetched is cat as a new fetch gives it: new lists, with tool added.
func refetched(cat *upstream.Catalogue, tool string) *upstream.Catalogue {
	c := *cat
	c.Tools = append(slices.Clip(slices.Clone(cat.Tools)), json.RawMessage(tool))
	return &c
}

// TestFilterPreparedOncePerFetch: a filtered list is worked out when the upstream's list
// changes, not on every rebuild; a block for a tool the upstream does not list is logged
// once per fetch.
func TestFilterPreparedOncePerFetch(t *testing.T) {
	gh, other := newFake("gh", "a", "b"), newFake("other", "o")
	logs := &syncBuf{}
	r := filteredRouter(t, map[string]Filter{"gh": {Tools: Selection{Exclude: []string{"b"}, Overrides: map[string]Override{
		"a": {Description: sp("A")}, "later": {Name: "soon"},
	}}}}, logs, nsUp{gh, "gh"}, nsUp{other, "other"})
	prepared := func() *named { return &r.all()[0].prepared[filterTools].items[0] }
	first := prepared()
	for i := range 3 { // other upstreams' changes
		other.cat = refetched(other.cat, fmt.Sprintf(`{"name":"o%d"}`, i))
		r.rebuild()
	}
	if n := strings.Count(logs.String(), `"tool":"later"`); n != 1 {
		t.Errorf("warned %d times over four rebuilds of one fetch; want once:\n%s", n, logs)
	}
	if prepared() != first {
		t.Errorf("the filtered list was worked out again without a new fetch")
	}
	// A new fetch without it: one more warning.
	gh.cat = refetched(gh.cat, `{"name":"c"}`)
	r.rebuild()
	if n := strings.Count(logs.String(), `"tool":"later"`); n != 2 {
		t.Errorf("warned %d times over two fetches; want twice:\n%s", n, logs)
	}
	// A new fetch that lists the tool: the block applies, and nothing is logged.
	gh.cat = refetched(gh.cat, `{"name":"later","description":"l"}`)
	r.rebuild()
	if n := strings.Count(logs.String(), `"tool":"later"`); n != 2 {
		t.Errorf("warned though the upstream lists it now:\n%s", logs)
	}
	if got, want := toolNames(r), "gh__a=a gh__c=c gh__soon=later other__o=o other__o0=o0 other__o1=o1 other__o2=o2"; got != want {
		t.Errorf("listed %s, want %s", got, want)
	}
}

func TestSetFilterErrors(t *testing.T) {
	r := New(Options{}, zerolog.Nop())
	r.Add(newFake("gh", "a"), "gh")
	for _, tc := range []struct {
		up   string
		f    Filter
		want string
	}{
		{"nope", Filter{}, "no such upstream"},
		{"gh", Filter{Tools: Selection{Include: []string{`bad\`}}}, "lone backslash"},
		{"gh", Filter{Prompts: Selection{Exclude: []string{""}}}, "empty pattern"},
		{"gh", Filter{Tools: Selection{Include: []string{}}}, "selects nothing"},
		{"gh", Filter{Tools: Selection{Overrides: map[string]Override{"a": {Name: "a b"}}}}, "invalid new name"},
	} {
		if err := r.SetFilter(tc.up, tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetFilter(%q, %+v) = %v, want %q", tc.up, tc.f, err, tc.want)
		}
	}
}
