package policy

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// BucketStore keeps the token buckets of the rate limits, by key. The Limiter owns what a
// limit means (which calls it applies to, how its key is formed); the store only keeps
// buckets and takes tokens from them. The in-memory store (MemoryBuckets) serves one
// process; a store shared by several replicas (Redis) makes their limits global.
//
// Concurrency: Take is called concurrently, from the goroutines that admit calls.
//
// Errors: when Take returns an error the Limiter cannot know whether the call is within
// its limits, and it fails closed: the call is refused (Refusal.Err is set) and the
// policy's limits stage answers with a proxy error and logs it. Whether a store that
// cannot be reached should rather admit calls (fail open) is the Limiter's decision to
// make, not the store's: a store reports the failure and takes nothing it can avoid.
type BucketStore interface {
	// Take takes one token from each of the buckets, or from none of them: the call is
	// admitted by every limit that applies or by none, so a refused call uses up nothing.
	// refused is -1 when every bucket had a token; otherwise it is the index in buckets
	// of the first one that had none, and retryAfter is how long until it has one.
	//
	// A bucket is created full (Burst tokens) the first time its key is seen; when a key
	// comes with another Limit or Burst than before (the configuration was reloaded), the
	// bucket keeps its tokens and takes the new values. The keys in one call are distinct
	// in practice, but a key that repeats needs one token per occurrence.
	//
	// now is the caller's clock. A store shared by processes may use a clock of its own
	// instead (Redis's TIME), so that the replicas' clock skew does not matter.
	//
	// Expiry: a bucket unused for Burst/Limit seconds is full again, so forgetting it
	// then changes nothing; a store that expires keys (Redis PEXPIRE) may do so after
	// that long. A store may forget buckets sooner under memory pressure (it then
	// admits more calls than the limit, never fewer).
	Take(ctx context.Context, buckets []Bucket, now time.Time) (refused int, retryAfter time.Duration, err error)
}

// Bucket names one token bucket of a Take and says how it fills.
type Bucket struct {
	Key   string     // the limit's name and the values of its per keys (see Limit.Per)
	Limit rate.Limit // tokens added per second
	Burst int        // tokens it holds at most, and when new
}

// MemoryBuckets is the in-memory BucketStore: a token bucket per key (x/time/rate's
// arithmetic), in a map with eviction. A bucket unused for a while (10 minutes by default) is dropped by a
// sweeper (it is full again by then), and when the map reaches its cap (100 000 keys by
// default) the least recently used tenth goes too, so that many principals cannot grow
// memory without bound.
//
// Its zero value is not usable: make one with NewMemoryBuckets. The sweeper goroutine
// starts with the first Take and stops at Close.
type MemoryBuckets struct {
	bucketMap

	stop chan struct{} // closed by Close
	wg   sync.WaitGroup
}

var _ BucketStore = (*MemoryBuckets)(nil)

// bucketMap is the map of MemoryBuckets. The Limiter embeds the one of the store it
// made itself.
type bucketMap struct {
	idleAfter time.Duration

	mu        sync.Mutex // guards the fields below, and the buckets in the map
	buckets   map[string]*bucket
	maxKeys   int
	evictions uint64 // counts evictions that dropped buckets
	sweeping  bool   // the sweeper has started, or must not start (closed)
}

// bucket is one token bucket, with x/time/rate's arithmetic (tokens accrue at limit per
// second up to burst), kept under the map's lock: a rate.Limiter's own lock would be
// taken twice more per bucket, for nothing, inside the map's.
type bucket struct {
	limit  rate.Limit
	burst  int
	tokens float64 // as of last
	last   int64   // unix nanoseconds when tokens was computed
	used   int64   // unix nanoseconds of the last use
}

// tokensAt is what b holds at ns (as rate.Limiter.TokensAt).
func (b *bucket) tokensAt(ns int64) float64 {
	if b.limit == rate.Inf {
		return math.Inf(1)
	}
	elapsed := time.Duration(max(ns-b.last, 0))
	return min(b.tokens+elapsed.Seconds()*float64(b.limit), float64(b.burst))
}

// take takes n tokens at ns (as rate.Limiter.AllowN, once it is known there are n).
func (b *bucket) take(ns int64, n float64) {
	if b.limit == rate.Inf {
		return
	}
	b.tokens, b.last = b.tokensAt(ns)-n, ns
}

// delay is how long until b holds need tokens, from holding tokens.
func (b *bucket) delay(need, tokens float64) time.Duration {
	return time.Duration((need - tokens) / float64(b.limit) * float64(time.Second))
}

