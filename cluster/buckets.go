package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/mcp-proxy/mcp-proxy/policy"
)

// RedisBuckets is a policy.BucketStore in Redis, shared by every replica that uses the
// same server and key prefix. A call's buckets are checked and taken by one Lua script
// (takeScript), so a call costs one round trip whatever the number of limits that apply,
// and the check-and-take is atomic across replicas: the limits are exact to within the
// calls in flight.
//
// The arithmetic is GCRA, which is a token bucket kept as one number: a bucket's
// theoretical arrival time (TAT), the moment it will be full again. With the interval
// T = 1/rate, a call is admitted when max(TAT, now) + T - now <= burst·T, and then
// TAT = max(TAT, now) + T. The clock is Redis's TIME, so the replicas' clocks do not
// matter, and a bucket's key expires at its TAT (full again: forgetting it changes
// nothing). The value also keeps T, so that a reload that changes a limit keeps the
// bucket's missing tokens (as policy.BucketStore asks) rather than its time until full.
//
// A bucket's key is the prefix, then the policy's (policy.Bucket.Key: the limit's name
// and its per keys; a principal by its identity, "api_key:alice" and
// "jwt:https://idp.example.com#alice" being two people with two buckets). All the
// buckets are in one hash slot (the key prefix is followed by the hash tag {rl}, and
// only a key's first tag counts, so braces in a principal's name move nothing), which a
// multi-key script needs on Redis Cluster.
//
// Take returns the error of Redis (unreachable, timed out) as it is: what to do then is
// Buckets' decision. Its zero value is not usable: make one with NewRedisBuckets.
type RedisBuckets struct {
	client redis.Scripter
	prefix string // key prefix and hash tag
	bufs   sync.Pool
}

var _ policy.BucketStore = (*RedisBuckets)(nil)

// takeBuf is the arguments of one script run, reused.
type takeBuf struct {
	keys []string
	args []any
}

// NewRedisBuckets returns the store over client (a *redis.Client, or a cluster or
// failover client), with every key under prefix. It has no side effects.
func NewRedisBuckets(client redis.Scripter, prefix string) *RedisBuckets {
	s := &RedisBuckets{client: client, prefix: prefix + "{rl}:"}
	s.bufs.New = func() any { return new(takeBuf) }
	return s
}

// takeScript checks and takes a call's buckets. KEYS are the buckets' keys; ARGV holds,
// for each, its interval in microseconds (0: no limit) and its burst. It answers -1
// when every bucket had a token (and they are taken), or {i, µs}: the bucket at 0-based
// index i had none, and will have one in µs; nothing is taken then.
//
// A stored value is "TAT T", both in microseconds of Redis's clock. A key that repeats
// in one call needs a token per occurrence. 1e-3 µs of slack keeps a call that exactly
// fills the bucket from being refused by rounding.
var takeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local pending, intervals, order = {}, {}, {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local interval = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  if interval > 0 then
    local tat = pending[key]
    if tat == nil then
      tat = now
      local v = redis.call('GET', key)
      if v then
        local stored, old = string.match(v, '^(%S+) (%S+)$')
        stored, old = tonumber(stored), tonumber(old)
        if stored and old and old > 0 and stored > now then
          tat = now + (stored - now) / old * interval
        end
      end
      order[#order + 1] = key
      intervals[key] = interval
    end
    local new = tat + interval
    local over = new - now - burst * interval
    if over > 0.001 then
      return {i - 1, math.ceil(over)}
    end
    pending[key] = new
  end
end
for _, key in ipairs(order) do
  local tat = pending[key]
  redis.call('SET', key, string.format('%.17g %.17g', tat, intervals[key]), 'PX', math.max(1, math.ceil((tat - now) / 1000)))
end
return -1
`)

// Take implements policy.BucketStore; now is not used (Redis's clock is).
func (s *RedisBuckets) Take(ctx context.Context, buckets []policy.Bucket, _ time.Time) (int, time.Duration, error) {
	buf := s.bufs.Get().(*takeBuf)
	defer func() {
		clear(buf.keys)
		clear(buf.args)
		buf.keys, buf.args = buf.keys[:0], buf.args[:0]
		s.bufs.Put(buf)
	}()
	for _, b := range buckets {
		var interval float64 // µs per token; 0: no limit
		if b.Limit != rate.Inf && b.Limit > 0 {
			interval = 1e6 / float64(b.Limit)
		}
		var k strings.Builder
		k.Grow(len(s.prefix) + len(b.Key))
		k.WriteString(s.prefix)
		k.WriteString(b.Key)
		buf.keys = append(buf.keys, k.String())
		buf.args = append(buf.args, interval, b.Burst)
	}
	v, err := takeScript.Run(ctx, s.client, buf.keys, buf.args...).Result()
	if err != nil {
		return 0, 0, fmt.Errorf("taking tokens in redis: %w", err)
	}
	switch v := v.(type) {
	case int64:
		if v == -1 {
			return -1, 0, nil
		}
	case []any:
		if len(v) == 2 {
			i, ok1 := v[0].(int64)
			us, ok2 := v[1].(int64)
			if ok1 && ok2 && i >= 0 && int(i) < len(buckets) && us >= 0 {
				return int(i), time.Duration(min(us, math.MaxInt64/1000)) * time.Microsecond, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("taking tokens in redis: %w: %v", errAnswer, v)
}

// errAnswer: the script answered something it never answers (another program uses the
// keys?).
var errAnswer = errors.New("unexpected answer from the rate-limit script")
