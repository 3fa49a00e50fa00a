package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
	"github.com/mcp-proxy/mcp-proxy/policy"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu        sync.Mutex
	changes   []bool
	fallbacks map[string]int
}

func (r *recorder) RedisReachable(ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, ok)
}

func (r *recorder) RedisFallback(mode string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fallbacks == nil {
		r.fallbacks = map[string]int{}
	}
	r.fallbacks[mode]++
}

func (r *recorder) state() ([]bool, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]int{}
	for k, v := range r.fallbacks {
		m[k] = v
	}
	return append([]bool(nil), r.changes...), m
}

// waitShared takes from b until a take goes to Redis again (b reachable), for at most
// ten seconds.
func waitShared(t *testing.T, b *Buckets, bucket policy.Bucket) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !b.Reachable() || b.down.Load() {
		if time.Now().After(deadline) {
			t.Fatal("redis is back, but the store does not use it again")
		}
		b.Take(context.Background(), []policy.Bucket{bucket}, time.Now())
		time.Sleep(50 * time.Millisecond)
	}
}

func newBuckets(t *testing.T, r *topology.Redis, mode string, obs Observer, log *topology.Buffer) *Buckets {
	t.Helper()
	b, err := New(&config.Cluster{Redis: r.URL(), OnRedisFailure: mode, Timeout: 300 * time.Millisecond, KeyPrefix: "test:"},
		obs, zerolog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
		if err := b.Close(); err != nil { // safe twice
			t.Error(err)
		}
	})
	return b
}

