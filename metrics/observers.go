package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-proxy/mcp-proxy/plugins"
	"github.com/mcp-proxy/mcp-proxy/policy"
)

type ruleKey struct{ stage, rule, decision string }

var _ policy.Observer = (*Metrics)(nil)

// PolicyDecision implements policy.Observer: decisions by stage, rule and decision, and
// rate-limit refusals by limit. Rule and limit names come from the configuration, so
// their label values are bounded.
func (m *Metrics) PolicyDecision(d policy.Decided) {
	k := ruleKey{d.Stage, d.Rule, d.Decision}
	c, ok := m.rules.Load(k)
	if !ok {
		c, _ = m.rules.LoadOrStore(k, m.decisions.WithLabelValues(d.Stage, d.Rule, d.Decision))
	}
	c.(prometheus.Counter).Inc()
	if d.Decision == policy.DecisionRateLimited {
		m.rateLimited.WithLabelValues(d.Rule).Inc()
	}
}

type hookKey struct{ plugin, hook string }

type hookSeries struct {
	latency  prometheus.Observer
	failures prometheus.Counter
}

var _ plugins.Observer = (*Metrics)(nil)

// PluginHook implements plugins.Observer: hook latency and failures by plugin and hook.
func (m *Metrics) PluginHook(e plugins.HookEvent) {
	k := hookKey{e.Plugin, e.Hook}
	h, ok := m.hooks.Load(k)
	if !ok {
		h, _ = m.hooks.LoadOrStore(k, &hookSeries{latency: m.pluginLatency.WithLabelValues(e.Plugin, e.Hook),
			failures: m.pluginFailures.WithLabelValues(e.Plugin, e.Hook)})
	}
	hs := h.(*hookSeries)
	hs.latency.Observe(e.Duration.Seconds())
	if e.Err != nil {
		hs.failures.Inc()
	}
}
