package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// Outcomes of a routed call, as the outcome label names them.
const (
	OutcomeOK          = "ok"           // a result
	OutcomeToolError   = "tool_error"   // a tools/call result with isError: true
	OutcomeDenied      = "denied"       // the policy (-31005) or a plugin (-31007) refused it
	OutcomeRateLimited = "rate_limited" // a rate limit or max_in_flight refused it (-31006)
	OutcomeTimeout     = "timeout"      // the upstream did not answer in time (-31001)
	OutcomeUnavailable = "unavailable"  // the upstream was down or broke mid-call (-31000, -31002)
	OutcomeError       = "error"        // any other error: the upstream's own, or the proxy's
	OutcomeCancelled   = "cancelled"    // the client cancelled or went away
)

type outcome uint8

const (
	outOK outcome = iota
	outToolError
	outDenied
	outRateLimited
	outTimeout
	outUnavailable
	outError
	outCancelled
	numOutcomes
)

var outcomeNames = [numOutcomes]string{OutcomeOK, OutcomeToolError, OutcomeDenied, OutcomeRateLimited,
	OutcomeTimeout, OutcomeUnavailable, OutcomeError, OutcomeCancelled}

// callKey is a routed call's label set before capping: the tool is the exposed name for
// tools/call and empty otherwise (a resource URI or a task id would be unbounded).
type callKey struct {
	method, upstream, tool string
	endpoint               string // the endpoint the call came through ("": none); search: it is a search
	search                 bool
}

// series is what one label set counts into, bound once so that a call only adds.
type series struct {
	isCall   bool // tools/call: the result's isError decides between ok and tool_error
	labels   [3]string
	up       *upstreamStats
	latency  prometheus.Observer
	outcomes [numOutcomes]atomic.Pointer[prometheus.Counter] // bound on first use
	ep       *epSeries                                       // the call's endpoint's series; nil for none
}

func (s *series) count(m *Metrics, o outcome) {
	c := s.outcomes[o].Load()
	if c == nil {
		counter := m.requests.WithLabelValues(s.labels[0], s.labels[1], s.labels[2], outcomeNames[o])
		c = &counter
		s.outcomes[o].Store(c)
	}
	(*c).Inc()
}