// TestFallbackLocal: with Redis stopped, calls are limited in the replica's memory (the
// change logged once, each such call counted); when it is back the buckets are shared
// again.
func TestFallbackLocal(t *testing.T) {
	leaktest.Check(t, 5*time.Second) // the clients, pools, heartbeats and sweepers are closed
	r := startRedis(t)
	rec := &recorder{}
	log := &topology.Buffer{}
	a := newBuckets(t, r, config.OnRedisFailureLocal, rec, log)
	other := newBuckets(t, r, config.OnRedisFailureLocal, nil, &topology.Buffer{})
	ctx := context.Background()
	bucket := policy.Bucket{Key: "calls", Limit: perMinute10, Burst: 3}
	admitted := func(s policy.BucketStore, n int) int {
		got := 0
		for range n {
			refused, _, err := s.Take(ctx, []policy.Bucket{bucket}, time.Now())
			if err != nil {
				t.Fatalf("take: %v", err)
			}
			if refused == -1 {
				got++
			}
		}
		return got
	}
	if got := admitted(a, 2) + admitted(other, 2); got != 3 {
		t.Fatalf("shared: admitted %d of 4 with a burst of 3", got)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	// Each replica now has its own bucket, full.
	if got := admitted(a, 5); got != 3 {
		t.Errorf("local on a: admitted %d, want 3", got)
	}
	if got := admitted(other, 5); got != 3 {
		t.Errorf("local on the other: admitted %d, want 3", got)
	}
	changes, fallbacks := rec.state()
	if len(changes) != 1 || changes[0] || fallbacks[config.OnRedisFailureLocal] != 5 {
		t.Errorf("observer: changes %v, fallbacks %v; want [false] and 5 local", changes, fallbacks)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	waitShared(t, a, bucket)
	waitShared(t, other, policy.Bucket{Key: "other", Limit: perMinute10, Burst: 3})
	// Redis came back empty (no persistence): a fresh shared bucket of 3, minus the take
	// that found Redis again.
	if got := admitted(a, 2) + admitted(other, 2); got != 2 {
		t.Errorf("shared again: admitted %d of 4, want the 2 tokens left", got)
	}
	changes, _ = rec.state()
	if len(changes) != 2 || !changes[1] {
		t.Errorf("observer changes %v, want [false true]", changes)
	}
	logs := log.String()
	if n := countLines(logs, "redis is unreachable"); n != 1 {
		t.Errorf("the failure is logged %d times, want once:\n%s", n, logs)
	}
	if n := countLines(logs, "redis is reachable again"); n != 1 {
		t.Errorf("the recovery is logged %d times, want once:\n%s", n, logs)
	}
}

// TestFallbackDeny: with Redis stopped, every limited call is refused with an error
// naming the store; when it is back, calls pass again.
func TestFallbackDeny(t *testing.T) {
	leaktest.Check(t, 5*time.Second) // the clients, pools, heartbeats and sweepers are closed
	r := startRedis(t)
	rec := &recorder{}
	log := &topology.Buffer{}
	b := newBuckets(t, r, config.OnRedisFailureDeny, rec, log)
	ctx := context.Background()
	bucket := policy.Bucket{Key: "calls", Limit: perMinute10, Burst: 10}
	if refused, _, err := b.Take(ctx, []policy.Bucket{bucket}, time.Now()); refused != -1 || err != nil {
		t.Fatalf("with redis: %d %v", refused, err)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_, _, err := b.Take(ctx, []policy.Bucket{bucket}, time.Now())
		if !errors.Is(err, ErrRedisUnavailable) {
			t.Fatalf("take %d without redis: err %v, want ErrRedisUnavailable", i, err)
		}
	}
	// Through the limiter: refused, with the error for the log and a message for the client.
	l, err := policy.NewLimiterWith([]policy.Limit{{Name: "calls", Rate: perMinute10, Burst: 10}}, nil,
		policy.LimiterOptions{Store: b})
	if err != nil {
		t.Fatal(err)
	}
	if _, refusal := l.Admit(nil, &policy.Item{Name: "x", Upstream: "u"}); refusal == nil || !errors.Is(refusal.Err, ErrRedisUnavailable) {
		t.Fatalf("limiter without redis: %+v", refusal)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	waitShared(t, b, bucket)
	if _, refusal := l.Admit(nil, &policy.Item{Name: "x", Upstream: "u"}); refusal != nil {
		t.Fatalf("limiter with redis back: %+v", refusal)
	}
	changes, fallbacks := rec.state()
	if len(changes) != 2 || changes[0] || !changes[1] || fallbacks[config.OnRedisFailureDeny] < 4 {
		t.Errorf("observer: changes %v, fallbacks %v", changes, fallbacks)
	}
	if n := countLines(log.String(), "redis is unreachable"); n != 1 {
		t.Errorf("the failure is logged %d times, want once:\n%s", n, log)
	}
}

// TestNoRedisURLInErrors: a URL go-redis refuses is reported without its password.
func TestNoRedisURLInErrors(t *testing.T) {
	for _, u := range []string{"redis://:hunter2@127.0.0.1:6379/0?bogus=1", "redis://:hunter2@127.0.0.1:6379/0?dial_timeout=soon"} {
		_, err := NewClient(&config.Cluster{Redis: u, Timeout: time.Second})
		if err == nil {
			t.Errorf("%s: no error", u)
			continue
		}
		if contains(err.Error(), "hunter2") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func countLines(s, sub string) int {
	n := 0
	for _, line := range splitLines(s) {
		if contains(line, sub) {
			n++
		}
	}
	return n
}

// TestCheck: an option go-redis refuses in the URL is reported at the redis attribute,
// without the password; a good URL passes.
func TestCheck(t *testing.T) {
	cfg, diags := config.ParseWithOptions([]byte(`cluster {
  redis = "redis://:hunter2@127.0.0.1:6379/0?no_such_option=1"
}
upstream "a" {
  command = ["a"]
}
`), "p.hcl", "/base", config.Options{Check: Check})
	if cfg != nil || !diags.HasErrors() {
		t.Fatalf("no error: %v", diags)
	}
	got := config.FormatDiagnostics(diags)
	if !contains(got, "p.hcl:2:11: error: Invalid redis URL") || !contains(got, "no_such_option") || contains(got, "hunter2") {
		t.Errorf("diagnostics:\n%s", got)
	}
	if _, diags := config.ParseWithOptions([]byte("cluster {\n  redis = \"rediss://u:p@h:6380/1?dial_timeout=2s\"\n}\nupstream \"a\" {\n  command = [\"a\"]\n}\n"),
		"p.hcl", "/base", config.Options{Check: Check}); diags.HasErrors() {
		t.Errorf("a good URL: %s", config.FormatDiagnostics(diags))
	}
}

// TestRedisLogLines: go-redis's own lines reach the proxy's log as JSON at warn level.
func TestRedisLogLines(t *testing.T) {
	var buf bytes.Buffer
	l := redisLog{zerolog.New(&buf).With().Str("component", "redis").Logger()}
	l.Printf(context.Background(), "redis: discarding bad PubSub connection: %v", errors.New("EOF"))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not a JSON line: %q", buf.String())
	}
	if line["level"] != "warn" || line["component"] != "redis" || line["message"] != "redis: discarding bad PubSub connection: EOF" {
		t.Errorf("line %v", line)
	}
}
