package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// TestClusterRedisRestartedParked: what lives on one replica and is named by Redis
// alone, a modern call parked for its client's input (its requestState names the
// replica, whose address the registry holds) and a task (its hash in Redis names the
// replica), outlives a restart of redis-server without persistence. r0 parks a call of a
// modern client (a legacy upstream asks for sampling) and creates a task (npm
// server-everything); r0 is then paused (SIGSTOP) across the restart of Redis, so that
// it has not registered again, nor written its task again, when the retry and a
// tasks/get reach r1: r1 waits for r0 to come back (SIGCONT a second later) instead of
// answering that the call or the task is gone, and both complete. The task is then
// followed to its result from r2 (two hops: r1 holds the client's session).
func TestClusterRedisRestartedParked(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, everythingUpstreamEra("ev", "ev", "legacy")+npmUpstream("npm", "npm"), adoptKey)
	ctx := ctxT(t, 120*time.Second)
	at := func(r *topology.Replica) string { return "http://" + r.Addr + "/mcp" }
	r0, r1, r2 := topo.Replicas[0], topo.Replicas[1], topo.Replicas[2]

	parked := modernTool(ctx, t, at(r0), "ev__test_sampling", "")
	if parked.resultType != "input_required" || !strings.HasPrefix(parked.state, "r.") {
		t.Fatalf("parking a call on r0: want input_required with a handle naming a replica: %s", parked.raw)
	}
	a := openSession(ctx, t, r0, at(r0))
	taskID := createResearchTask(ctx, t, a)
	params := fmt.Sprintf(`{"taskId":%q}`, taskID)
	b := openSession(ctx, t, r1, at(r1)) // the client following the task: its session is r1's

	// r0 paused across the restart: Redis comes back empty, and r0 cannot register
	// again before the requests reach r1.
	if err := r0.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			r0.Cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume) // before the topology stops
	if err := topo.Redis.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := topo.Redis.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		wg      sync.WaitGroup
		retried modernRound
		gotCode int64
		gotMsg  string
		gotRes  json.RawMessage
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		retried = modernTool(ctx, t, at(r1), "ev__test_sampling", answerInputs(t, parked))
	}()
	go func() {
		defer wg.Done()
		gotRes, gotCode, gotMsg = legacyRequest(ctx, t, b, "get-after-restart", "tasks/get", params)
	}()
	time.Sleep(time.Second)
	resume()
	wg.Wait()
	if retried.errCode != 0 || retried.resultType != "complete" || !strings.Contains(retried.text, "from the client") {
		t.Errorf("the retry of the call parked on r0, sent to r1 right after redis restarted empty: %+v\n%s", retried, retried.raw)
	}
	if gotCode != 0 || !strings.Contains(string(gotRes), `"status"`) {
		t.Errorf("tasks/get of r0's task at r1 right after redis restarted empty: %d %s %s", gotCode, gotMsg, gotRes)
	}

	// Followed to its result from r2: to r1 (the session's), then to r0 (the task's).
	b.url = at(r2)
	deadline := time.Now().Add(60 * time.Second)
	for n := 0; ; n++ {
		res, code, msg := legacyRequest(ctx, t, b, fmt.Sprintf("get-%d", n), "tasks/get", params)
		var st struct{ Status string }
		if code != 0 || json.Unmarshal(res, &st) != nil {
			t.Fatalf("tasks/get at r2 after the restart: %d %s %s", code, msg, res)
		}
		if st.Status == "completed" {
			break
		}
		if st.Status == "failed" || st.Status == "cancelled" || time.Now().After(deadline) {
			t.Fatalf("task ended as %q", st.Status)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if res, code, msg := legacyRequest(ctx, t, b, "result", "tasks/result", params); code != 0 || !strings.Contains(string(res), "proxies") {
		t.Errorf("tasks/result at r2 after the restart: %d %s %s", code, msg, res)
	}
	if t.Failed() {
		t.Log(topo.Logs())
	}
}
