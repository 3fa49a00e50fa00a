package cluster

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

var perMinute10 = rate.Limit(10.0 / 60)

func TestRedisBucketsTake(t *testing.T) {
	r := startRedis(t)
	c, _ := newClient(t, r)
	s := NewRedisBuckets(c, "test:")
	ctx := context.Background()
	one := []policy.Bucket{{Key: "calls\x00p:alice", Limit: perMinute10, Burst: 10}}
	for i := range 10 {
		if refused, _, err := s.Take(ctx, one, time.Now()); err != nil || refused != -1 {
			t.Fatalf("take %d: refused %d, err %v", i+1, refused, err)
		}
	}
	refused, delay, err := s.Take(ctx, one, time.Now())
	if err != nil || refused != 0 {
		t.Fatalf("take 11: refused %d, err %v; want bucket 0 refused", refused, err)
	}
	if delay <= 0 || delay > 6*time.Second {
		t.Errorf("retry after %s, want within one interval (6s)", delay)
	}
	// The key expires when the bucket is full again: 10 tokens at 10/m, one minute.
	ttl, err := c.PTTL(ctx, "test:{rl}:calls\x00p:alice").Result()
	if err != nil || ttl <= 50*time.Second || ttl > time.Minute {
		t.Errorf("PTTL = %s, %v; want just under a minute", ttl, err)
	}
	// Another principal has its own bucket.
	other := []policy.Bucket{{Key: "calls\x00p:bob", Limit: perMinute10, Burst: 10}}
	if refused, _, err := s.Take(ctx, other, time.Now()); err != nil || refused != -1 {
		t.Fatalf("bob: refused %d, err %v", refused, err)
	}
}

// TestRedisBucketsAllOrNone: a call that one bucket refuses takes nothing from the
// others, and a key that repeats needs a token per occurrence.
func TestRedisBucketsAllOrNone(t *testing.T) {
	r := startRedis(t)
	c, _ := newClient(t, r)
	s := NewRedisBuckets(c, "test:")
	ctx := context.Background()
	wide := policy.Bucket{Key: "wide", Limit: perMinute10, Burst: 3}
	narrow := policy.Bucket{Key: "narrow", Limit: perMinute10, Burst: 1}
	if refused, _, err := s.Take(ctx, []policy.Bucket{wide, narrow}, time.Now()); refused != -1 || err != nil {
		t.Fatalf("first: %d %v", refused, err)
	}
	for range 3 {
		if refused, _, err := s.Take(ctx, []policy.Bucket{wide, narrow}, time.Now()); refused != 1 || err != nil {
			t.Fatalf("narrow exhausted: refused %d %v, want 1", refused, err)
		}
	}
	// wide still has its 2 tokens: the refused calls took none of them.
	if refused, _, err := s.Take(ctx, []policy.Bucket{wide, wide}, time.Now()); refused != -1 || err != nil {
		t.Fatalf("wide twice: %d %v", refused, err)
	}
	if refused, _, err := s.Take(ctx, []policy.Bucket{wide}, time.Now()); refused != 0 || err != nil {
		t.Fatalf("wide exhausted: %d %v", refused, err)
	}
	b := policy.Bucket{Key: "pair", Limit: perMinute10, Burst: 1}
	if refused, _, err := s.Take(ctx, []policy.Bucket{b, b}, time.Now()); refused != 1 || err != nil {
		t.Fatalf("a repeated key with one token: refused %d %v, want 1", refused, err)
	}
}

// TestRedisBucketsReload: a limit whose rate changes keeps the bucket's missing tokens.
func TestRedisBucketsReload(t *testing.T) {
	r := startRedis(t)
	c, _ := newClient(t, r)
	s := NewRedisBuckets(c, "test:")
	ctx := context.Background()
	take := func(l rate.Limit, n int) int {
		admitted := 0
		for range n {
			if refused, _, err := s.Take(ctx, []policy.Bucket{{Key: "k", Limit: l, Burst: 10}}, time.Now()); err != nil {
				t.Fatal(err)
			} else if refused == -1 {
				admitted++
			}
		}
		return admitted
	}
	if got := take(rate.Limit(1.0/3600), 6); got != 6 {
		t.Fatalf("admitted %d of 6", got)
	}
	// Twice the rate (still slow enough that nothing refills during the test): 4 left.
	if got := take(rate.Limit(2.0/3600), 10); got != 4 {
		t.Errorf("after the rate changed: admitted %d, want the 4 tokens left", got)
	}
}