// Defaults of NewMemoryBuckets.
const (
	defaultIdleAfter = 10 * time.Minute
	defaultMaxKeys   = 100_000
)

// NewMemoryBuckets returns an in-memory store that drops buckets idle for idleAfter
// (0: 10 minutes) and keeps at most maxKeys of them (0: 100 000). It has no side effects.
func NewMemoryBuckets(idleAfter time.Duration, maxKeys int) *MemoryBuckets {
	if idleAfter <= 0 {
		idleAfter = defaultIdleAfter
	}
	if maxKeys <= 0 {
		maxKeys = defaultMaxKeys
	}
	return &MemoryBuckets{bucketMap: bucketMap{idleAfter: idleAfter, maxKeys: maxKeys, buckets: map[string]*bucket{}},
		stop: make(chan struct{})}
}

// Take implements BucketStore. It never fails, and it allocates only a new key's
// bucket. The map's mutex is held for the whole batch, so that the check and the taking
// are one step for every bucket of the call.
func (m *MemoryBuckets) Take(_ context.Context, buckets []Bucket, now time.Time) (int, time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.sweeping {
		m.sweeping = true
		m.wg.Add(1)
		go m.sweep()
	}
	ns := now.UnixNano()
	gen := m.evictions
	var found [4]*bucket // the first buckets of the call, looked up once
	for i := range buckets {
		b := m.getLocked(&buckets[i], now, ns)
		if i < len(found) {
			found[i] = b
		}
		need := 1.0
		for j := range i { // a key that repeats needs a token per occurrence
			if buckets[j].Key == buckets[i].Key {
				need++
			}
		}
		if tokens := b.tokensAt(ns); tokens < need {
			return i, b.delay(need, tokens), nil
		}
	}
	for i := range buckets {
		var b *bucket
		if i < len(found) && m.evictions == gen {
			b = found[i]
		} else if b = m.buckets[buckets[i].Key]; b == nil {
			// Evicted under pressure while this call made a bucket: full again.
			b = m.getLocked(&buckets[i], now, ns)
		}
		b.take(ns, 1) // there is a token: checked above, under the same lock
	}
	return -1, 0, nil
}

// getLocked returns the bucket of spec, making it (full) if there is none, and marks it
// used; m.mu is held.
func (m *bucketMap) getLocked(spec *Bucket, now time.Time, ns int64) *bucket {
	b := m.buckets[spec.Key]
	if b == nil {
		if len(m.buckets) >= m.maxKeys {
			m.evictLocked(now, true)
		}
		b = &bucket{limit: spec.Limit, burst: spec.Burst, tokens: float64(spec.Burst), last: ns}
		m.buckets[spec.Key] = b
	} else if b.limit != spec.Limit || b.burst != spec.Burst {
		// A reload changed the limit: the bucket keeps its tokens (as SetLimitAt and
		// SetBurstAt do).
		if b.limit != rate.Inf {
			b.tokens = b.tokensAt(ns)
		}
		b.last, b.limit, b.burst = ns, spec.Limit, spec.Burst
	}
	b.used = ns
	return b
}

// Close stops the sweeper. It is safe to call twice, and Take still works after it
// (without the sweeper: eviction under pressure goes on).
func (m *MemoryBuckets) Close() {
	m.mu.Lock()
	m.sweeping = true // a Take after Close starts no sweeper
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// Len is the number of buckets kept (for tests and metrics).
func (m *MemoryBuckets) Len() int { return m.size() }

func (m *bucketMap) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.buckets)
}

// sweep drops buckets unused for idleAfter (a bucket idle that long is full again, so
// dropping it changes nothing for its key), until Close.
func (m *MemoryBuckets) sweep() {
	defer m.wg.Done()
	t := time.NewTicker(max(m.idleAfter/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.mu.Lock()
			m.evictLocked(now, false)
			m.mu.Unlock()
		}
	}
}

// evictLocked drops idle buckets; under pressure (the key cap reached), the least
// recently used tenth goes too. m.mu is held.
func (m *bucketMap) evictLocked(now time.Time, pressure bool) {
	m.evictions++
	cutoff := now.Add(-m.idleAfter).UnixNano()
	for k, b := range m.buckets {
		if b.used < cutoff {
			delete(m.buckets, k)
		}
	}
	if !pressure || len(m.buckets) < m.maxKeys {
		return
	}
	oldest := now.UnixNano()
	for _, b := range m.buckets {
		oldest = min(oldest, b.used)
	}
	cutoff = oldest + (now.UnixNano()-oldest)/10
	for k, b := range m.buckets {
		if b.used <= cutoff {
			delete(m.buckets, k)
		}
	}
}