// seriesOf returns the series of call, making it the first time its label set is seen.
// Once MaxTools tool names have their own series, the calls to any other tool share the
// OtherTool series, and no new key is stored: the map stays bounded however the
// upstreams' catalogues change.
func (m *Metrics) seriesOf(call *router.Call) *series {
	k := callKey{method: call.Method}
	if call.Target != nil {
		k.upstream = call.Target.Upstream
		if call.Method == mcp.MethodToolsCall {
			k.tool = call.Target.Name
		}
	}
	if call.Request != nil && call.Request.Endpoint != "" {
		k.endpoint, k.search = call.Request.Endpoint, isSearch(call)
	}
	if s, ok := m.calls.Load(k); ok {
		return s.(*series)
	}
	if k.tool != "" && m.toolsFull.Load() {
		if _, known := m.tools.Load(k.tool); !known {
			k.tool = OtherTool
			if s, ok := m.calls.Load(k); ok {
				return s.(*series)
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if k.tool != "" && k.tool != OtherTool {
		if _, known := m.tools.Load(k.tool); !known {
			if m.ntools >= MaxTools {
				m.toolsFull.Store(true)
				k.tool = OtherTool
			} else {
				m.tools.Store(k.tool, struct{}{})
				m.ntools++
			}
		}
	}
	if s, ok := m.calls.Load(k); ok {
		return s.(*series)
	}
	s := &series{isCall: k.method == mcp.MethodToolsCall, labels: [3]string{k.method, k.upstream, k.tool},
		latency: m.latency.WithLabelValues(k.method, k.upstream)}
	if k.endpoint != "" {
		s.ep = &epSeries{labels: [2]string{k.endpoint, k.method}}
		if k.search {
			s.ep.search = m.searchLatency.WithLabelValues(k.endpoint)
		}
	}
	if k.upstream != "" {
		s.up = m.upstreamLocked(k.upstream)
	}
	m.calls.Store(k, s)
	return s
}

// pending is one call in flight through Middleware: pooled, with its reply bound once,
// so that wrapping a call's reply allocates nothing.
type pending struct {
	m     *Metrics
	s     *series
	start time.Duration // m.mono()
	reply router.Reply
	done  router.Reply // p.finish, bound when p was made
}

func (m *Metrics) newPending() any {
	p := &pending{m: m}
	p.done = p.finish
	return p
}

// finish counts the call's outcome and passes the answer on. The router's Reply is
// called exactly once, so p goes back to the pool here.
func (p *pending) finish(res json.RawMessage, err error) {
	m, s, start, reply := p.m, p.s, p.start, p.reply
	p.s, p.reply = nil, nil
	m.pendings.Put(p)
	end := m.mono()
	d := end - start
	o, code := classify(s.isCall, res, err)
	s.count(m, o)
	s.latency.Observe(d.Seconds())
	if s.ep != nil {
		s.ep.count(m, o)
		if s.ep.search != nil {
			s.ep.search.Observe(d.Seconds())
		}
	}
	if s.up != nil {
		s.up.inFlight.Add(-1)
		s.up.window.observe(m.minuteAt(end), d)
	}
	if o != outOK && o != outToolError && o != outCancelled {
		m.countCode(code)
	}
	reply(res, err)
}

// Middleware counts every routed call: install it first in the router's chain (before
// the audit stage), so that it sees each call's outcome, refusals by the policy and the
// plugins included, and the latency the client sees.
func (m *Metrics) Middleware(next router.Handler) router.Handler {
	return func(ctx context.Context, call *router.Call, reply router.Reply) {
		s := m.seriesOf(call)
		if s.up != nil {
			s.up.inFlight.Add(1)
		}
		p := m.pendings.Get().(*pending)
		p.s, p.start, p.reply = s, m.mono(), reply
		next(ctx, call, p.done)
	}
}

// legKey is the label set of the upstream leg.
type legKey struct{ method, upstream string }

// UpstreamLeg times the upstream leg of every routed call: install it last in the
// router's chain (after the policy and the plugins), so that it measures the time from
// the call leaving the proxy's stages to the upstream's answer.
func (m *Metrics) UpstreamLeg(next router.Handler) router.Handler {
	return func(ctx context.Context, call *router.Call, reply router.Reply) {
		k := legKey{method: call.Method}
		if call.Target != nil {
			k.upstream = call.Target.Upstream
		}
		obs, ok := m.legs.Load(k)
		if !ok {
			obs, _ = m.legs.LoadOrStore(k, m.upstreamLeg.WithLabelValues(k.method, k.upstream))
		}
		l := m.legPool.Get().(*leg)
		l.obs, l.start, l.reply = obs.(prometheus.Observer), m.mono(), reply
		next(ctx, call, l.done)
	}
}

// leg is one call in flight through UpstreamLeg, pooled like pending.
type leg struct {
	m     *Metrics
	obs   prometheus.Observer
	start time.Duration // m.mono()
	reply router.Reply
	done  router.Reply
}

func (m *Metrics) newLeg() any {
	l := &leg{m: m}
	l.done = l.finish
	return l
}

func (l *leg) finish(res json.RawMessage, err error) {
	m, obs, start, reply := l.m, l.obs, l.start, l.reply
	l.obs, l.reply = nil, nil
	m.legPool.Put(l)
	obs.Observe((m.mono() - start).Seconds())
	reply(res, err)
}

// classify maps a call's answer to its outcome and, for an error, its JSON-RPC code.
func classify(isCall bool, res json.RawMessage, err error) (outcome, int64) {
	if err == nil {
		if isCall && isToolError(res) {
			return outToolError, 0
		}
		return outOK, 0
	}
	je, ok := err.(*jsonrpc.Error)
	if !ok && !errors.As(err, &je) {
		if errors.Is(err, router.ErrCancelled) {
			return outCancelled, 0
		}
		return outError, 0
	}
	switch je.Code {
	case mcp.CodePolicyDenied, mcp.CodePluginDenied:
		return outDenied, je.Code
	case mcp.CodeRateLimited:
		return outRateLimited, je.Code
	case mcp.CodeUpstreamTimeout:
		return outTimeout, je.Code
	case mcp.CodeUpstreamUnavailable, mcp.CodeUpstreamFailed:
		return outUnavailable, je.Code
	}
	return outError, je.Code
}

// isToolError reports whether a tools/call result says isError: true (a member of the
// result object itself, not of its content). Most results are not errors, so a quick
// scan first looks for a "isError" key followed by true anywhere; only then, or when a
// key could be spelled with escapes, is the result parsed to find its own member.
func isToolError(res json.RawMessage) bool {
	if !mayBeToolError(res) {
		return false
	}
	v, ok, _ := jsonx.Get(res, "isError")
	return ok && string(v) == "true"
}

var (
	isErrorKey = []byte(`isError"`) // without its opening quote, which is checked apart: a needle that starts with the rarer 'i' is found several times faster
	escapeU    = []byte(`\u`)
)

// mayBeToolError is false only when res certainly has no isError member that is true:
// no "isError" key followed by true, and no \u escape that could spell one. (Inside a
// JSON string, quotes are escaped, so text that mentions "isError" does not match.)
func mayBeToolError(res []byte) bool {
	if bytes.Contains(res, escapeU) {
		return true
	}
	for i := 0; i < len(res); {
		j := bytes.Index(res[i:], isErrorKey)
		if j < 0 {
			return false
		}
		k := skipSpace(res, i+j+len(isErrorKey))
		if i+j > 0 && res[i+j-1] == '"' && k < len(res) && res[k] == ':' && bytes.HasPrefix(res[skipSpace(res, k+1):], []byte("true")) {
			return true
		}
		i = k
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// countCode counts one error with code (0: not a JSON-RPC error, not counted). Codes
// beyond the first maxCodes share the "other" series and are not stored.
func (m *Metrics) countCode(code int64) {
	if code == 0 {
		return
	}
	if c, ok := m.codes.Load(code); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	if m.codesFull.Load() {
		m.otherCode.Inc()
		return
	}
	m.mu.Lock()
	c, ok := m.codes.Load(code)
	switch {
	case ok:
	case m.ncodes >= maxCodes:
		if m.otherCode == nil { // written once, before codesFull: the fast path reads it after
			m.otherCode = m.errors.WithLabelValues("other")
			m.codesFull.Store(true)
		}
		c = m.otherCode
	default:
		m.ncodes++
		c = m.errors.WithLabelValues(strconv.FormatInt(code, 10))
		m.codes.Store(code, c)
	}
	m.mu.Unlock()
	c.(prometheus.Counter).Inc()
}
