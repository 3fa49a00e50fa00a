package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// Check reports what go-redis would refuse in the cluster block's URL (an unknown
// query option, say, or a Sentinel URL without master_name) at the attribute's
// file:line; config checks the URL's shape itself. It goes with policy.Check in
// config.Options.Check.
func Check(cfg *config.Config) hcl.Diagnostics {
	c := cfg.Cluster
	if c == nil || c.Redis == "" {
		return nil
	}
	if _, err := newOptions(c); err != nil {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid redis URL",
			Detail: fmt.Sprintf("\"redis\": %v.", err), Subject: c.RedisRange.Ptr()}}
	}
	return nil
}

// The URL's scheme says which kind of Redis the replicas share: one server (redis://,
// rediss://, unix://), a master found through Sentinel (redis-sentinel://,
// rediss-sentinel://: the sentinels' addresses, master_name=, the master's own
// credentials in username= and password=), or a Redis Cluster (redis-cluster://,
// rediss-cluster://: seed nodes). More sentinels or seeds go in addr= query options.
const (
	sentinelSuffix = "-sentinel"
	clusterSuffix  = "-cluster"
)

// clientOptions is what NewClient makes a client of: one of the three.
type clientOptions struct {
	single   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
}

// newOptions reads the cluster block's URL into go-redis's options, with the block's
// timeout on dialling, reading and writing, and no retries: a call's trip to Redis is
// one round trip or a failure, never a second try of a script that may have run (a
// cluster's MOVED and ASK redirections are followed: the command did not run). Its
// errors never hold the URL (it may hold a password).
func newOptions(c *config.Cluster) (clientOptions, error) {
	var o clientOptions
	scheme, rest, ok := strings.Cut(c.Redis, "://")
	if !ok {
		scheme = ""
	}
	var err error
	switch {
	case strings.HasSuffix(scheme, sentinelSuffix):
		o.failover, err = redis.ParseFailoverURL(strings.TrimSuffix(scheme, sentinelSuffix) + "://" + rest)
		if err == nil && o.failover.MasterName == "" {
			err = errors.New("a Sentinel URL needs master_name=NAME, the name the sentinels know the master by")
		}
		if err == nil {
			f := o.failover
			f.DialTimeout, f.ReadTimeout, f.WriteTimeout = c.Timeout, c.Timeout, c.Timeout
			f.ContextTimeoutEnabled, f.MaxRetries, f.DisableIdentity = true, -1, true
		}
	case strings.HasSuffix(scheme, clusterSuffix):
		o.cluster, err = redis.ParseClusterURL(strings.TrimSuffix(scheme, clusterSuffix) + "://" + rest)
		if err == nil {
			if u, perr := url.Parse(c.Redis); perr == nil && strings.Trim(u.Path, "/") != "" && strings.Trim(u.Path, "/") != "0" {
				err = errors.New("a Redis Cluster has database 0 only: end the URL with the host:port, or /0")
			}
		}
		if err == nil {
			k := o.cluster
			k.DialTimeout, k.ReadTimeout, k.WriteTimeout = c.Timeout, c.Timeout, c.Timeout
			k.ContextTimeoutEnabled, k.MaxRetries, k.DisableIdentity = true, -1, true
		}
	default:
		o.single, err = redis.ParseURL(c.Redis)
		if err == nil {
			s := o.single
			s.DialTimeout, s.ReadTimeout, s.WriteTimeout = c.Timeout, c.Timeout, c.Timeout
			s.ContextTimeoutEnabled = true
			s.MaxRetries = -1
			s.DisableIdentity = true // no CLIENT SETINFO on connect: one trip less, and older servers
		}
	}
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL
		}
		if strings.Contains(err.Error(), "master_name") && o.failover == nil {
			err = fmt.Errorf("%w (a Sentinel URL starts with redis-sentinel:// or rediss-sentinel://)", err)
		}
		return clientOptions{}, err
	}
	return o, nil
}

// NewClient makes the Redis client of the cluster block: of one server, of the master
// Sentinel names (following its failovers), or of a Redis Cluster. It does not connect:
// the first command does.
func NewClient(c *config.Cluster) (redis.UniversalClient, error) { return newHookedClient(c, nil) }

// newHookedClient is NewClient with onConnect, when not nil, called (it must not block) each
// time the client has made a new connection: after Redis was unreachable or restarted,
// the first command that reaches it again.
func newHookedClient(c *config.Cluster, onConnect func()) (redis.UniversalClient, error) {
	o, err := newOptions(c)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster block's redis URL: %w", err)
	}
	if onConnect != nil {
		hook := func(context.Context, *redis.Conn) error { onConnect(); return nil }
		switch {
		case o.failover != nil:
			o.failover.OnConnect = hook
		case o.cluster != nil:
			o.cluster.OnConnect = hook
		default:
			o.single.OnConnect = hook
		}
	}
	switch {
	case o.failover != nil:
		return redis.NewFailoverClient(o.failover), nil
	case o.cluster != nil:
		return redis.NewClusterClient(o.cluster), nil
	}
	return redis.NewClient(o.single), nil
}

// SetLogger sends go-redis's own log lines (a failed dial, a Sentinel failover) to log,
// as JSON lines at warn level with component "redis", instead of the library's default
// plain lines on stderr. go-redis has one logger per process; it costs nothing until
// a Redis client logs.
func SetLogger(log zerolog.Logger) {
	redis.SetLogger(redisLog{log.With().Str("component", "redis").Logger()})
}

type redisLog struct{ log zerolog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.Warn().Ctx(ctx).Msgf(format, v...)
}
