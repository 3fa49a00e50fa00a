package policy

import (
	"context"
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
// "tool", "endpoint"; none means one bucket for everything it matches). "principal"
// counts by the principal's identity (principal.ID), not its name.
type Limit struct {
	Name       string
	Rate       rate.Limit
	Burst      int
	Per        []string
	Tools      []string // exposed names (or URIs) it applies to; empty: all
	Upstreams  []string
	Principals []string
	Groups     []string
	// Endpoints the calls must come through (patterns over endpoint names;
	// DefaultEndpoint for none); nil: any.
	Endpoints []string
}

// Refusal says why a call was refused by a limit.
type Refusal struct {
	Limit      string
	RetryAfter time.Duration
	Message    string
	// Err is set when the limits could not be checked (the BucketStore failed): the call
	// is refused all the same. It is for the log; Message says what the client may read.
	Err error
}

// Limiter applies every matching limit to each call: a call is admitted only if all of
// them have a token, and takes none when any refuses. The buckets are kept by a
// BucketStore: by default in memory (MemoryBuckets, with eviction of idle keys), or
// shared by several replicas. The in-flight caps are per process by nature and stay
// here.
type Limiter struct {
	limits   []compiledLimit
	inflight map[string]*inflightCap // per upstream
	store    BucketStore
	takes    sync.Pool // *takeBuf: a call's buckets, reused so that Take costs no allocation

	// The store the limiter made itself, nil when it was given one: Close closes it. Its
	// map is embedded so that the limiter's own tests reach the buckets and eviction.
	*bucketMap
	own *MemoryBuckets
}

// LimiterOptions configures a Limiter beyond its limits.
type LimiterOptions struct {
	// Store keeps the rate limits' buckets. nil: a MemoryBuckets of the limiter's own,
	// which Close closes; a store given here belongs to the caller, who closes it.
	Store BucketStore
	// Previous is the limiter this one replaces (a reload): the calls in flight it
	// counts toward an upstream's cap still count toward the new cap of that upstream.
	Previous *Limiter
}

// takeBuf is one call's batch for the store, and the limit of each of its buckets.
type takeBuf struct {
	buckets []Bucket
	limits  []*compiledLimit
}

type compiledLimit struct {
	Limit
	tools, upstreams, endpoints                     globs
	who                                             who
	perPrincipal, perUpstream, perTool, perEndpoint bool
}

type inflightCap struct {
	max int64
	n   *atomic.Int64 // shared with the limiter a reload replaced, so that its calls count
}

// NewLimiter compiles limits, with buckets in memory; inflight caps calls in flight per
// upstream name.
func NewLimiter(limits []Limit, inflight map[string]int) (*Limiter, error) {
	return NewLimiterWith(limits, inflight, LimiterOptions{})
}

// NewLimiterWith is NewLimiter with options: where the buckets are kept. It has no side
// effects (the in-memory store's sweeper starts with the first call it limits).
func NewLimiterWith(limits []Limit, inflight map[string]int, opts LimiterOptions) (*Limiter, error) {
	l := &Limiter{inflight: map[string]*inflightCap{}, store: opts.Store}
	l.takes.New = func() any { return new(takeBuf) }
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
			case "endpoint":
				c.perEndpoint = true
			default:
				return nil, fmt.Errorf("limit %q: per must list principal, upstream, tool or endpoint, got %q", lim.Name, p)
			}
		}
		var err error
		if c.tools, err = compileGlobs(lim.Tools); err == nil {
			if c.upstreams, err = compileGlobs(lim.Upstreams); err == nil {
				if c.endpoints, err = compileGlobs(lim.Endpoints); err == nil {
					c.who, err = newWho(lim.Principals, lim.Groups)
				}
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
			c := &inflightCap{max: int64(n), n: new(atomic.Int64)}
			if opts.Previous != nil {
				if old := opts.Previous.inflight[name]; old != nil {
					c.n = old.n
				}
			}
			l.inflight[name] = c
		}
	}
	if l.store == nil {
		l.own = NewMemoryBuckets(0, 0)
		l.bucketMap, l.store = &l.own.bucketMap, l.own
	}
	return l, nil
}

// Close stops the sweeper of the in-memory store the limiter made itself; a store
// given in LimiterOptions is left to its owner.
func (l *Limiter) Close() {
	if l.own != nil {
		l.own.Close()
	}
}

func (c *compiledLimit) applies(p *principal.Principal, it *Item) bool {
	if it.Proxy && c.tools == nil {
		return false // a limit on the proxy's own tools names them
	}
	return c.tools.match(it.Name) && c.upstreams.match(it.Upstream) &&
		(c.endpoints == nil || c.endpoints.match(endpointName(it))) && c.who.matches(p)
}

