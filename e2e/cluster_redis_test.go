package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// replicaID is the id replica r logs itself by (its first "replica" field).
func replicaID(t *testing.T, r *topology.Replica) string {
	t.Helper()
	var id string
	waitUntil(t, "replica "+r.Name+" to log its id", func() bool {
		if m := replicaIDLog.FindStringSubmatch(r.Output.String()); m != nil {
			id = m[1]
		}
		return id != ""
	})
	return id
}

// redisHas reports whether the topology's Redis has key.
func redisHas(t *testing.T, topo *topology.Topology, key string) bool {
	t.Helper()
	v, err := topo.Redis.Command("EXISTS", key)
	return err == nil && v == ":1"
}

// tsCalls is a TypeScript SDK client calling a tool in a loop (testdata/ts-calls.mjs).
type tsCalls struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	sid    string
	after  atomic.Int64 // calls made since "mark"
	last   chan string  // its last line, once it ends
	stderr strings.Builder
}

func startTSCalls(t *testing.T, url string) *tsCalls {
	t.Helper()
	c := &tsCalls{cmd: exec.Command("node", filepath.Join("testdata", "ts-calls.mjs"), url), last: make(chan string, 1)}
	c.cmd.Stderr = &c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "session ") {
		t.Fatalf("TS client: %q\n%s", sc.Text(), c.stderr.String())
	}
	c.sid = strings.TrimPrefix(sc.Text(), "session ")
	go func() {
		var last string
		for sc.Scan() {
			last = sc.Text()
			if n, ok := strings.CutPrefix(last, "after "); ok {
				v, _ := strconv.ParseInt(n, 10, 64)
				c.after.Store(v)
			}
		}
		c.last <- last
	}()
	return c
}

// TestClusterRedisRestarted: redis-server restarted without persistence under three
// replicas with a cluster key, HAProxy round-robin in front, while a Go SDK client and a
// TypeScript SDK client call a tool continuously. Redis comes back empty: no registry,
// no session hashes. No session is answered 404, by any replica: a raw session that no
// other replica has looked up yet, pinged at every replica directly as soon as Redis
// answers again (the ones that do not hold it reach its holder at the address sealed
// into its id); a session adopted before the restart (its first holder killed), pinged
// at every replica (they wait for its adopter to write its hash again); and every call
// of both SDK clients, whose session ids do not change. The replicas register again and
// write their sessions' hashes again.
func TestClusterRedisRestarted(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, testUpstream("t", "t", nil, ""), adoptKey)
	ctx := ctxT(t, 180*time.Second)
	open := func(name string) string {
		c := &httpWire{t: t, url: topo.URL()}
		init := c.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"`+name+`","version":"1"}}}`, nil)
		sid := init.header.Get("Mcp-Session-Id")
		if init.status != 200 || sid == "" {
			t.Fatalf("initialize: %d %s", init.status, init.body)
		}
		return sid
	}
	// A session adopted before the restart: its owner killed and restarted on its
	// address, then a ping at another replica, which adopts it.
	adopted := open("adopted")
	restarted := restartOwner(t, topo, adopted, true)
	adopter := topo.Replicas[(restarted+1)%len(topo.Replicas)]
	if status := rawPing(t, "http://"+adopter.Addr+"/mcp", adopted); status != 200 {
		t.Fatalf("a ping of the session whose owner was killed, at %s: HTTP %d", adopter.Name, status)
	}
	plain := open("plain") // only its owner has seen it

	// The SDK clients, calling until told to stop.
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-redis", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: topo.URL(), MaxRetries: 10},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	goSID := cs.ID()
	var (
		goCalls, goAfter atomic.Int64
		marked, stop     atomic.Bool
		goFailures       []string
		wg               sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"n": i}})
			if err != nil || res.IsError {
				goFailures = append(goFailures, fmt.Sprintf("call %d: %v %q", i, err, textOf(res)))
			}
			goCalls.Add(1)
			if marked.Load() {
				goAfter.Add(1)
			}
		}
	}()
	ts := startTSCalls(t, topo.URL())
	waitUntil(t, "the Go SDK client's first calls", func() bool { return goCalls.Load() >= 5 })

	ids := make([]string, len(topo.Replicas))
	for i, r := range topo.Replicas {
		ids[i] = replicaID(t, r)
	}
	if err := topo.Redis.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := topo.Redis.Start(); err != nil {
		t.Fatal(err)
	}
	marked.Store(true)
	io.WriteString(ts.stdin, "mark\n")

	// At once: every replica answers both sessions (the non-holders first).
	for _, sid := range []string{plain, adopted} {
		holder := adopter
		if sid == plain {
			holder = ownerOf(t, topo, sid)
		}
		order := slices.DeleteFunc(slices.Clone(topo.Replicas), func(r *topology.Replica) bool { return r == holder })
		for _, r := range append(order, holder) {
			if status := rawPing(t, "http://"+r.Addr+"/mcp", sid); status != 200 {
				t.Errorf("right after the restart of redis: a ping of the %s session at %s: HTTP %d, want 200",
					map[bool]string{true: "adopted", false: "plain"}[sid == adopted], r.Name, status)
			}
		}
	}

	// The replicas register again and write their sessions' hashes again.
	waitUntil(t, "every replica registered again, and every session's hash written again", func() bool {
		for _, id := range ids {
			if !redisHas(t, topo, "mcp-proxy:replica:"+id) {
				return false
			}
		}
		for _, sid := range []string{plain, adopted, goSID, ts.sid} {
			if !redisHas(t, topo, sessionKey(sid)) {
				return false
			}
		}
		return true
	})
	waitUntil(t, "both SDK clients' calls after the restart", func() bool { return goAfter.Load() >= 50 && ts.after.Load() >= 50 })
	stop.Store(true)
	io.WriteString(ts.stdin, "stop\n")
	wg.Wait()
	var last string
	select {
	case last = <-ts.last:
	case <-ctx.Done():
		t.Fatal("the TS client did not end")
	}
	var got struct {
		Calls, After                int
		Failures                    []string
		SessionBefore, SessionAfter string
	}
	if err := json.Unmarshal([]byte(last), &got); err != nil {
		t.Fatalf("TS client output %q: %v\n%s", last, err, ts.stderr.String())
	}
	if len(goFailures) > 0 {
		t.Errorf("the Go SDK client's calls: %d of %d failed, the first: %s", len(goFailures), goCalls.Load(), goFailures[0])
	}
	if cs.ID() != goSID {
		t.Errorf("the Go SDK client's session id changed: %q → %q", goSID, cs.ID())
	}
	if len(got.Failures) > 0 {
		t.Errorf("the TS client's calls: %d of %d failed, the first: %s", len(got.Failures), got.Calls, got.Failures[0])
	}
	if got.SessionBefore != ts.sid || got.SessionAfter != ts.sid {
		t.Errorf("the TS client's session id: %q before, %q after, want %q", got.SessionBefore, got.SessionAfter, ts.sid)
	}
	for _, sid := range []string{plain, adopted, goSID, ts.sid} {
		if status := rawPing(t, topo.URL(), sid); status != 200 {
			t.Errorf("at the end: a ping through HAProxy: HTTP %d", status)
		}
	}
	t.Logf("through the restart of redis: Go SDK client %d calls (%d after), TS client %d calls (%d after), none failed",
		goCalls.Load(), goAfter.Load(), got.Calls, got.After)
	if t.Failed() {
		t.Log(topo.Logs())
	}
}
