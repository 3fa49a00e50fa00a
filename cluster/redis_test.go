package cluster

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// TestRedisURLForms: each URL form makes its kind of client, and what is wrong with one
// is said without the password. Redis Cluster is only validated here (no cluster is
// started): its client is made, and every command the proxy sends touches one key or
// keys of one hash slot ({rl}).
func TestRedisURLForms(t *testing.T) {
	for _, tc := range []struct {
		url, kind, err string
	}{
		{"redis://:hunter2@127.0.0.1:6379/0", "single", ""},
		{"unix:///run/redis.sock", "single", ""},
		{"redis-sentinel://:hunter2@127.0.0.1:26379/0?master_name=main&addr=127.0.0.1:26380&password=hunter2", "failover", ""},
		{"rediss-sentinel://127.0.0.1:26379?master_name=main", "failover", ""},
		{"redis-cluster://:hunter2@127.0.0.1:7000?addr=127.0.0.1:7001", "cluster", ""},
		{"rediss-cluster://:hunter2@127.0.0.1:7000/0", "cluster", ""},
		{"redis-sentinel://:hunter2@127.0.0.1:26379/0", "", "master_name"},
		{"redis://:hunter2@127.0.0.1:6379/0?master_name=main", "", "redis-sentinel://"},
		{"redis-sentinel://:hunter2@127.0.0.1:26379/0?master_name=main&bogus=1", "", "bogus"},
		{"redis-cluster://:hunter2@127.0.0.1:7000/2", "", "database 0 only"},
		{"redis-cluster://:hunter2@127.0.0.1:7000?dial_timeout=soon", "", "dial_timeout"},
	} {
		o, err := newOptions(&config.Cluster{Redis: tc.url, Timeout: time.Second})
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one about %q", tc.url, err, tc.err)
			} else if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%s: the error shows the password: %v", tc.url, err)
			}
			continue
		case err != nil:
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		kind := map[bool]string{o.single != nil: "single", o.failover != nil: "failover", o.cluster != nil: "cluster"}[true]
		if kind != tc.kind {
			t.Errorf("%s: a %s client, want %s", tc.url, kind, tc.kind)
		}
		c, err := NewClient(&config.Cluster{Redis: tc.url, Timeout: time.Second})
		if err != nil {
			t.Errorf("%s: NewClient: %v", tc.url, err)
			continue
		}
		c.Close()
	}
	// Config validation, at the attribute, without the password.
	cfg, diags := config.ParseWithOptions([]byte("cluster {\n  redis = \"redis-sentinel://:hunter2@127.0.0.1:26379/0\"\n}\nupstream \"a\" {\n  command = [\"a\"]\n}\n"),
		"p.hcl", "/base", config.Options{Check: Check})
	got := config.FormatDiagnostics(diags)
	if cfg != nil || !strings.Contains(got, "p.hcl:2:11: error: Invalid redis URL") || !strings.Contains(got, "master_name") || strings.Contains(got, "hunter2") {
		t.Errorf("a Sentinel URL without master_name:\n%s", got)
	}
}

// TestSentinelFailover: with a redis-sentinel:// URL the shared stores (limits, tasks,
// registry) reach the master the sentinel names; when that master stops, the sentinel
// promotes its replica and the same client goes on against the new master.
func TestSentinelFailover(t *testing.T) {
	master := startRedis(t)
	replica := startRedis(t)
	host, port, _ := strings.Cut(master.Addr, ":")
	if res, err := replica.Command("REPLICAOF", host, port); err != nil || res != "+OK" {
		t.Fatalf("REPLICAOF: %q %v", res, err)
	}
	s, err := topology.StartSentinel(t.TempDir(), master.Addr, "main")
	if errors.Is(err, topology.ErrMissing) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("sentinel:\n%s", s.Output())
		}
	}()
	c, err := NewClient(&config.Cluster{Redis: "redis-sentinel://" + s.Addr + "/0?master_name=main", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*redis.Client); !ok {
		t.Fatalf("a Sentinel URL made a %T", c)
	}
	ctx := context.Background()
	buckets := NewRedisBuckets(c, "test:")
	tasks := NewRedisTasks(c, "test:", "r0")
	one := []policy.Bucket{{Key: "alice", Limit: perMinute10, Burst: 10}}
	if refused, _, err := buckets.Take(ctx, one, time.Now()); err != nil || refused != -1 {
		t.Fatalf("a limit through sentinel: %d %v", refused, err)
	}
	if err := tasks.Put(ctx, "t1", router.TaskOwner{Upstream: "u"}, 0); err != nil {
		t.Fatalf("a task through sentinel: %v", err)
	}
	if n, err := master.Command("DBSIZE"); err != nil || n != ":2" {
		t.Errorf("the master holds %q keys (%v), want 2: the client did not write to it", n, err)
	}
	// The master stops; the sentinel fails over to the replica, and the client follows.
	waitFor(t, "the replica to have the keys", func() bool { n, _ := replica.Command("DBSIZE"); return n == ":2" })
	if err := master.Stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the client to reach the new master", func() bool {
		_, _, err := buckets.Take(ctx, one, time.Now())
		return err == nil
	})
	if info := c.Info(ctx, "server", "replication").Val(); !strings.Contains(info, "role:master") ||
		!strings.Contains(info, "tcp_port:"+strings.Split(replica.Addr, ":")[1]+"\r") {
		t.Errorf("the client's server after failover is not the promoted replica:\n%s", info)
	}
	if o, ok, err := tasks.Get(ctx, "t1"); err != nil || !ok || o.Upstream != "u" {
		t.Errorf("the task after failover: %+v %v %v", o, ok, err)
	}
}

// waitFor polls cond until it holds, failing the test after 60 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
