// Package metrics counts what the proxy does, for Prometheus and for the admin status
// page: routed calls by method, upstream, tool and outcome, with the latency the client
// sees and that of the upstream leg; errors by code; calls in flight; client sessions
// and front-end connections; each upstream's state, restarts and catalogue; policy
// decisions and rate-limit refusals; plugin hook latency and failures. It also keeps,
// per upstream, a five-minute window of latencies from which the status page reads p50
// and p99.
//
// It learns all of it through the proxy's seams and never reaches into a component: the
// router's middleware chain (Middleware outermost, UpstreamLeg innermost), upstream.Observer,
// server.SessionObserver, policy.Observer, plugins.Observer, a counting net.Listener and,
// at scrape time, the router's catalogue sizes. Initialize and the lists pass the
// router's local chain (router.UseLocal), where Middleware counts them too (with no
// upstream); ping, logging/setLevel and tasks/list pass neither chain and are not
// counted.
//
// It is separate from package admin, which serves these metrics over HTTP with health,
// readiness and the status page: this package sits on the request path and must stay
// cheap there (no lock, no allocation per call once a call's label set has been seen;
// see BenchmarkMiddleware) and must not know HTTP; admin must not sit on the request path.
//
// Cardinality is bounded: label values come from the configuration (upstreams, rules,
// limits, plugins), from fixed sets (methods, outcomes, states, hooks) or are capped
// (tool names: MaxTools, then "other"; error codes: maxCodes, then "other"). Principals
// and session ids are never labels.
package metrics

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every series of the proxy's own.
const Namespace = "mcp_proxy"

// MaxTools is how many distinct tool names get a label value of their own; calls to
// tools beyond them are counted under OtherTool.
const MaxTools = 200

// OtherTool is the tool label of the calls to tools beyond the first MaxTools.
const OtherTool = "other"

// maxCodes is how many distinct error codes get a label value of their own.
const maxCodes = 64

// Options configures Metrics.
type Options struct {
	// Version is the proxy's build version (mcp_proxy_build_info).
	Version string
	// Window is how far back the status page's latency percentiles look; default 5m,
	// at most 60m (rounded up to whole minutes).
	Window time.Duration
	// Now is the clock of the latencies and their windows; nil is the monotonic clock
	// from New (tests pass their own).
	Now func() time.Time
}

// Metrics is the proxy's metrics: one Prometheus registry with the Go runtime and
// process collectors and the proxy's own series. Make it with New; it is safe for
// concurrent use and holds no goroutine (nothing to close).
type Metrics struct {
	reg       *prometheus.Registry
	epoch     time.Time        // when New ran, with its monotonic reading: see mono
	epochNano int64            // epoch.UnixNano()
	fake      func() time.Time // Options.Now, or nil
	minutes   int              // window length in minutes

	requests       *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	upstreamLeg    *prometheus.HistogramVec
	errors         *prometheus.CounterVec
	sessionsOpened *prometheus.CounterVec
	decisions      *prometheus.CounterVec
	rateLimited    *prometheus.CounterVec
	pluginLatency  *prometheus.HistogramVec
	pluginFailures *prometheus.CounterVec
	configLoaded   prometheus.Gauge
	reloads        reloadMetrics

	endpointRequests *prometheus.CounterVec   // endpoints.go
	searchLatency    *prometheus.HistogramVec // endpoints.go

	calls     sync.Map           // callKey → *series
	legs      sync.Map           // legKey → prometheus.Observer
	tools     sync.Map           // tool label values in use → struct{}
	toolsFull atomic.Bool        // MaxTools reached: other tools count as OtherTool
	codes     sync.Map           // int64 → prometheus.Counter
	codesFull atomic.Bool        // maxCodes reached: other codes count as "other"
	otherCode prometheus.Counter // set (under mu) before codesFull
	rules     sync.Map           // ruleKey → prometheus.Counter
	hooks     sync.Map           // hookKey → *hookSeries
	pendings  sync.Pool
	legPool   sync.Pool

	mu      sync.Mutex // guards ntools, ncodes, upOrder and the creation of series
	ntools  int
	ncodes  int
	ups     sync.Map // upstream name → *upstreamStats
	upOrder []string // names in the order first seen

	sessMu   sync.Mutex         // guards sessions
	sessions map[sessionKey]int // open sessions

	conns     atomic.Int64 // front-end connections open
	connsSeen atomic.Int64 // front-end connections accepted

	catalogue atomic.Value // *Sizer; see SetCatalogue
}

