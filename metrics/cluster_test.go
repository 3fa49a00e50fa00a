package metrics

import (
	"maps"
	"testing"
)

func TestClusterSeries(t *testing.T) {
	m := New(Options{})
	if got := withPrefix(gather(t, m.Registry()), "mcp_proxy_cluster_"); len(got) != 0 {
		t.Fatalf("cluster series without a cluster: %v", got)
	}
	c := m.Cluster()
	c.RedisReachable(false)
	c.RedisFallback("local")
	c.RedisFallback("local")
	c.RedisReachable(true)
	c.RedisReachable(false)
	c.RedisFallback("deny")
	got := withPrefix(gather(t, m.Registry()), "mcp_proxy_cluster_")
	want := map[string]float64{
		"mcp_proxy_cluster_redis_reachable":                          0,
		"mcp_proxy_cluster_redis_failures_total":                     2,
		`mcp_proxy_cluster_redis_fallback_calls_total{mode="local"}`: 2,
		`mcp_proxy_cluster_redis_fallback_calls_total{mode="deny"}`:  1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("series = %v, want %v", got, want)
	}
}
