package cluster

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// TestForwardToRedisRestarted: right after Redis restarted empty, a request for a
// replica the registry does not name yet (a retry of a call parked there) waits for it
// to register again and is forwarded there, instead of being declined (the handler
// would tell the client that the call is gone).
func TestForwardToRedisRestarted(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	r := startRedis(t)
	got := make(chan string, 1)
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		got <- req.Header.Get(OwnerHeader)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":7,"result":{}}`)
	}))
	defer peer.Close()
	self := newForwarder(t, r, "127.0.0.1:1")
	waitFor(t, "this replica registered", func() bool { return self.redis.Exists(t.Context(), self.key).Val() == 1 })
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	// The peer registers again half a second later (its registration, by hand).
	const peerID = "0e0e0e0e"
	rc, _ := newClient(t, r)
	go func() {
		time.Sleep(500 * time.Millisecond)
		rc.Set(context.Background(), "test:replica:"+peerID, strings.TrimPrefix(peer.URL, "http://"), registryTTL)
	}()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","requestState":"r.` + peerID + `.abc"}}`
	rec := httptest.NewRecorder()
	if !self.ForwardTo(rec, httptest.NewRequest(http.MethodPost, "/mcp", http.NoBody), peerID, []byte(body)) {
		t.Fatal("declined: the replica that parked the call was taken for gone right after redis restarted")
	}
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"result"`) {
		t.Errorf("forwarded answer: %d %s", rec.Code, rec.Body)
	}
	if owner := <-got; owner != peerID {
		t.Errorf("the peer was sent a request meant for %q", owner)
	}
}

// TestRedisTasksRestored: the tasks a replica recorded outlive Redis losing their
// hashes. With Redis emptied, the replica that recorded a task answers it from memory,
// and its restoreAll writes the hashes again (principal included), except one another
// replica wrote since, which it leaves as it is. After a restart of redis-server, the
// forwarder's registration writes them again by itself, and another replica asking for
// one right after waits for it and finds the replica that holds it; a task nobody holds
// is unknown after the wait, and not waited for twice.
func TestRedisTasksRestored(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	r := startRedis(t)
	rc, _ := newClient(t, r)
	ctx := t.Context()

	// restoreAll, by itself.
	c0, _ := newClient(t, r)
	c1, _ := newClient(t, r)
	s0, s1 := NewRedisTasks(c0, "test:", "r0"), NewRedisTasks(c1, "test:", "r1")
	alice := router.TaskOwner{Upstream: "npm", Session: "abc.1", Principal: "alice"}
	for _, id := range []string{"t-1", "t-2"} {
		if err := s0.Put(ctx, id, alice, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Command("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	if o, ok, err := s0.Get(ctx, "t-1"); !ok || err != nil || o != alice {
		t.Errorf("the recording replica's Get of its task lost by redis = %+v %v %v", o, ok, err)
	}
	if err := s1.Put(ctx, "t-2", router.TaskOwner{Upstream: "npm", Principal: "bob"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n, err := s0.restoreAll(ctx); n != 1 || err != nil {
		t.Errorf("restoreAll = %d %v, want the one task redis lost", n, err)
	}
	if o, ok, _ := s1.Get(ctx, "t-1"); !ok || o != (router.TaskOwner{Upstream: "npm", Session: "abc.1", Principal: "alice", Replica: "r0"}) {
		t.Errorf("the task written again, read by another replica = %+v %v", o, ok)
	}
	if ttl := rc.PTTL(ctx, s0.key("t-1")).Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("the hash written again expires in %v, want what is left of the task's ttl", ttl)
	}
	if o, _, _ := s0.Get(ctx, "t-2"); o.Replica != "r1" || o.Principal != "bob" {
		t.Errorf("restoreAll overwrote another replica's task: %+v", o)
	}
	// A listing (no principal) put it again before the restore: the principal comes back.
	if _, err := r.Command("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	if err := s0.Put(ctx, "t-1", router.TaskOwner{Upstream: "npm", Session: "abc.1"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	c0.Del(ctx, s0.key("t-1")) // as if only the listing's write made it
	c0.HSet(ctx, s0.key("t-1"), "upstream", "npm", "session", "abc.1", "replica", "r0")
	if _, err := s0.restoreAll(ctx); err != nil {
		t.Fatal(err)
	}
	if p := rc.HGet(ctx, s0.key("t-1"), "principal").Val(); p != "alice" {
		t.Errorf("the principal after a listing's Put and a restore: %q, want alice", p)
	}

	// Restarted empty, under two replicas' forwarders.
	f0, f1 := newForwarder(t, r, "127.0.0.1:1"), newForwarder(t, r, "127.0.0.1:2")
	tasks0, tasks1 := NewTasks(f0), NewTasks(f1)
	if err := tasks0.Put(ctx, "t-3", alice, time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both replicas registered", func() bool { return rc.Exists(ctx, f0.key, f1.key).Val() == 2 })
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	o, ok, err := tasks1.Get(ctx, "t-3")
	if !ok || err != nil || o.Replica != f0.ID() || o.Principal != "alice" {
		t.Errorf("another replica's Get right after the restart = %+v %v %v, want f0's task", o, ok, err)
	}
	waitFor(t, "the task's hash written again", func() bool { return rc.Exists(ctx, tasks0.key("t-3")).Val() == 1 })
	if _, ok, err := tasks1.Get(ctx, "no-such-task"); ok || err != nil {
		t.Errorf("an unknown task right after the restart = %v %v", ok, err)
	}
	if !tasks1.await("t-3") || tasks1.await("no-such-task") {
		t.Error("an unknown task waited for in vain is waited for again (or a found one is not)")
	}
}
