package cluster

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/credential"
	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

// TestRedisCredentials: grants and flows round-trip sealed (Redis holds no token), a
// grant is bound to its principal, TakeFlow takes once, and a lease is held by one
// taker at a time across clients (replicas).
func TestRedisCredentials(t *testing.T) {
	_, a, b := twoCredentialStores(t)
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

// TestCredentialChanges: a change published by one replica's store reaches every other
// subscribed replica (not its own), names no token, and a subscription that was lost
// (Redis restarted) and made again asks for a resync: what was published meanwhile is
// lost. Subscribe returns when its context ends.
func TestCredentialChanges(t *testing.T) {
	r, a, b := twoCredentialStores(t)
	type heard struct {
		mu      sync.Mutex
		changes []credential.Change
		resyncs int
	}
	listen := func(s *RedisCredentials) (*heard, func()) {
		h := &heard{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Subscribe(ctx, func(c credential.Change) {
				h.mu.Lock()
				h.changes = append(h.changes, c)
				h.mu.Unlock()
			}, func() {
				h.mu.Lock()
				h.resyncs++
				h.mu.Unlock()
			})
		}()
		return h, func() { cancel(); <-done }
	}
	ha, stopA := listen(a)
	defer stopA()
	hb, stopB := listen(b)
	defer stopB()
	count := func(h *heard) (int, int) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.changes), h.resyncs
	}
	ctx := context.Background()
	// The subscriptions are made asynchronously: publish until b hears.
	want := credential.Change{Kind: credential.ChangeRevoked, Upstream: "jira", Principal: "jwt:https://idp#alice"}
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := count(hb); n == 0; n, _ = count(hb) {
		if time.Now().After(deadline) {
			t.Fatal("b never heard a's change")
		}
		if err := a.Publish(ctx, want); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	hb.mu.Lock()
	got := hb.changes[0]
	hb.mu.Unlock()
	if got != want {
		t.Errorf("b heard %+v, want %+v", got, want)
	}
	if n, _ := count(ha); n != 0 {
		t.Errorf("a heard %d of its own changes", n)
	}

	// Redis restarts: both subscribe again, and resync.
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		_, ra := count(ha)
		_, rb := count(hb)
		if ra >= 1 && rb >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Redis restarted: resyncs a %d, b %d", ra, rb)
		}
		time.Sleep(50 * time.Millisecond)
	}
	before, _ := count(hb)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := a.Publish(ctx, credential.Change{Kind: credential.ChangeSecret, Upstream: "gh", Principal: "api_key:bob"}); err != nil {
			t.Fatal(err)
		}
		if n, _ := count(hb); n > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b hears nothing after Redis restarted")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// twoCredentialStores returns a redis-server and two stores (two replicas' clients) over one redis-server,
// with the same sealer; the test's end closes them.
func twoCredentialStores(t *testing.T) (r *topology.Redis, a, b *RedisCredentials) {
	t.Helper()
	r = startRedis(t)
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
	return r, newStore(), newStore()
}
