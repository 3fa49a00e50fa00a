package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-proxy/mcp-proxy/router"
)

// A Sizer reports the merged catalogue's items by upstream: the router does.
type Sizer interface {
	Sizes() []router.Sizes
}

var _ Sizer = (*router.Router)(nil)

// SetCatalogue makes s the source of mcp_proxy_catalogue_items, read at each scrape.
func (m *Metrics) SetCatalogue(s Sizer) { m.catalogue.Store(&s) }

// Series the state collector reports at scrape time, from what the metrics keep in
// memory (atomics and the upstreams' event history) and from the catalogue: nothing on
// the request path pays for them.
var (
	descInFlight = prometheus.NewDesc(Namespace+"_requests_in_flight",
		"Routed requests in flight, by upstream.", []string{"upstream"}, nil)
	descState = prometheus.NewDesc(Namespace+"_upstream_state",
		"1 for the upstream's current state (waiting, starting, up, restarting, down, stopped), 0 for the others.",
		[]string{"upstream", "state"}, nil)
	descRestarts = prometheus.NewDesc(Namespace+"_upstream_restarts_total",
		"Restarts of the upstream (after an exit or a failed start).", []string{"upstream"}, nil)
	descStartFailures = prometheus.NewDesc(Namespace+"_upstream_start_failures_total",
		"Start attempts of the upstream that failed.", []string{"upstream"}, nil)
	descTimeouts = prometheus.NewDesc(Namespace+"_upstream_timeouts_total",
		"Calls the upstream did not answer within its timeout.", []string{"upstream"}, nil)
	descLastReady = prometheus.NewDesc(Namespace+"_upstream_last_start_timestamp_seconds",
		"When the upstream last became ready (Unix time); absent until it has.", []string{"upstream"}, nil)
	descCatalogue = prometheus.NewDesc(Namespace+"_catalogue_items",
		"Items of the merged catalogue by upstream and kind (tool, prompt, resource, resource_template).",
		[]string{"upstream", "kind"}, nil)
	descSessions = prometheus.NewDesc(Namespace+"_client_sessions",
		"Client sessions open, by era and transport.", []string{"era", "transport"}, nil)
	descConns = prometheus.NewDesc(Namespace+"_frontend_connections",
		"Connections open on the HTTP front end.", nil, nil)
	descConnsTotal = prometheus.NewDesc(Namespace+"_frontend_connections_total",
		"Connections accepted by the HTTP front end.", nil, nil)
)

// stateCollector reports the scrape-time series.
type stateCollector struct{ m *Metrics }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInFlight, descState, descRestarts, descStartFailures, descTimeouts,
		descLastReady, descCatalogue, descSessions, descConns, descConnsTotal} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	names := append([]string(nil), m.upOrder...)
	m.mu.Unlock()
	for _, name := range names {
		u := m.upstream(name)
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(u.inFlight.Load()), name)
		u.mu.Lock()
		state, restarts, failed, timeouts, ready := u.state, u.restarts, u.startFailed, u.timeouts, u.lastReady
		u.mu.Unlock()
		if state == "" {
			state = StateWaiting
		}
		for _, s := range States {
			v := 0.0
			if s == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, v, name, s)
		}
		ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(restarts), name)
		ch <- prometheus.MustNewConstMetric(descStartFailures, prometheus.CounterValue, float64(failed), name)
		ch <- prometheus.MustNewConstMetric(descTimeouts, prometheus.CounterValue, float64(timeouts), name)
		if !ready.IsZero() {
			ch <- prometheus.MustNewConstMetric(descLastReady, prometheus.GaugeValue, float64(ready.UnixNano())/1e9, name)
		}
	}
	if s, _ := m.catalogue.Load().(*Sizer); s != nil {
		for _, z := range (*s).Sizes() {
			for _, kv := range []struct {
				kind string
				n    int
			}{{"tool", z.Tools}, {"prompt", z.Prompts}, {"resource", z.Resources}, {"resource_template", z.Templates}} {
				ch <- prometheus.MustNewConstMetric(descCatalogue, prometheus.GaugeValue, float64(kv.n), z.Upstream, kv.kind)
			}
		}
	}
	for _, s := range m.Sessions() {
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(s.Open), s.Era, s.Transport)
	}
	ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(m.conns.Load()))
	ch <- prometheus.MustNewConstMetric(descConnsTotal, prometheus.CounterValue, float64(m.connsSeen.Load()))
}