// TestRedisBucketsShared: several replicas (clients) hammering one per-principal limit
// of 10 at once admit exactly 10 calls, and each call is one round trip to Redis.
func TestRedisBucketsShared(t *testing.T) {
	leaktest.Check(t, 5*time.Second) // the clients, pools, heartbeats and sweepers are closed
	r := startRedis(t)
	const replicas, callers, calls = 3, 8, 5
	var admitted, trips atomic.Int64
	limiters := make([]*policy.Limiter, replicas)
	counts := make([]*atomic.Int64, replicas)
	for i := range limiters {
		c, n := newClient(t, r)
		counts[i] = n
		l, err := policy.NewLimiterWith([]policy.Limit{{Name: "calls", Rate: perMinute10, Burst: 10, Per: []string{"principal"}}},
			nil, policy.LimiterOptions{Store: NewRedisBuckets(c, "test:")})
		if err != nil {
			t.Fatal(err)
		}
		limiters[i] = l
		// Load the script once (EVALSHA's first NOSCRIPT costs a second trip).
		if _, refusal := l.Admit(&principal.Principal{Name: "warm-up"}, &policy.Item{Name: "t__echo", Upstream: "t"}); refusal != nil {
			t.Fatalf("warm-up: %+v", refusal)
		}
		n.Store(0)
	}
	alice := &principal.Principal{Name: "alice"}
	var wg sync.WaitGroup
	for i := range replicas * callers {
		wg.Go(func() {
			for range calls {
				release, refusal := limiters[i%replicas].Admit(alice, &policy.Item{Name: "t__echo", Upstream: "t"})
				if refusal == nil {
					admitted.Add(1)
					release()
				} else if refusal.Err != nil {
					t.Errorf("refused with an error: %v", refusal.Err)
				}
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != 10 {
		t.Errorf("admitted %d calls across %d replicas, want 10", got, replicas)
	}
	for _, n := range counts {
		trips.Add(n.Load())
	}
	if want := int64(replicas * callers * calls); trips.Load() != want {
		t.Errorf("%d round trips to redis for %d calls, want one each", trips.Load(), want)
	}
}

// TestRedisBucketsByIdentity: per = ["principal"] keys a replica's buckets in Redis by
// the principal's identity: the API key alice and the token subject alice have two
// keys, each under the store's hash tag, and two replicas share each of them.
func TestRedisBucketsByIdentity(t *testing.T) {
	r := startRedis(t)
	limits := []policy.Limit{{Name: "calls", Rate: perMinute10, Burst: 2, Per: []string{"principal"}}}
	var replicas [2]*policy.Limiter
	var c redis.UniversalClient
	for i := range replicas {
		c, _ = newClient(t, r)
		l, err := policy.NewLimiterWith(limits, nil, policy.LimiterOptions{Store: NewRedisBuckets(c, "test:")})
		if err != nil {
			t.Fatal(err)
		}
		replicas[i] = l
	}
	key := (&principal.Principal{Name: "alice", Via: principal.ViaAPIKey}).Identify()
	token := (&principal.Principal{Name: "alice", Via: principal.ViaJWT, Issuer: "https://idp.example.com"}).Identify()
	it := &policy.Item{Name: "t__echo", Upstream: "t"}
	admit := func(i int, p *principal.Principal) bool {
		_, refusal := replicas[i].Admit(p, it)
		if refusal != nil && refusal.Err != nil {
			t.Fatalf("refused with an error: %v", refusal.Err)
		}
		return refusal == nil
	}
	if !admit(0, key) || !admit(1, key) || admit(0, key) {
		t.Fatal("the API key alice: want two calls admitted across the replicas, then a refusal")
	}
	if !admit(1, token) || !admit(0, token) || admit(1, token) {
		t.Fatal("the token's alice: want her own two calls")
	}
	keys, err := c.Keys(context.Background(), "test:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	want := []string{"test:{rl}:calls\x00p:api_key:alice", "test:{rl}:calls\x00p:jwt:https://idp.example.com#alice"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}
}
