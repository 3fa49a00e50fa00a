package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// What a replica does with the rate limits while Redis cannot be reached
// (Cluster.OnRedisFailure).
const (
	// OnRedisFailureDeny refuses every call a rate limit applies to until Redis answers
	// again: a limit that cannot be checked is not passed (the default).
	OnRedisFailureDeny = "deny"
	// OnRedisFailureLocal checks the limits in this replica's memory meanwhile: each
	// replica then admits up to the whole limit on its own.
	OnRedisFailureLocal = "local"
)

// Defaults of the cluster block.
const (
	DefaultRedisTimeout   = 500 * time.Millisecond
	DefaultRedisKeyPrefix = "mcp-proxy:"
)

// Cluster is the cluster block: several replicas of the proxy share state in Redis.
// Without the block the proxy keeps all its state in memory and nothing here runs.
type Cluster struct {
	// Redis is the server's URL as go-redis reads it: redis://[user:password@]host:port/db,
	// rediss:// for TLS, or unix:///path/to/socket for one server;
	// redis-sentinel://host:port/db?master_name=NAME (rediss-sentinel:// for TLS) for a
	// master found through Sentinel; redis-cluster://host:port (rediss-cluster://) for a
	// Redis Cluster (cluster.NewClient). It may hold a password, so it is never
	// logged or shown in a diagnostic (write it with env()).
	Redis string
	// OnRedisFailure is OnRedisFailureDeny (default) or OnRedisFailureLocal.
	OnRedisFailure string
	// Timeout bounds each trip to Redis on a call's path; default DefaultRedisTimeout.
	Timeout time.Duration
	// KeyPrefix starts every key the proxy writes, so that several deployments can
	// share one Redis; default DefaultRedisKeyPrefix.
	KeyPrefix string
	// Advertise is the host:port at which the other replicas reach this one's HTTP
	// listener, to forward it the requests of the sessions it holds; default the listen
	// address, which must then name a host (not 0.0.0.0 or ::).
	Advertise string
	// Key is a secret the replicas share (at least 32 bytes; write it with env()): the key
	// of the pagination cursors they mint derives from it, so that a cursor from one
	// replica is good at another, and the key that seals legacy sessions' ids, so that
	// another replica can adopt a session whose replica is gone. "": each replica has a
	// key of its own, and a session ends with its replica.
	Key string
	// PreviousKeys are keys the cluster had before Key (rotation): session ids sealed with
	// them are still read; new ones are sealed with Key.
	PreviousKeys []string
	// RedisRange is where the redis attribute is, for diagnostics reported later (the
	// cluster package checks the URL's options against go-redis).
	RedisRange hcl.Range
	DeclRange  hcl.Range
}

// AdvertiseAddress is the host:port at which the other replicas reach this one, whose
// HTTP listener is at listen: Advertise, or else listen when it names a host. An error
// says why listen alone does not do (0.0.0.0, ::, no host): Load reports it at the
// listener's address, and run makes the forwarder with what this returns.
func (c *Cluster) AdvertiseAddress(listen string) (string, error) {
	if c.Advertise != "" {
		return c.Advertise, nil
	}
	host, _, err := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); err != nil || host == "" || (ip != nil && ip.IsUnspecified()) {
		return "", fmt.Errorf("the listen address %q does not say where the other replicas reach this one: "+
			"set advertise = \"HOST:PORT\" in the cluster block", listen)
	}
	return listen, nil
}

type rawCluster struct {
	Redis          *hcl.Attribute `hcl:"redis,optional"`
	OnRedisFailure *hcl.Attribute `hcl:"on_redis_failure,optional"`
	Timeout        *hcl.Attribute `hcl:"timeout,optional"`
	KeyPrefix      *hcl.Attribute `hcl:"key_prefix,optional"`
	Advertise      *hcl.Attribute `hcl:"advertise,optional"`
	Key            *hcl.Attribute `hcl:"key,optional"`
	PreviousKeys   *hcl.Attribute `hcl:"previous_keys,optional"`

	DefRange hcl.Range `hcl:",def_range"`
}

func decodeCluster(e *evaluator, raws []rawCluster) *Cluster {
	return single(e, raws, "cluster", func(r *rawCluster) hcl.Range { return r.DefRange },
		func(raw *rawCluster) *Cluster { return decodeClusterBlock(e, raw) })
}

