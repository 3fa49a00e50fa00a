package e2e

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// restartOwner stops the replica that holds session sid (SIGTERM, or kill -9 when kill)
// and starts a new process on the same address at once, as a rolling restart,
// systemd's Restart=always or a pod that keeps its address does; it returns the index
// of the replica restarted.
func restartOwner(t *testing.T, topo *topology.Topology, sid string, kill bool) int {
	t.Helper()
	owner := ownerOf(t, topo, sid)
	i := slices.Index(topo.Replicas, owner)
	if kill {
		owner.Kill()
	} else if err := owner.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := topo.StartReplica(i); err != nil {
		t.Fatal(err)
	}
	return i
}

// pingEverywhere pings session sid at every replica directly, the restarted one first,
// and twice through HAProxy, and reports each status that is not 200.
func pingEverywhere(t *testing.T, topo *topology.Topology, sid string, restarted int, what string) {
	t.Helper()
	order := []*topology.Replica{topo.Replicas[restarted]}
	for j, r := range topo.Replicas {
		if j != restarted {
			order = append(order, r)
		}
	}
	for _, r := range order {
		if status := rawPing(t, "http://"+r.Addr+"/mcp", sid); status != http.StatusOK {
			t.Errorf("%s: a ping of the session at %s: HTTP %d, want 200", what, r.Name, status)
		}
	}
	for range 2 {
		if status := rawPing(t, topo.URL(), sid); status != http.StatusOK {
			t.Errorf("%s: a ping of the session through HAProxy: HTTP %d, want 200", what, status)
		}
	}
}

// TestClusterReplicaRestartedSameAddress: the replica that holds a session is stopped
// (SIGTERM, then in a second round kill -9) and a new process started on the same
// address at once, while the old incarnation's registry entry may still name that
// address. The session goes on under the same id: the new process and the other
// replicas answer its requests (one of them adopts it), for a raw client and for the Go
// SDK client, whose calls keep working on the same session.
func TestClusterReplicaRestartedSameAddress(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, testUpstream("t", "t", nil, ""), adoptKey)
	ctx := ctxT(t, 120*time.Second)
	for round, kill := range []bool{false, true} {
		what := map[bool]string{false: "SIGTERM and restart", true: "kill -9 and restart"}[kill]
		c := &httpWire{t: t, url: topo.URL()}
		init := c.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"restarted","version":"1"}}}`, nil)
		c.sid = init.header.Get("Mcp-Session-Id")
		if init.status != http.StatusOK || c.sid == "" {
			t.Fatalf("initialize: %d %s", init.status, init.body)
		}
		i := restartOwner(t, topo, c.sid, kill)
		pingEverywhere(t, topo, c.sid, i, what)
		r := c.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__echo","arguments":{"after":"restart"}}}`, nil)
		if r.status != http.StatusOK {
			t.Errorf("%s: a call of the raw client's session: HTTP %d %s", what, r.status, r.body)
		}

		// A Go SDK client's session, held by whichever replica, through the same.
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e-restart", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: topo.URL(), MaxRetries: 10},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("connecting through HAProxy: %v", err)
		}
		defer cs.Close()
		sid := cs.ID()
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"round": round}}); err != nil || res.IsError {
			t.Fatalf("%s: the Go SDK client's call before: %v %q", what, err, textOf(res))
		}
		restartOwner(t, topo, cs.ID(), kill)
		for j := range 4 {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"after": j}})
			if err != nil || res.IsError {
				t.Fatalf("%s: the Go SDK client's call %d after the restart of its session's replica: %v %q", what, j, err, textOf(res))
			}
		}
		if cs.ID() != sid {
			t.Fatalf("%s: the Go SDK client's session id changed: %q → %q", what, sid, cs.ID())
		}
	}
}
