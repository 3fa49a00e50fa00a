package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/router"
)

// TestRedisTasks: two replicas' stores over one Redis. A task Put by one is found by
// both, named as the other's replica by the one that did not Put it; a listing's Put
// (no principal) keeps the creator; the entry expires with the task's ttl; a long id
// makes a short key; with Redis gone, both calls fail (the router then fails closed).
func TestRedisTasks(t *testing.T) {
	r := startRedis(t)
	c0, _ := newClient(t, r)
	c1, _ := newClient(t, r)
	s0, s1 := NewRedisTasks(c0, "test:", "r0"), NewRedisTasks(c1, "test:", "r1")
	ctx := context.Background()

	if _, ok, err := s1.Get(ctx, "t-1"); ok || err != nil {
		t.Fatalf("an unknown task: %v %v", ok, err)
	}
	if err := s0.Put(ctx, "t-1", router.TaskOwner{Upstream: "npm", Session: "abc.1", Principal: "alice"}, 0); err != nil {
		t.Fatal(err)
	}
	o, ok, err := s0.Get(ctx, "t-1")
	if !ok || err != nil || o != (router.TaskOwner{Upstream: "npm", Session: "abc.1", Principal: "alice"}) {
		t.Errorf("the replica that put it: %+v %v %v", o, ok, err)
	}
	o, ok, err = s1.Get(ctx, "t-1")
	if !ok || err != nil || o != (router.TaskOwner{Upstream: "npm", Session: "abc.1", Principal: "alice", Replica: "r0"}) {
		t.Errorf("another replica: %+v %v %v", o, ok, err)
	}
	// Seen listed (no principal): the creator stays.
	if err := s0.Put(ctx, "t-1", router.TaskOwner{Upstream: "npm", Session: "abc.1"}, 0); err != nil {
		t.Fatal(err)
	}
	if o, _, _ := s1.Get(ctx, "t-1"); o.Principal != "alice" {
		t.Errorf("a listing changed the creator: %+v", o)
	}
	// The task's ttl bounds the entry.
	if err := s0.Put(ctx, "short", router.TaskOwner{Upstream: "npm"}, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if pttl := c0.PTTL(ctx, s0.key("short")).Val(); pttl <= 0 || pttl > 300*time.Millisecond {
		t.Errorf("entry's ttl: %v", pttl)
	}
	if pttl := c0.PTTL(ctx, s0.key("t-1")).Val(); pttl < taskRetention-time.Minute {
		t.Errorf("entry without a task ttl: %v, want the retention", pttl)
	}
	long := strings.Repeat("x", 1<<16)
	if k := s0.key(long); len(k) > 100 {
		t.Errorf("a 64 KiB id makes a %d-byte key", len(k))
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s0.Put(ctx, "t-2", router.TaskOwner{Upstream: "npm"}, 0); err == nil {
		t.Error("Put with Redis stopped did not fail")
	}
	if _, _, err := s1.Get(ctx, "t-1"); err == nil {
		t.Error("Get with Redis stopped did not fail")
	}
}