// endpointName is the name of the endpoint a call came through as rules and limits
// say it: DefaultEndpoint for none.
func endpointName(it *Item) string {
	if it.Endpoint == "" {
		return DefaultEndpoint
	}
	return it.Endpoint
}

// key names the bucket of a call under c.
func (c *compiledLimit) key(p *principal.Principal, it *Item) string {
	var id string
	if c.perPrincipal && p != nil {
		id = p.ID()
	}
	var b strings.Builder
	b.Grow(len(c.Name) + 3 + len(id) + 3 + len(it.Upstream) + 3 + len(it.Name) + 3 + len(it.Endpoint) + len(DefaultEndpoint))
	b.WriteString(c.Name)
	if c.perPrincipal {
		// By identity: an API key and a token of the same name are two people, and
		// never share a bucket.
		b.WriteString("\x00p:")
		b.WriteString(id)
	}
	if c.perUpstream {
		b.WriteString("\x00u:")
		b.WriteString(it.Upstream)
	}
	if c.perTool {
		b.WriteString("\x00t:")
		b.WriteString(it.Name)
	}
	if c.perEndpoint {
		b.WriteString("\x00e:")
		b.WriteString(endpointName(it))
	}
	return b.String()
}

// Admit is AdmitContext without a context (a store that goes over the network is not
// bounded by the caller then).
func (l *Limiter) Admit(p *principal.Principal, it *Item) (release func(), refusal *Refusal) {
	return l.AdmitContext(context.Background(), p, it)
}

// AdmitContext takes a slot of the upstream's in-flight cap and a token from every
// limit that applies; release gives the slot back when the call is over. A refusal
// takes nothing. When the store cannot say whether the call is within the limits, the
// call is refused (fail closed) with Refusal.Err set to the store's error.
//
// The in-flight slot is taken first: it is local, so a call the cap refuses costs no
// trip to a shared store, and a slot (unlike a token in a shared store) can be given
// back when a rate limit refuses.
func (l *Limiter) AdmitContext(ctx context.Context, p *principal.Principal, it *Item) (release func(), refusal *Refusal) {
	if l == nil {
		return func() {}, nil
	}
	release = noRelease
	if ic := l.inflight[it.Upstream]; ic != nil {
		if ic.n.Add(1) > ic.max {
			ic.n.Add(-1)
			return nil, &Refusal{Limit: "max_in_flight", RetryAfter: 100 * time.Millisecond,
				Message: fmt.Sprintf("upstream %q already has its maximum of %d calls in flight", it.Upstream, ic.max)}
		}
		var once atomic.Bool
		release = func() {
			if once.CompareAndSwap(false, true) {
				ic.n.Add(-1)
			}
		}
	}
	if refusal = l.take(ctx, p, it); refusal != nil {
		release()
		return nil, refusal
	}
	return release, nil
}

func noRelease() {}

// take takes a token from every limit that applies, through the store.
func (l *Limiter) take(ctx context.Context, p *principal.Principal, it *Item) *Refusal {
	var buf *takeBuf
	for i := range l.limits {
		c := &l.limits[i]
		if !c.applies(p, it) {
			continue
		}
		if buf == nil {
			buf = l.takes.Get().(*takeBuf)
		}
		buf.buckets = append(buf.buckets, Bucket{Key: c.key(p, it), Limit: c.Rate, Burst: c.Burst})
		buf.limits = append(buf.limits, c)
	}
	if buf == nil {
		return nil
	}
	defer func() {
		clear(buf.buckets) // keep no keys alive in the pool
		clear(buf.limits)
		buf.buckets, buf.limits = buf.buckets[:0], buf.limits[:0]
		l.takes.Put(buf)
	}()
	refused, delay, err := l.store.Take(ctx, buf.buckets, time.Now())
	if err != nil {
		c := buf.limits[0]
		return &Refusal{Limit: c.Name, RetryAfter: time.Second, Err: err,
			Message: fmt.Sprintf("rate limit %q could not be checked; try again later", c.Name)}
	}
	if refused == -1 {
		return nil
	}
	if refused < 0 || refused >= len(buf.limits) {
		c := buf.limits[0]
		return &Refusal{Limit: c.Name, RetryAfter: time.Second,
			Err:     fmt.Errorf("bucket store refused bucket %d of %d", refused, len(buf.limits)),
			Message: fmt.Sprintf("rate limit %q could not be checked; try again later", c.Name)}
	}
	c := buf.limits[refused]
	return &Refusal{Limit: c.Name, RetryAfter: delay,
		Message: fmt.Sprintf("rate limit %q exceeded (%g calls/s, burst %d); retry after %s", c.Name, float64(c.Rate), c.Burst, delay.Round(time.Millisecond))}
}

// Buckets is the number of live buckets in the limiter's own store (for tests and
// metrics); 0 when the buckets are kept elsewhere.
func (l *Limiter) Buckets() int {
	if l.bucketMap == nil {
		return 0
	}
	return l.size()
}
