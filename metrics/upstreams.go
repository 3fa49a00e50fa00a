package metrics

import (
	"cmp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Upstream states, as mcp_proxy_upstream_state and the status page name them.
const (
	StateWaiting    = "waiting"    // not started yet: the upstreams start with the first client
	StateStarting   = "starting"   // the first start attempt is under way
	StateUp         = "up"         // ready: handshake and first catalogue done
	StateRestarting = "restarting" // it exited or failed to start; another attempt is scheduled or under way
	StateDown       = "down"       // it exited or failed to start, before the next attempt is scheduled
	StateStopped    = "stopped"    // closed: it will not start again
)

// States lists every state, in the order the state gauge reports them.
var States = []string{StateWaiting, StateStarting, StateUp, StateRestarting, StateDown, StateStopped}

// upstreamStats is what the metrics know of one upstream.
type upstreamStats struct {
	name     string
	inFlight atomic.Int64 // calls in flight, as the client sees them
	window   *window

	mu          sync.Mutex // guards the fields below
	state       string     // "" until the first event
	restarts    uint64
	lastReady   time.Time
	lastErr     string
	lastErrAt   time.Time
	timeouts    uint64
	startFailed uint64
}

// upstream returns the stats of the upstream name, making them the first time.
func (m *Metrics) upstream(name string) *upstreamStats {
	if u, ok := m.ups.Load(name); ok {
		return u.(*upstreamStats)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.upstreamLocked(name)
}

// upstreamLocked is upstream with m.mu held.
func (m *Metrics) upstreamLocked(name string) *upstreamStats {
	if u, ok := m.ups.Load(name); ok {
		return u.(*upstreamStats)
	}
	u := &upstreamStats{name: name, window: newWindow(m.minutes)}
	m.ups.Store(name, u)
	m.upOrder = append(m.upOrder, name)
	return u
}

// Upstreams declares the configured upstreams, in config order, so that each is
// reported (state "starting", no calls) before anything happens to it. Optional.
func (m *Metrics) Upstreams(names ...string) {
	for _, n := range names {
		m.upstream(n)
	}
}

var _ upstream.Observer = (*Metrics)(nil)

// UpstreamEvent implements upstream.Observer: state, restarts, the last start and the
// last error of each upstream. Set it as the Observer of the shared upstreams only: a
// per-client session's starts and stops are not the upstream's.
func (m *Metrics) UpstreamEvent(e upstream.Event) {
	u := m.upstream(e.Upstream)
	u.mu.Lock()
	defer u.mu.Unlock()
	switch e.Kind {
	case upstream.EventStarting:
		if u.state == "" || u.state == StateStarting {
			u.state = StateStarting
		} else {
			u.state = StateRestarting
		}
	case upstream.EventReady:
		u.state, u.lastReady = StateUp, e.Time
	case upstream.EventStartFailed:
		u.startFailed++
		u.state = StateDown
		u.noteErr(e)
	case upstream.EventExited:
		u.state = StateDown
		u.noteErr(e)
	case upstream.EventRestarting:
		u.restarts++
		u.state = StateRestarting
	case upstream.EventStopped:
		u.state = StateStopped
	case upstream.EventCallTimedOut:
		u.timeouts++
	}
}

// noteErr remembers e's error as the upstream's last; u.mu is held.
func (u *upstreamStats) noteErr(e upstream.Event) {
	if e.Err != nil {
		u.lastErr, u.lastErrAt = e.Err.Error(), e.Time
	}
}

// UpstreamView is what the status page shows of one upstream's history.
type UpstreamView struct {
	Name     string
	State    string // one of States; StateWaiting when nothing happened to it yet
	Restarts uint64
	// LastReady is when it last became ready (zero: never).
	LastReady time.Time
	// LastError is the error of its last exit or failed start, and when; kept after it
	// is up again.
	LastError   string
	LastErrorAt time.Time
	Timeouts    uint64
	InFlight    int64
	Latency     Latency // calls that ended in the window, as the client saw them
}

// Upstream returns what the metrics know of the upstream name.
func (m *Metrics) Upstream(name string) UpstreamView {
	u := m.upstream(name)
	u.mu.Lock()
	v := UpstreamView{Name: name, State: cmp.Or(u.state, StateWaiting), Restarts: u.restarts, LastReady: u.lastReady,
		LastError: u.lastErr, LastErrorAt: u.lastErrAt, Timeouts: u.timeouts}
	u.mu.Unlock()
	v.InFlight = u.inFlight.Load()
	v.Latency = u.window.summary(m.now())
	return v
}
