package cluster

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// startRedis starts a redis-server for the test; without one installed the test is
// skipped, or fails when CI is set.
func startRedis(t testing.TB) *topology.Redis {
	t.Helper()
	r, err := topology.StartRedis(t.TempDir(), nil)
	if errors.Is(err, topology.ErrMissing) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// newClient is a client of r as the cluster block makes it, counting the scripts it
// runs (a round trip each); a new connection's handshake (HELLO, CLIENT) is not a
// call's and is not counted.
func newClient(t *testing.T, r *topology.Redis) (redis.UniversalClient, *atomic.Int64) {
	t.Helper()
	c, err := NewClient(&config.Cluster{Redis: r.URL(), Timeout: config.DefaultRedisTimeout})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	c.AddHook(counter{&n})
	t.Cleanup(func() { c.Close() })
	return c, &n
}

type counter struct{ n *atomic.Int64 }

func (counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func splitLines(s string) []string { return strings.Split(s, "\n") }
func contains(s, sub string) bool  { return strings.Contains(s, sub) }

func clusterOf(r *topology.Redis) *config.Cluster {
	return &config.Cluster{Redis: r.URL(), Timeout: config.DefaultRedisTimeout, KeyPrefix: "test:"}
}
