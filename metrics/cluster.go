package metrics

import "github.com/prometheus/client_golang/prometheus"

// Cluster is the series of a replica's shared state in Redis (the cluster block): whether
// Redis answers, how often it stopped answering, and the calls whose rate limits were
// decided without it. It implements cluster.Observer (by its methods' shape: this
// package does not import cluster, and so not go-redis).
type Cluster struct {
	reachable prometheus.Gauge
	failures  prometheus.Counter
	fallbacks *prometheus.CounterVec
	local     prometheus.Counter
	deny      prometheus.Counter
}

// Cluster registers the cluster series in m's registry and returns them; call it once,
// and only when the configuration has a cluster block (without one the series would
// only say nothing).
func (m *Metrics) Cluster() *Cluster {
	c := &Cluster{
		reachable: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "cluster_redis_reachable",
			Help: "1 while the last trip to the shared Redis succeeded, 0 while Redis is unreachable."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "cluster_redis_failures_total",
			Help: "Times Redis became unreachable (changes from reachable to unreachable)."}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "cluster_redis_fallback_calls_total",
			Help: "Calls whose rate limits were decided without Redis, by on_redis_failure (local: checked in this replica's memory; deny: refused)."},
			[]string{"mode"}),
	}
	c.reachable.Set(1)
	c.local, c.deny = c.fallbacks.WithLabelValues("local"), c.fallbacks.WithLabelValues("deny")
	m.reg.MustRegister(c.reachable, c.failures, c.fallbacks)
	return c
}

// RedisReachable records a change of Redis's reachability.
func (c *Cluster) RedisReachable(reachable bool) {
	if reachable {
		c.reachable.Set(1)
		return
	}
	c.reachable.Set(0)
	c.failures.Inc()
}

// RedisFallback counts one call decided without Redis.
func (c *Cluster) RedisFallback(mode string) {
	switch mode {
	case "local":
		c.local.Inc()
	case "deny":
		c.deny.Inc()
	default:
		c.fallbacks.WithLabelValues(mode).Inc()
	}
}
