package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// Endpoints: the calls that come through an endpoint block are counted once more by
// endpoint (endpoint_requests_total), and an endpoint's searches (search_tools, and
// tools/list with a query) are timed (search_duration_seconds). Endpoint names come from
// the configuration: the label is bounded. Requests through no endpoint are counted in
// requests_total only, as before endpoints existed.

// epSeries is what one endpoint's calls of one method count into.
type epSeries struct {
	search   prometheus.Observer // a search's latency; nil for other calls
	labels   [2]string           // endpoint, method
	outcomes [numOutcomes]atomic.Pointer[prometheus.Counter]
}

func (e *epSeries) count(m *Metrics, o outcome) {
	c := e.outcomes[o].Load()
	if c == nil {
		counter := m.endpointRequests.WithLabelValues(e.labels[0], e.labels[1], outcomeNames[o])
		c = &counter
		e.outcomes[o].Store(c)
	}
	(*c).Inc()
}

// newEndpointSeries registers the endpoint families.
func (m *Metrics) newEndpointSeries() []prometheus.Collector {
	m.endpointRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "endpoint_requests_total",
		Help: "Requests through an endpoint block, by endpoint, method and outcome (a call_tool counts as the tools/call it makes)."},
		[]string{"endpoint", "method", "outcome"})
	m.searchLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "search_duration_seconds",
		Help:    "Time of an endpoint's search (search_tools, or tools/list with a query), as the client sees it.",
		Buckets: searchBuckets}, []string{"endpoint"})
	return []prometheus.Collector{m.endpointRequests, m.searchLatency}
}

// searchBuckets span an index lookup (10 µs) to a slow plugin ranker (1 s).
var searchBuckets = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, .25, 1}

// isSearch reports whether a call is an endpoint's search: the proxy's own
// search_tools (answered locally: no upstream), or a tools/list with a query.
func isSearch(call *router.Call) bool {
	switch call.Method {
	case mcp.MethodToolsCall:
		return call.Target != nil && call.Target.Upstream == "" && call.Target.Name == router.SearchToolsName
	case mcp.MethodToolsList:
		return len(call.Params) > 0 && hasQuery(call.Params)
	}
	return false
}

// hasQuery reports whether a tools/list's params hold a non-empty query (SEP-1821).
func hasQuery(params []byte) bool {
	q, ok, _ := jsonx.GetString(params, "query")
	return ok && q != ""
}
