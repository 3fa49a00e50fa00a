package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// reloadMetrics are the series of configuration reloads, registered with the first
// ConfigLoaded (the admin listener's start), so that they read 0 before any reload.
type reloadMetrics struct {
	once    sync.Once
	total   *prometheus.CounterVec
	success prometheus.Gauge
	last    prometheus.Gauge
}

// ReloadOutcomes are the values of the outcome label of mcp_proxy_config_reloads_total.
var ReloadOutcomes = []string{"applied", "unchanged", "rejected"}

func (m *Metrics) reloadSeries() *reloadMetrics {
	r := &m.reloads
	r.once.Do(func() {
		r.total = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "config_reloads_total",
			Help: "Configuration reloads (SIGHUP, mcp-proxy reload, watch) by outcome: applied, unchanged, or rejected (the old configuration runs on)."},
			[]string{"outcome"})
		for _, o := range ReloadOutcomes {
			r.total.WithLabelValues(o)
		}
		r.success = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "config_last_reload_successful",
			Help: "1 when the last reload was applied or found nothing to change (or none happened), 0 when it was rejected."})
		r.success.Set(1)
		r.last = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "config_last_reload_timestamp_seconds",
			Help: "When the last reload finished, whatever its outcome (Unix time); 0 before any."})
		m.reg.MustRegister(r.total, r.success, r.last)
	})
	return r
}

// Reloaded counts a reload of the configuration and its outcome (one of
// ReloadOutcomes); an applied one also sets when the running configuration was loaded.
func (m *Metrics) Reloaded(outcome string, at time.Time) {
	r := m.reloadSeries()
	r.total.WithLabelValues(outcome).Inc()
	r.last.Set(float64(at.UnixNano()) / 1e9)
	if outcome == "rejected" {
		r.success.Set(0)
		return
	}
	r.success.Set(1)
	if outcome == "applied" {
		m.ConfigLoaded(at)
	}
}

// ForgetUpstream drops what the metrics know of an upstream a reload removed: it is no
// longer reported (its request series stay, as counters must).
func (m *Metrics) ForgetUpstream(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ups.Delete(name)
	for i, n := range m.upOrder {
		if n == name {
			m.upOrder = append(m.upOrder[:i:i], m.upOrder[i+1:]...)
			break
		}
	}
}