// decodeClusterBlock evaluates, defaults and validates one cluster block.
func decodeClusterBlock(e *evaluator, raw *rawCluster) *Cluster {
	c := &Cluster{OnRedisFailure: OnRedisFailureDeny, Timeout: DefaultRedisTimeout, KeyPrefix: DefaultRedisKeyPrefix,
		DeclRange: raw.DefRange, RedisRange: raw.DefRange}
	if raw.Redis == nil {
		e.blockErrorf(raw.DefRange, "Missing redis",
			`The cluster block needs the URL of the Redis server the replicas share, such as redis = "redis://127.0.0.1:6379/0" (write a password with env(), as in redis = env("MCP_PROXY_REDIS_URL")).`)
	} else if s, ok := e.string(raw.Redis); ok {
		c.RedisRange = raw.Redis.Expr.Range()
		if problem := checkRedisURL(s); problem != "" {
			e.errorf(raw.Redis, "Invalid redis URL", "%s", problem)
		} else {
			c.Redis = s // left empty when invalid: Options.Check then has nothing to check
		}
	}
	if s, ok := e.string(raw.OnRedisFailure); ok {
		switch s {
		case OnRedisFailureDeny, OnRedisFailureLocal:
			c.OnRedisFailure = s
		default:
			e.errorf(raw.OnRedisFailure, "Invalid on_redis_failure",
				"\"on_redis_failure\" must be %q (refuse the calls a rate limit applies to while Redis is unreachable) or %q (check the limits in each replica's memory meanwhile), not %q.",
				OnRedisFailureDeny, OnRedisFailureLocal, s)
		}
	}
	if d, ok := e.duration(raw.Timeout); ok {
		c.Timeout = d
	}
	if s, ok := e.string(raw.KeyPrefix); ok {
		if s == "" || len(s) > 64 || strings.ContainsAny(s, " \t\r\n{}") {
			e.errorf(raw.KeyPrefix, "Invalid key_prefix",
				"\"key_prefix\" must be 1 to 64 characters without spaces or braces, such as %q.", DefaultRedisKeyPrefix)
		} else {
			c.KeyPrefix = s
		}
	}
	if s, ok := e.string(raw.Advertise); ok {
		host, _, err := net.SplitHostPort(s)
		if ip := net.ParseIP(host); err != nil || host == "" || (ip != nil && ip.IsUnspecified()) {
			e.errorf(raw.Advertise, "Invalid advertise",
				"\"advertise\" must be the host:port at which the other replicas reach this one, such as \"10.0.0.5:8080\", not %q.", s)
		} else {
			c.Advertise = s
		}
	}
	if s, ok := e.string(raw.Key); ok {
		if len(s) < minClusterKeyLen {
			e.errorf(raw.Key, "Invalid key",
				"\"key\" must be a secret of at least %d bytes, such as the output of openssl rand -hex 32, written with env(); it has %d.",
				minClusterKeyLen, len(s))
		} else {
			c.Key = s
		}
	}
	if raw.Key == nil {
		e.diags = append(e.diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Cluster without key",
			Detail: "Without \"key\", a legacy session ends with the replica that holds it (no other replica can adopt it), and a pagination cursor " +
				"or requestState one replica hands a client is refused by the others. Set key = env(\"MCP_PROXY_CLUSTER_KEY\"), the same secret " +
				"of at least 32 bytes on every replica (openssl rand -hex 32).",
			Subject: raw.DefRange.Ptr(),
		})
	}
	if keys, ok := e.stringList(raw.PreviousKeys); ok {
		for _, k := range keys {
			if len(k) < minClusterKeyLen {
				e.errorf(raw.PreviousKeys, "Invalid previous_keys",
					"each of \"previous_keys\" must be a secret of at least %d bytes, as \"key\" is; one has %d.", minClusterKeyLen, len(k))
				continue
			}
			c.PreviousKeys = append(c.PreviousKeys, k)
		}
		if c.Key == "" && len(c.PreviousKeys) > 0 {
			e.errorf(raw.PreviousKeys, "Invalid previous_keys", "\"previous_keys\" needs \"key\": the key new session ids are sealed with.")
		}
	}
	return c
}

// minClusterKeyLen is the shortest cluster key: the size of the HMAC-SHA256 keys derived
// from it.
const minClusterKeyLen = 32

// checkRedisURL says what is wrong with a Redis URL, or "". It never repeats the URL:
// it may hold a password.
func checkRedisURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return "\"redis\" is not a valid URL: " + ue.Err.Error() + "."
		}
		return "\"redis\" is not a valid URL."
	}
	scheme := u.Scheme
	if u.Opaque != "" { // host:port without a scheme reads as scheme "host"
		scheme = ""
	}
	switch scheme {
	case "redis", "rediss", "redis-sentinel", "rediss-sentinel", "redis-cluster", "rediss-cluster":
		if u.Host == "" {
			return "\"redis\" names no host: write redis://host:port/db, such as redis://127.0.0.1:6379/0."
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return "\"redis\" has an invalid port: it must be 1 to 65535."
			}
		}
		if db := strings.TrimPrefix(u.Path, "/"); db != "" {
			if n, err := strconv.Atoi(db); err != nil || n < 0 {
				return "\"redis\" must end with a database number (/0, /1, …) or nothing after the host."
			}
		}
	case "unix":
		if u.Path == "" {
			return "\"redis\" names no socket: write unix:///path/to/redis.sock."
		}
	case "":
		return "\"redis\" must be a URL that starts with redis://, rediss:// (TLS) or unix://, such as redis://127.0.0.1:6379/0 " +
			"(Sentinel: redis-sentinel://host:26379/0?master_name=NAME; Redis Cluster: redis-cluster://host:6379)."
	default:
		return "\"redis\" must start with redis://, rediss:// (TLS), unix://, redis-sentinel:// or rediss-sentinel:// (Sentinel), " +
			"or redis-cluster:// or rediss-cluster:// (Redis Cluster), not " + strconv.Quote(u.Scheme+"://") + "."
	}
	return ""
}
