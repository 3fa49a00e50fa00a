package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/policy"
)

// Observer is told when Redis becomes unreachable or reachable again, and of each call
// whose limits were decided without it. It is called on the call's path: it must be
// quick and must not block. (metrics.Metrics implements it; its methods take only
// strings and bools so that metrics need not import this package and go-redis.)
type Observer interface {
	// RedisReachable is called at each change: false when a trip to Redis failed after
	// the last one succeeded (or at the first), true when one succeeds again.
	RedisReachable(reachable bool)
	// RedisFallback counts one call whose limits were decided without Redis, by mode
	// (config.OnRedisFailureLocal or config.OnRedisFailureDeny).
	RedisFallback(mode string)
}

// ErrRedisUnavailable is what Take returns, wrapped with Redis's own error, when Redis
// cannot be reached and on_redis_failure is "deny": the Limiter then refuses the call.
var ErrRedisUnavailable = errors.New("the shared rate-limit store (redis) is unreachable")

// RetryInterval is how often, while Redis is unreachable, one call tries it again; the
// calls in between do not wait for it (they are decided as on_redis_failure says). It
// bounds how long after Redis answers again the limits are shared again (a call's trip
// more: the issue 26 figure is within 1 s), at the cost of one call in each interval
// waiting for the timeout while Redis does not answer at all.
const RetryInterval = 250 * time.Millisecond

// Buckets is the policy.BucketStore of a replica in a cluster: the shared store in
// Redis while Redis answers; while it does not, what on_redis_failure says: "deny"
// refuses the calls any rate limit applies to, "local" checks them in this replica's
// memory (a policy.MemoryBuckets of its own). The change each way is logged once and
// told to the Observer; one call per RetryInterval tries Redis again, and sharing
// resumes with the first that succeeds.
//
// It is safe for concurrent use. Close closes what it made: the in-memory store, and the
// Redis client when it was given one to close.
type Buckets struct {
	shared  policy.BucketStore
	local   *policy.MemoryBuckets // nil with "deny"
	mode    string
	timeout time.Duration
	log     zerolog.Logger
	obs     Observer
	closer  func() error // closes the Redis client; nil: the caller does

	down    atomic.Bool  // the last trip to Redis failed
	retryAt atomic.Int64 // while down: unix nanoseconds from which a call tries Redis again

	closeOnce sync.Once
	closeErr  error
}

var _ policy.BucketStore = (*Buckets)(nil)

// BucketsOptions configures NewBuckets.
type BucketsOptions struct {
	// Shared is the store in Redis (a RedisBuckets).
	Shared policy.BucketStore
	// OnRedisFailure is config.OnRedisFailureDeny (the default when empty) or
	// config.OnRedisFailureLocal.
	OnRedisFailure string
	// Timeout bounds each trip to Redis; 0: config.DefaultRedisTimeout.
	Timeout time.Duration
	// Observer, when not nil, is told of the changes and of the calls decided without
	// Redis.
	Observer Observer
	// Close, when not nil, is called by Close (the Redis client's Close).
	Close func() error
}

// NewBuckets returns the store; it has no side effects (nothing connects until a call).
func NewBuckets(opts BucketsOptions, log zerolog.Logger) (*Buckets, error) {
	b := &Buckets{shared: opts.Shared, mode: opts.OnRedisFailure, timeout: opts.Timeout, obs: opts.Observer,
		closer: opts.Close, log: log.With().Str("component", "cluster").Logger()}
	switch b.mode {
	case "":
		b.mode = config.OnRedisFailureDeny
	case config.OnRedisFailureDeny:
	case config.OnRedisFailureLocal:
		b.local = policy.NewMemoryBuckets(0, 0)
	default:
		return nil, fmt.Errorf("on_redis_failure must be %q or %q, not %q", config.OnRedisFailureDeny, config.OnRedisFailureLocal, b.mode)
	}
	if b.timeout <= 0 {
		b.timeout = config.DefaultRedisTimeout
	}
	if b.shared == nil {
		return nil, errors.New("cluster buckets need a shared store")
	}
	return b, nil
}

// New makes the store of a configuration's cluster block: a Redis client, the shared
// store over it, and the fallback on_redis_failure asks for. Close closes the client.
func New(c *config.Cluster, obs Observer, log zerolog.Logger) (*Buckets, error) {
	client, err := NewClient(c)
	if err != nil {
		return nil, err
	}
	b, err := NewBuckets(BucketsOptions{Shared: NewRedisBuckets(client, c.KeyPrefix), OnRedisFailure: c.OnRedisFailure,
		Timeout: c.Timeout, Observer: obs, Close: client.Close}, log)
	if err != nil {
		client.Close()
		return nil, err
	}
	return b, nil
}

// Take implements policy.BucketStore.
func (b *Buckets) Take(ctx context.Context, buckets []policy.Bucket, now time.Time) (int, time.Duration, error) {
	if b.down.Load() {
		at := b.retryAt.Load()
		if ns := time.Now().UnixNano(); ns < at || !b.retryAt.CompareAndSwap(at, ns+int64(RetryInterval)) {
			return b.fallback(ctx, buckets, now, nil)
		}
		// This call tries Redis again.
	}
	tctx, cancel := context.WithTimeout(ctx, b.timeout)
	refused, delay, err := b.shared.Take(tctx, buckets, now)
	cancel()
	if err == nil {
		if b.down.CompareAndSwap(true, false) {
			b.log.Warn().Msg("redis is reachable again: rate limits are shared by the replicas again")
			if b.obs != nil {
				b.obs.RedisReachable(true)
			}
		}
		return refused, delay, nil
	}
	if ctx.Err() != nil { // the call was cancelled: that says nothing about Redis
		return 0, 0, ctx.Err()
	}
	if b.down.CompareAndSwap(false, true) {
		b.retryAt.Store(time.Now().Add(RetryInterval).UnixNano())
		ev := b.log.Error().Err(err).Str("on_redis_failure", b.mode)
		if b.local != nil {
			ev.Msg("redis is unreachable: rate limits are checked in this replica's memory until it answers again")
		} else {
			ev.Msg("redis is unreachable: calls that a rate limit applies to are refused until it answers again")
		}
		if b.obs != nil {
			b.obs.RedisReachable(false)
		}
	}
	return b.fallback(ctx, buckets, now, err)
}

// fallback decides a call without Redis, as on_redis_failure says; err is Redis's error
// when this call tried it.
func (b *Buckets) fallback(ctx context.Context, buckets []policy.Bucket, now time.Time, err error) (int, time.Duration, error) {
	if b.obs != nil {
		b.obs.RedisFallback(b.mode)
	}
	if b.local != nil {
		return b.local.Take(ctx, buckets, now)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %w", ErrRedisUnavailable, err)
	}
	return 0, 0, ErrRedisUnavailable
}

// Reachable reports whether the last trip to Redis succeeded (true before the first).
func (b *Buckets) Reachable() bool { return !b.down.Load() }

// Close stops the in-memory store's sweeper and closes the Redis client when
// BucketsOptions.Close was given. It is safe to call twice.
func (b *Buckets) Close() error {
	b.closeOnce.Do(func() {
		if b.local != nil {
			b.local.Close()
		}
		if b.closer != nil {
			b.closeErr = b.closer()
		}
	})
	return b.closeErr
}
