package cluster

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/credential"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

// TestRedisCredentials: grants and flows round-trip sealed (Redis holds no token), a
// grant is bound to its principal, TakeFlow takes once, and a lease is held by one
// taker at a time across clients (replicas).
func TestRedisCredentials(t *testing.T) {
	r := startRedis(t)
	sealer, err := credential.NewSealer("0123456789abcdef0123456789abcdef-redis")
	if err != nil {
		t.Fatal(err)
	}
	newStore := func() *RedisCredentials {
		c, err := NewClient(clusterOf(r))
		if err != nil {
			t.Fatal(err)
		}
		s := NewRedisCredentials(c, "test:", sealer)
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := newStore(), newStore()
	ctx := context.Background()
	now := time.Now().Round(0)
	g := &credential.Grant{Upstream: "jira", Principal: "alice", Mode: credential.ModeOAuth, AccessToken: principal.NewSecret("AT-SECRET"),
		RefreshToken: principal.NewSecret("RT-SECRET"), Expiry: now.Add(time.Hour), Subject: "alice@jira", Updated: now}
	if err := a.Put(ctx, g); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctx, "jira", "alice")
	if err != nil || got == nil || got.AccessToken.Reveal() != "AT-SECRET" || got.Subject != "alice@jira" {
		t.Fatalf("replica b reads %+v %v", got, err)
	}
	if m, err := a.client.HGetAll(ctx, a.grantKey("jira", "alice")).Result(); err != nil || len(m) != 3 || strings.Contains(m["g"], "SECRET") {
		t.Errorf("redis holds %d fields, a token in the clear? %v", len(m), err)
	}
	if l, err := b.List(ctx, "", ""); err != nil || len(l) != 1 || l[0].Principal != "alice" || !l[0].Refresh {
		t.Errorf("list %+v %v", l, err)
	}
	// A grant copied under another principal's key does not open.
	raw, _ := a.client.HGet(ctx, a.grantKey("jira", "alice"), "g").Bytes()
	a.client.HSet(ctx, a.grantKey("jira", "mallory"), "u", "jira", "p", "mallory", "g", raw)
	if got, err := b.Get(ctx, "jira", "mallory"); err == nil || got != nil {
		t.Errorf("alice's grant served as mallory's: %+v %v", got, err)
	}

	f := &credential.Flow{ID: "flow-1", Upstream: "jira", Principal: "alice", Verifier: principal.NewSecret("V"),
		State: principal.NewSecret("S"), Expires: time.Now().Add(time.Minute)}
	if err := a.PutFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.GetFlow(ctx, "flow-1"); got == nil || got.Verifier.Reveal() != "V" {
		t.Errorf("flow %+v", got)
	}
	first, _ := b.TakeFlow(ctx, "flow-1")
	second, _ := a.TakeFlow(ctx, "flow-1")
	if first == nil || second != nil {
		t.Errorf("take: %v then %v", first, second)
	}

	var held atomic.Int32
	var wg sync.WaitGroup
	for _, s := range []*RedisCredentials{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok, err := s.Lease(ctx, "jira", "alice", time.Minute); err == nil && ok {
				held.Add(1)
			}
		}()
	}
	wg.Wait()
	if held.Load() != 1 {
		t.Errorf("%d holders of one lease", held.Load())
	}
	if err := a.Delete(ctx, "jira", "alice"); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Get(ctx, "jira", "alice"); got != nil {
		t.Error("a deleted grant is still there")
	}
}
