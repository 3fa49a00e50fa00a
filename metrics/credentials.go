package metrics

import "github.com/prometheus/client_golang/prometheus"

// Credentials is the series of the per-user credentials (docs/credentials.md): what the
// providers of per-user upstreams did, by upstream and event. It implements
// credential.Observer (by its method's shape: this package does not import credential).
type Credentials struct {
	events *prometheus.CounterVec
}

// The events a credential provider reports (credential.Event*), each a series from the
// start so that a rate of zero shows as zero.
var credentialEvents = []string{"exchange", "refresh", "failure", "pending", "authorized", "unavailable", "store_lookup"}

// Credentials registers the credentials' series in m's registry for the per-user
// upstreams named, and returns them; call it once.
func (m *Metrics) Credentials(upstreams ...string) *Credentials {
	c := &Credentials{events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "credential_events_total",
		Help: "What the per-user credentials of an upstream did, by event: exchange (a token exchanged), refresh (a grant refreshed, " +
			"or a token exchanged again after a 401), failure (obtaining a credential failed), pending (a principal sent a link to " +
			"authorize), authorized (an authorization completed), unavailable (a call refused: no usable credential), " +
			"store_lookup (a miss of this process's cache that read the token store)."},
		[]string{"upstream", "event"})}
	for _, u := range upstreams {
		for _, e := range credentialEvents {
			c.events.WithLabelValues(u, e)
		}
	}
	m.reg.MustRegister(c.events)
	return c
}

// CredentialEvent counts one event of upstream's credentials.
func (c *Credentials) CredentialEvent(upstream, event string) {
	c.events.WithLabelValues(upstream, event).Inc()
}
