package policy

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

// Limit is one token bucket, as configured: Rate calls per second with bursts of Burst,
// counted separately for each combination of the Per keys ("principal", "upstream",
// "tool"; none means one bucket for everything it matches).
type Limit struct {
	Name       string
	Rate       rate.Limit
	Burst      int
	Per        []string
	Tools      []string // exposed names (or URIs) it applies to; empty: all
	Upstreams  []string
	Principals []string
	Groups     []string
}

// Refusal says why a call was refused by a limit.
type Refusal struct {
	Limit      string
	RetryAfter time.Duration
	Message    string
}

// Limiter applies every matching limit to each call: a call is admitted only if all of
// them have a token, and takes none when any refuses. Buckets not used for IdleAfter
// are dropped, so many principals cannot grow memory without bound.
type Limiter struct {
	limits    []compiledLimit
	inflight  map[string]*inflightCap // per upstream
	idleAfter time.Duration

	mu      sync.Mutex
	buckets map[string]*bucket
	maxKeys int
	stop    chan struct{}
	wg      sync.WaitGroup
}

type compiledLimit struct {
	Limit
	tools, upstreams                   globs
	who                                who
	perPrincipal, perUpstream, perTool bool
}

type bucket struct {
	lim  *rate.Limiter
	used atomic.Int64 // unix nanoseconds of the last use
}

type inflightCap struct {
	max int64
	n   atomic.Int64
}

// NewLimiter compiles limits; inflight caps calls in flight per upstream name.
func NewLimiter(limits []Limit, inflight map[string]int) (*Limiter, error) {
	l := &Limiter{inflight: map[string]*inflightCap{}, buckets: map[string]*bucket{},
		idleAfter: 10 * time.Minute, maxKeys: 100_000, stop: make(chan struct{})}
	for _, lim := range limits {
		c := compiledLimit{Limit: lim}
		for _, p := range lim.Per {
			switch p {
			case "principal":
				c.perPrincipal = true
			case "upstream":
				c.perUpstream = true
			case "tool":
				c.perTool = true
			default:
				return nil, fmt.Errorf("limit %q: per must list principal, upstream or tool, got %q", lim.Name, p)
			}
		}
		var err error
		if c.tools, err = compileGlobs(lim.Tools); err == nil {
			if c.upstreams, err = compileGlobs(lim.Upstreams); err == nil {
				c.who, err = newWho(lim.Principals, lim.Groups)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("limit %q: %v", lim.Name, err)
		}
		if lim.Rate <= 0 || lim.Burst < 1 {
			return nil, fmt.Errorf("limit %q: rate and burst must be positive", lim.Name)
		}
		l.limits = append(l.limits, c)
	}
	for name, n := range inflight {
		if n > 0 {
			l.inflight[name] = &inflightCap{max: int64(n)}
		}
	}
	if len(l.limits) > 0 {
		l.wg.Add(1)
		go l.sweep()
	}
	return l, nil
}

// Close stops the idle sweeper.
func (l *Limiter) Close() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

func (c *compiledLimit) applies(p *principal.Principal, it *Item) bool {
	return c.tools.match(it.Name) && c.upstreams.match(it.Upstream) && c.who.matches(p)
}

// key names the bucket of a call under c.
func (c *compiledLimit) key(p *principal.Principal, it *Item) string {
	var b strings.Builder
	b.WriteString(c.Name)
	if c.perPrincipal {
		b.WriteString("\x00p:")
		if p != nil {
			b.WriteString(p.Name)
		}
	}
	if c.perUpstream {
		b.WriteString("\x00u:")
		b.WriteString(it.Upstream)
	}
	if c.perTool {
		b.WriteString("\x00t:")
		b.WriteString(it.Name)
	}
	return b.String()
}

func (l *Limiter) bucketFor(c *compiledLimit, key string, now time.Time) *bucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= l.maxKeys {
			l.evictLocked(now, true)
		}
		b = &bucket{lim: rate.NewLimiter(c.Rate, c.Burst)}
		l.buckets[key] = b
	}
	b.used.Store(now.UnixNano())
	return b
}

// Admit takes a token from every limit that applies, and a slot of the upstream's
// in-flight cap; release gives the slot back when the call is over. A refusal takes
// nothing.
func (l *Limiter) Admit(p *principal.Principal, it *Item) (release func(), refusal *Refusal) {
	if l == nil {
		return func() {}, nil
	}
	now := time.Now()
	var reservations []*rate.Reservation
	for i := range l.limits {
		c := &l.limits[i]
		if !c.applies(p, it) {
			continue
		}
		b := l.bucketFor(c, c.key(p, it), now)
		r := b.lim.ReserveN(now, 1)
		if delay := r.DelayFrom(now); !r.OK() || delay > 0 {
			r.CancelAt(now)
			for _, taken := range reservations {
				taken.CancelAt(now)
			}
			if !r.OK() {
				delay = time.Second
			}
			return nil, &Refusal{Limit: c.Name, RetryAfter: delay,
				Message: fmt.Sprintf("rate limit %q exceeded (%g calls/s, burst %d); retry after %s", c.Name, float64(c.Rate), c.Burst, delay.Round(time.Millisecond))}
		}
		reservations = append(reservations, r)
	}
	if ic := l.inflight[it.Upstream]; ic != nil {
		if ic.n.Add(1) > ic.max {
			ic.n.Add(-1)
			for _, taken := range reservations {
				taken.CancelAt(now)
			}
			return nil, &Refusal{Limit: "max_in_flight", RetryAfter: 100 * time.Millisecond,
				Message: fmt.Sprintf("upstream %q already has its maximum of %d calls in flight", it.Upstream, ic.max)}
		}
		var once atomic.Bool
		return func() {
			if once.CompareAndSwap(false, true) {
				ic.n.Add(-1)
			}
		}, nil
	}
	return func() {}, nil
}

// sweep drops buckets unused for idleAfter (a bucket idle that long is full again, so
// dropping it changes nothing for its key).
func (l *Limiter) sweep() {
	defer l.wg.Done()
	t := time.NewTicker(max(l.idleAfter/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case now := <-t.C:
			l.mu.Lock()
			l.evictLocked(now, false)
			l.mu.Unlock()
		}
	}
}

// evictLocked drops idle buckets; under pressure (the key cap reached), the least
// recently used tenth goes too.
func (l *Limiter) evictLocked(now time.Time, pressure bool) {
	cutoff := now.Add(-l.idleAfter).UnixNano()
	for k, b := range l.buckets {
		if b.used.Load() < cutoff {
			delete(l.buckets, k)
		}
	}
	if !pressure || len(l.buckets) < l.maxKeys {
		return
	}
	oldest := now.UnixNano()
	for _, b := range l.buckets {
		oldest = min(oldest, b.used.Load())
	}
	cutoff = oldest + (now.UnixNano()-oldest)/10
	for k, b := range l.buckets {
		if b.used.Load() <= cutoff {
			delete(l.buckets, k)
		}
	}
}

// Buckets is the number of live buckets (for tests and metrics).
func (l *Limiter) Buckets() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
