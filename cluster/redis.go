package cluster

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/hashicorp/hcl/v2"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// Check reports what go-redis would refuse in the cluster block's URL (an unknown
// query option, say) at the attribute's file:line; config checks the URL's shape
// itself. It goes with policy.Check in config.Options.Check.
func Check(cfg *config.Config) hcl.Diagnostics {
	c := cfg.Cluster
	if c == nil || c.Redis == "" {
		return nil
	}
	if _, err := redisOptions(c); err != nil {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid redis URL",
			Detail: fmt.Sprintf("\"redis\": %v.", err), Subject: c.RedisRange.Ptr()}}
	}
	return nil
}

// redisOptions reads the cluster block's URL into go-redis's options, with the block's
// timeout on dialling, reading and writing, and no retries: a call's trip to Redis is
// one round trip or a failure, never a second try of a script that may have run.
// Its errors never hold the URL (it may hold a password).
func redisOptions(c *config.Cluster) (*redis.Options, error) {
	o, err := redis.ParseURL(c.Redis)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL
		}
		return nil, err
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = c.Timeout, c.Timeout, c.Timeout
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	o.DisableIdentity = true // no CLIENT SETINFO on connect: one trip less, and older servers
	return o, nil
}

// NewClient makes the Redis client of the cluster block. It does not connect: the first
// command does.
func NewClient(c *config.Cluster) (*redis.Client, error) {
	o, err := redisOptions(c)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster block's redis URL: %w", err)
	}
	return redis.NewClient(o), nil
}
