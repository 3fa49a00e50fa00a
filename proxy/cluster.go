package proxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/auth"
	"github.com/mcp-proxy/mcp-proxy/cluster"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/server"
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

// The cluster's shared sessions are what the HTTP handler adopts sessions through.
var _ server.SessionShare = (*cluster.Sessions)(nil)

// startForwarder makes and starts the forwarder of legacy sessions' requests between the
// replicas of the cluster block, for an HTTP listener at address with bodies of at most
// maxBody and sessions idle for sessionIdle at most; nil without the block. With the
// block's key, sessions can also be adopted by another replica when theirs is gone
// (cluster.Sessions). The caller closes it after the HTTP handler.
func startForwarder(cfg *config.Config, address string, maxBody int, sessionIdle time.Duration, log zerolog.Logger) (*cluster.Forwarder, error) {
	c := cfg.Cluster
	if c == nil {
		return nil, nil
	}
	advertise, err := c.AdvertiseAddress(address) // config reports it at file:line already: this is the same check
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	f, err := cluster.NewForwarder(c, advertise, maxBody, log)
	if err != nil {
		return nil, err
	}
	if c.Key != "" {
		sealer, err := cluster.NewSealer(c.Key, c.PreviousKeys...)
		if err != nil {
			f.Close()
			return nil, err
		}
		cluster.NewSessions(f, sealer, sessionIdle)
	}
	f.Start()
	log.Info().Str("replica", f.ID()).Str("advertise", advertise).Bool("adoptable", c.Key != "").
		Msg("cluster: legacy sessions' requests forwarded to the replica that holds them")
	if c.Key == "" {
		log.Warn().Msg("cluster: no key: a pagination cursor or an upstream's requestState a replica hands a modern (stateless) client is refused by the others, " +
			"and a legacy session ends with the replica that holds it (none can adopt it); set key = env(...) in the cluster block")
	}
	return f, nil
}

// forwarding sets what the HTTP handler takes of a forwarder into o (nothing without
// one): the session ids' prefix, the forwarding of legacy sessions' requests, the
// adoption of sessions (nil without the cluster's key; never a typed nil), and the
// forwarding of modern retries and tasks' requests to the replica that holds them.
func forwarding(f *cluster.Forwarder, o *server.HTTPOptions) {
	if f == nil {
		return
	}
	if s := f.Sessions(); s != nil {
		o.Share = s
	}
	o.SessionIDPrefix = f.SessionIDPrefix()
	o.Forward = func(w http.ResponseWriter, r *http.Request, sid string) bool {
		defer withCredentials(r)()
		return f.Forward(w, r, sid)
	}
	o.Replica, o.Forwarded = f.ID(), f.Forwarded
	o.ForwardTo = func(w http.ResponseWriter, r *http.Request, replica string, body []byte) bool {
		defer withCredentials(r)()
		return f.ForwardTo(w, r, replica, body)
	}
}

// withCredentials puts the client's credentials back on r for the replica it is
// forwarded to, and returns what takes them off again. The authenticator removed them;
// the replica the request goes to authenticates it again, so it gets them back for that
// (the header is the authenticator's copy), and loses them again when this replica
// serves it.
func withCredentials(r *http.Request) func() {
	creds := auth.Credentials(r.Context())
	for k, v := range creds {
		r.Header[k] = v
	}
	return func() {
		for k := range creds {
			r.Header.Del(k)
		}
	}
}

// newTaskStore makes the task store the replicas share through Redis, for the replica
// of forwarder f (the router's TaskStore); nil without a forwarder (the router keeps its
// tasks in memory). It uses the forwarder's Redis client, which outlives the router, and
// f writes the tasks recorded here again when Redis has lost them.
func newTaskStore(f *cluster.Forwarder) router.TaskStore {
	if f == nil {
		return nil
	}
	return cluster.NewTasks(f)
}

// clusterCursorKey derives, from the cluster block's shared key, the key of the
// pagination cursors (router.Options.CursorKey), so that a cursor one replica hands a
// client is good at the others; nil without a key (each process then has a random key of
// its own). It is an HMAC-SHA256 of a label, so that keys derived later for other uses
// cannot stand for it.
func clusterCursorKey(cfg *config.Config) []byte {
	if cfg.Cluster == nil || cfg.Cluster.Key == "" {
		return nil
	}
	m := hmac.New(sha256.New, []byte(cfg.Cluster.Key))
	m.Write([]byte("mcp-proxy cluster: cursor key"))
	return m.Sum(nil)
}

// clusterStateKey derives, from the cluster block's shared key, the key of the
// requestState handles (server.Options.StateKey), so that an upstream's requestState one
// replica hands a modern client (wrapped and bound to its principal) is good at the
// others; nil without a key. A handle of a call parked by the proxy is forwarded to its
// replica instead (HTTPOptions.ForwardTo), key or not.
func clusterStateKey(cfg *config.Config) []byte {
	if cfg.Cluster == nil || cfg.Cluster.Key == "" {
		return nil
	}
	m := hmac.New(sha256.New, []byte(cfg.Cluster.Key))
	m.Write([]byte("mcp-proxy cluster: requestState key"))
	return m.Sum(nil)
}