// New builds the registry and registers every series. It has no side effects beyond
// that (no goroutine, no listener).
func New(opts Options) *Metrics {
	if opts.Window <= 0 {
		opts.Window = 5 * time.Minute
	}
	opts.Window = min(opts.Window, time.Hour)
	m := &Metrics{
		reg:      prometheus.NewRegistry(),
		fake:     opts.Now,
		minutes:  int((opts.Window + time.Minute - 1) / time.Minute),
		sessions: map[sessionKey]int{},
	}
	if m.fake != nil {
		m.epoch = m.fake()
	} else {
		m.epoch = time.Now()
	}
	m.epochNano = m.epoch.UnixNano()
	m.pendings.New = m.newPending
	m.legPool.New = m.newLeg
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "requests_total",
		Help: "Routed client requests by method, upstream, tool (tools/call only; capped, then \"other\") and outcome."},
		[]string{"method", "upstream", "tool", "outcome"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "request_duration_seconds",
		Help:    "Time from a routed request entering the middleware chain to its answer, as the client sees it.",
		Buckets: latencyBuckets}, []string{"method", "upstream"})
	m.upstreamLeg = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "upstream_request_duration_seconds",
		Help:    "Time from a request leaving the middleware chain (after policy and plugins) to the upstream's answer.",
		Buckets: latencyBuckets}, []string{"method", "upstream"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "errors_total",
		Help: "Routed requests answered with a JSON-RPC error, by code (capped, then \"other\")."}, []string{"code"})
	m.sessionsOpened = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "client_sessions_opened_total",
		Help: "Client sessions opened (initialized), by era and transport."}, []string{"era", "transport"})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "policy_decisions_total",
		Help: "Decisions of the policy's stages by stage, rule (or limit) and decision."}, []string{"stage", "rule", "decision"})
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "rate_limited_total",
		Help: "Calls refused by a rate limit or max_in_flight, by limit."}, []string{"limit"})
	m.pluginLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "plugin_hook_duration_seconds",
		Help:    "Time of one plugin hook call, from the crossing to the checked answer.",
		Buckets: latencyBuckets}, []string{"plugin", "hook"})
	m.pluginFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "plugin_hook_failures_total",
		Help: "Plugin hook calls that failed (down, timed out, or an answer the proxy cannot apply)."}, []string{"plugin", "hook"})
	m.configLoaded = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "config_loaded_timestamp_seconds",
		Help: "When the running configuration was loaded (Unix time)."})
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info",
		Help: "Always 1; the labels say which build runs."}, []string{"version", "goversion"})
	build.WithLabelValues(opts.Version, runtime.Version()).Set(1)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.latency, m.upstreamLeg, m.errors, m.sessionsOpened, m.decisions, m.rateLimited,
		m.pluginLatency, m.pluginFailures, m.configLoaded, build,
		stateCollector{m},
	)
	m.reg.MustRegister(m.newEndpointSeries()...)
	return m
}

// mono is the time since New on the monotonic clock: one clock read, where time.Now
// reads two (and four reads per call were the better part of what counting a call
// cost), and plain arithmetic on it (time.Time's Add and Sub cost more than the read).
// A step of the system clock after New does not move it, which suits what it is for:
// durations, and the minutes of the latency windows (minuteAt).
func (m *Metrics) mono() time.Duration {
	if m.fake != nil {
		return m.fake().Sub(m.epoch)
	}
	return time.Since(m.epoch)
}

// now is mono as a time: New's wall time plus the monotonic time since.
func (m *Metrics) now() time.Time { return m.epoch.Add(m.mono()) }

// minuteAt is the Unix minute of the time mono returned as t.
func (m *Metrics) minuteAt(t time.Duration) int64 {
	return (m.epochNano + int64(t)) / int64(time.Minute)
}

// latencyBuckets span a cached answer (100 µs) to a long tool run (60 s).
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Registry is the registry to serve (promhttp.HandlerFor) or to add collectors to.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ConfigLoaded records when the running configuration was loaded.
func (m *Metrics) ConfigLoaded(at time.Time) {
	m.reloadSeries()
	m.configLoaded.Set(float64(at.UnixNano()) / 1e9)
}
