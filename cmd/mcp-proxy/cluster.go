package main

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/cluster"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/policy"
)

// The metrics' cluster series are the cluster package's Observer (metrics does not
// import cluster: this is where the two meet).
var _ cluster.Observer = (*metrics.Cluster)(nil)

// checkConfig is the checks of the packages that own part of the file's meaning: the
// policy's, and the cluster block's Redis URL against go-redis.
func checkConfig(cfg *config.Config) hcl.Diagnostics {
	return append(policy.Check(cfg), cluster.Check(cfg)...)
}

// newBucketStore makes the rate limits' bucket store of the cluster block, shared by the
// replicas through Redis, and its close; a nil store (never a typed nil) without the
// block: the limiter then keeps its buckets in memory. It connects to nothing yet. The
// caller closes it after the chain that uses it.
func newBucketStore(cfg *config.Config, log zerolog.Logger, obs *observers) (policy.BucketStore, func() error, error) {
	if cfg.Cluster == nil {
		return nil, func() error { return nil }, nil
	}
	var o cluster.Observer
	if obs != nil && obs.metrics != nil {
		o = obs.metrics.Cluster()
	}
	b, err := cluster.New(cfg.Cluster, o, log)
	if err != nil {
		return nil, nil, err
	}
	log.Info().Str("on_redis_failure", cfg.Cluster.OnRedisFailure).Dur("timeout", cfg.Cluster.Timeout).
		Msg("cluster: rate limits shared through redis")
	return b, b.Close, nil
}
