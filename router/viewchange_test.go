package router

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/clock"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

// viewClient is a Viewer whose subscribers are views; it records what each was told.
type viewClient struct {
	views []View
	mu    sync.Mutex
	got   map[any][]string // by View.ID; "*" for what Notify told the whole client
}

func (c *viewClient) record(id any, method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.got == nil {
		c.got = map[any][]string{}
	}
	c.got[id] = append(c.got[id], method)
}

func (c *viewClient) Notify(method string, _ json.RawMessage) { c.record("*", method) }
func (c *viewClient) Cork()                                   {}
func (c *viewClient) Uncork()                                 {}
func (c *viewClient) Request(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	return nil, nil
}
func (c *viewClient) Views() []View { return c.views }
func (c *viewClient) NotifyChanged(method string, changed func(View) bool) {
	for _, v := range c.views {
		if changed(v) {
			c.record(v.ID, method)
		}
	}
}

// take returns what each view was told since the last take.
func (c *viewClient) take() map[any][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.got
	c.got = nil
	return got
}

// hideSecretFromAll is a guard that hides every *secret* tool, admins' too.
type hideSecretFromAll struct{}

func (hideSecretFromAll) Visible(_ *Request, t *Target) bool {
	return !strings.Contains(t.Name, "secret")
}

// TestListChangedToChangedViews: a change of the endpoints, of the guard or of the
// catalogue tells each subscriber of the lists that changed for it (its endpoint's view,
// as its principal sees it, with the tools it activated) and no other; a client that is
// not a Viewer is told of every list that may have changed, as before.
func TestListChangedToChangedViews(t *testing.T) {
	clk := clock.NewFake()
	r := New(Options{NotifyDelay: 10 * time.Millisecond, Clock: clk, Ranker: &wordRanker{}}, zerolog.Nop())
	gh := newFake("github", "create_pull_request", "secret_tokens")
	fs := newFake("fs", "read_file")
	mem := newFake("memory", "create_entities")
	for _, u := range []*fakeUpstream{gh, fs, mem} {
		r.Add(u, u.name)
	}
	r.SetGuard(&countingGuard{}) // *secret* hidden but from admins
	if err := r.SetEndpoints([]Endpoint{
		{Name: "code", Upstreams: []string{"github"}},
		{Name: "files", Upstreams: []string{"fs"}},
		{Name: "find", Search: true},
	}); err != nil {
		t.Fatal(err)
	}
	r.Start(context.Background())
	r.rebuild()
	bob, ann := &principal.Principal{Name: "bob"}, &principal.Principal{Name: "ann", Groups: []string{"admins"}}
	active := &Active{}
	active.Restore([]string{"memory__create_entities"})
	sessions := &viewClient{views: []View{
		{ID: "code-bob", Endpoint: "code", Principal: bob},
		{ID: "files-bob", Endpoint: "files", Principal: bob},
		{ID: "find-bob", Endpoint: "find", Principal: bob, Active: active},
	}}
	listens := &viewClient{views: []View{ // two subscriptions of one modern session
		{ID: "default-bob", Principal: bob},
		{ID: "default-ann", Principal: ann},
	}}
	plain := &recClient{}
	r.Subscribe(sessions)
	r.Subscribe(listens)
	r.Subscribe(plain)
	settle := func() map[any][]string {
		t.Helper()
		clk.Advance(20 * time.Millisecond)
		got := map[any][]string{}
		maps.Copy(got, sessions.take())
		maps.Copy(got, listens.take())
		return got
	}
	tools := []string{mcp.NotificationToolsListChanged}
	expect := func(step string, got map[any][]string, want map[any][]string) {
		t.Helper()
		if !maps.EqualFunc(got, want, slices.Equal[[]string]) {
			t.Errorf("%s: told %v, want %v", step, got, want)
		}
	}

	// 1. A reload changes one endpoint: its sessions are told, the others are not; the
	// plain client is told of every kind, as before.
	if err := r.SetEndpoints([]Endpoint{
		{Name: "code", Upstreams: []string{"github"}},
		{Name: "files", Upstreams: []string{"fs", "memory"}},
		{Name: "find", Search: true},
	}); err != nil {
		t.Fatal(err)
	}
	expect("files changed", settle(), map[any][]string{"files-bob": tools})
	if n := plain.count(); n != 3 {
		t.Errorf("the plain client got %v, want the three kinds", plain.got)
	}

	// 2. A new guard hides what only admins saw: ann is told, bob is not (he never saw
	// it, in any endpoint: find's search_tools names the same services for him).
	r.Reguard(hideSecretFromAll{}, TargetTool)
	expect("the guard changed", settle(), map[any][]string{"default-ann": tools})

	// 3. An upstream's tools change: every view with memory in it is told (find's
	// search_tools counts memory's tools), code is not.
	mem.cat.Tools = append(mem.cat.Tools, json.RawMessage(`{"name":"search_nodes","inputSchema":{"type":"object"}}`))
	r.rebuild()
	expect("memory changed", settle(), map[any][]string{"files-bob": tools, "find-bob": tools, "default-bob": tools, "default-ann": tools})

	// 4. An activated tool's definition changes: the session that activated it is told.
	mem.cat.Tools[0] = json.RawMessage(`{"name":"create_entities","description":"Create entities","inputSchema":{"type":"object"}}`)
	other := &viewClient{views: []View{{ID: "find-ann", Endpoint: "find", Principal: ann}}}
	r.Subscribe(other)
	r.rebuild()
	got := settle()
	maps.Copy(got, other.take())
	expect("an activated tool changed", got, map[any][]string{"files-bob": tools, "find-bob": tools, "default-bob": tools, "default-ann": tools})

	// 5. Nothing changed for anyone: nobody is told.
	r.rebuild()
	expect("nothing changed", settle(), map[any][]string{})
}

// BenchmarkRebuildViews is one catalogue change of the corpus of real servers' tools
// (331 tools, the guard hiding some), with no session subscribed and with 1,000 (a
// third on the listen path, a third on a search-mode endpoint with tools activated, a
// third through an endpoint that filters; ten principal classes): the rebuild, and the
// comparison of every session's view before and after, against the rebuild alone.
func BenchmarkRebuildViews(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) { benchRebuildViews(b, n) })
	}
}

func benchRebuildViews(b *testing.B, sessions int) {
	r, _ := corpusRouter(b, 1)
	if err := r.SetEndpoints([]Endpoint{{Name: "ide", Search: true, Limit: 5}, {Name: "gh", Upstreams: []string{"github", "gitlab"}}}); err != nil {
		b.Fatal(err)
	}
	endpoints := []string{"", "ide", "gh"}
	for i := range sessions {
		p := &principal.Principal{Name: "user" + string(rune('a'+i%10))}
		v := View{ID: i, Endpoint: endpoints[i%3], Principal: p}
		if v.Endpoint == "ide" {
			v.Active = &Active{}
			v.Active.Restore([]string{"github__create_issue", "memory__read_graph"})
		}
		r.Subscribe(&viewClient{views: []View{v}})
	}
	var up *fakeUpstream
	for _, m := range r.all() {
		if m.name == "memory" {
			up = m.up.(*fakeUpstream)
		}
	}
	orig := up.cat.Tools
	changed := append(slices.Clone(orig), json.RawMessage(`{"name":"forget","description":"Forget an entity","inputSchema":{"type":"object"}}`))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			up.cat.Tools = changed
		} else {
			up.cat.Tools = orig
		}
		r.rebuild()
	}
}
