package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-proxy/mcp-proxy/trust"
)

// trustCollector reports the pinning and screening verdicts, read from the vetter when
// scraped: they change when a catalogue is fetched, never per call.
type trustCollector struct {
	status   func() trust.Status
	withheld *prometheus.Desc
	pinned   *prometheus.Desc
	findings *prometheus.Desc
	lockErr  *prometheus.Desc
}

// WatchTrust adds the metrics of the definitions' pinning and screening, read from status
// at each scrape.
func (m *Metrics) WatchTrust(status func() trust.Status) {
	m.reg.MustRegister(&trustCollector{
		status: status,
		withheld: prometheus.NewDesc("mcp_proxy_definitions_withheld",
			"Tools, prompts and resource templates an upstream lists that are withheld (not approved in the lock file, or withheld by screening).",
			[]string{"upstream"}, nil),
		pinned: prometheus.NewDesc("mcp_proxy_definitions_unpinned",
			"Definitions that differ from the lock file, by how: new (not in it), changed, removed (approved, no longer listed).",
			[]string{"upstream", "kind", "difference"}, nil),
		findings: prometheus.NewDesc("mcp_proxy_screen_findings",
			"Screening findings in the definitions an upstream lists, by check and severity.",
			[]string{"upstream", "check", "severity"}, nil),
		lockErr: prometheus.NewDesc("mcp_proxy_lock_file_error",
			"1 when the lock file could not be read at the last (re)load, and the previous one stays in force.",
			nil, nil),
	})
}

func (c *trustCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.withheld
	ch <- c.pinned
	ch <- c.findings
	ch <- c.lockErr
}

func (c *trustCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.status()
	lockErr := 0.0
	if st.LockError != "" {
		lockErr = 1
	}
	ch <- prometheus.MustNewConstMetric(c.lockErr, prometheus.GaugeValue, lockErr)
	for _, u := range st.Upstreams {
		ch <- prometheus.MustNewConstMetric(c.withheld, prometheus.GaugeValue, float64(u.Withheld), u.Upstream)
		pins := map[[2]string]int{}
		finds := map[[2]string]int{}
		for _, it := range u.Items {
			if it.Pin != "" {
				pins[[2]string{string(it.Kind), it.Pin}]++
			}
			for _, f := range it.Findings {
				if !f.Accepted { // accepted by the configuration (screen_allow): nothing to alert on
					finds[[2]string{f.Check, f.Severity.String()}]++
				}
			}
		}
		for k, n := range pins {
			ch <- prometheus.MustNewConstMetric(c.pinned, prometheus.GaugeValue, float64(n), u.Upstream, k[0], k[1])
		}
		for k, n := range finds {
			ch <- prometheus.MustNewConstMetric(c.findings, prometheus.GaugeValue, float64(n), u.Upstream, k[0], k[1])
		}
	}
}
