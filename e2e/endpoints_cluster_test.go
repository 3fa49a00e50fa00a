package e2e

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// TestClusterEndpointActivation: a session of an endpoint in search mode keeps what its
// searches activated in the session's Redis hash, so that when the replica that holds it
// dies (kill -9), the replica that adopts it lists the same tools, under the same
// session id, on the same endpoint.
func TestClusterEndpointActivation(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, testUpstream("t", "t", nil, "")+everythingUpstreamEra("ev", "ev", "legacy")+`
endpoint "ide" {
  mode = "search"
}
`, adoptKey)
	var changed atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-cluster-endpoint", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) },
	})
	url := strings.TrimSuffix(topo.URL(), "/mcp") + "/mcp/ide"
	cs, err := client.Connect(ctxT(t, 90*time.Second), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: 10},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting through HAProxy: %v", err)
	}
	defer cs.Close()
	ctx := ctxT(t, 90*time.Second)
	sid := cs.ID()
	owner := ownerOf(t, topo, sid)
	found := searchNames(t, ctx, cs, "structured content", 2)
	if len(found) == 0 {
		t.Fatal("the search found nothing")
	}
	waitChanged(t, &changed, 1)
	waitUntil(t, "the activated tools in redis", func() bool {
		// The helper reads the reply's first line: a bulk string's length ("$2" is []).
		got, _ := topo.Redis.Command("HGET", sessionKey(sid), "a")
		return strings.HasPrefix(got, "$") && got != "$2" && got != "$-1"
	})
	before := listed(t, ctx, cs)

	owner.Kill()
	after := listed(t, ctx, cs)
	if cs.ID() != sid {
		t.Fatalf("the session id changed: %q → %q", sid, cs.ID())
	}
	if !slices.Equal(after, before) {
		t.Errorf("after the owner's kill -9 the session lists %v, before %v", after, before)
	}
	for _, n := range found {
		if !slices.Contains(after, n) {
			t.Errorf("the adopting replica lost activated %s: %v", n, after)
		}
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: found[0]}); err != nil {
		t.Errorf("calling an activated tool on the adopting replica: %v %q", err, textOf(res))
	}
}
