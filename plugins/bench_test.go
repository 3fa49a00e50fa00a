package plugins

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// BenchmarkStageNotSelected measures what a configured plugin costs a call it does not
// select (another tool, another principal): the decision is taken on the proxy's side
// and must allocate nothing and take no lock. "none" is the chain without the plugin.
func BenchmarkStageNotSelected(b *testing.B) {
	alice := &principal.Principal{Name: "alice", Groups: []string{"dev"}}
	call := toolCall("gh__issue", `{"name":"issue","arguments":{"q":1}}`, alice)
	var sink int
	next := func(_ context.Context, c *router.Call, reply router.Reply) { reply(c.Params, nil) }
	reply := func(res json.RawMessage, _ error) { sink += len(res) }
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		match policy.Match
		stage bool
	}{
		{"none", policy.Match{}, false},
		{"other-tools", policy.Match{Tools: []string{"db__*", "shell__run"}}, true},
		{"other-principals", policy.Match{Tools: []string{"gh__*"}, Principals: []string{"bob", "ci-*"}}, true},
		{"other-upstreams", policy.Match{Upstreams: []string{"db"}}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := router.Handler(next)
			if c.stage {
				h = testInstance(b, Spec{Match: c.match}, hookBefore|hookAfter, &fakePlugin{}).stage(next)
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				h(ctx, call, reply)
			}
		})
	}
	_ = sink
}
