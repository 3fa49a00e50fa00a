package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/plugins"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/server"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

func toolCall(upstreamName, tool string) *router.Call {
	return &router.Call{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"` + tool + `"}`),
		Target:  &router.Target{Kind: router.TargetTool, Name: tool, Upstream: upstreamName},
		Request: &router.Request{Method: mcp.MethodToolsCall}}
}

// answer is what the end of the test chain replies.
type answer struct {
	res json.RawMessage
	err error
}

// through sends call through Middleware and UpstreamLeg to an end that answers a after
// advancing the clock by took, and returns what the client got.
func through(m *Metrics, clk *fakeClock, call *router.Call, a answer, took time.Duration) answer {
	end := func(_ context.Context, _ *router.Call, reply router.Reply) {
		clk.advance(took)
		reply(a.res, a.err)
	}
	h := m.Middleware(m.UpstreamLeg(end))
	var got answer
	h(context.Background(), call, func(res json.RawMessage, err error) { got = answer{res, err} })
	return got
}

// TestMiddlewareCountsOutcomes: each kind of answer is counted under its outcome, errors
// under their code, and the answer reaches the client unchanged.
func TestMiddlewareCountsOutcomes(t *testing.T) {
	clk := newFakeClock()
	m := New(Options{Version: "test", Now: clk.now})
	upErr := &jsonrpc.Error{Code: -32000, Message: "the upstream's own"}
	cases := []struct {
		a       answer
		outcome string
		code    string
	}{
		{answer{res: json.RawMessage(`{"content":[]}`)}, OutcomeOK, ""},
		{answer{res: json.RawMessage(`{"content":[{"type":"text","text":"\"isError\":true"}],"isError":false}`)}, OutcomeOK, ""},
		{answer{res: json.RawMessage(`{"content":[],"structuredContent":{"isError":true}}`)}, OutcomeOK, ""},
		{answer{res: json.RawMessage(`{"content":[],"isError":true}`)}, OutcomeToolError, ""},
		{answer{err: mcp.ProxyError(mcp.CodePolicyDenied, "", "no")}, OutcomeDenied, "-31005"},
		{answer{err: mcp.ProxyError(mcp.CodePluginDenied, "", "no")}, OutcomeDenied, "-31007"},
		{answer{err: mcp.ProxyError(mcp.CodeRateLimited, "", "slow down")}, OutcomeRateLimited, "-31006"},
		{answer{err: mcp.ProxyError(mcp.CodeUpstreamTimeout, "u", "late")}, OutcomeTimeout, "-31001"},
		{answer{err: mcp.ProxyError(mcp.CodeUpstreamUnavailable, "u", "down")}, OutcomeUnavailable, "-31000"},
		{answer{err: mcp.ProxyError(mcp.CodeUpstreamFailed, "u", "crashed")}, OutcomeUnavailable, "-31002"},
		{answer{err: upErr}, OutcomeError, "-32000"},
		{answer{err: fmt.Errorf("wrapped: %w", upErr)}, OutcomeError, "-32000"},
		{answer{err: router.ErrCancelled}, OutcomeCancelled, ""},
		{answer{err: errors.New("not JSON-RPC")}, OutcomeError, ""},
	}
	for _, c := range cases {
		got := through(m, clk, toolCall("u", "u__echo"), c.a, 3*time.Millisecond)
		if string(got.res) != string(c.a.res) || got.err != c.a.err {
			t.Errorf("answer changed: %+v → %+v", c.a, got)
		}
	}
	all := gather(t, m.Registry())
	want := map[string]float64{}
	codes := map[string]float64{}
	for _, c := range cases {
		want[`mcp_proxy_requests_total{method="tools/call",outcome="`+c.outcome+`",tool="u__echo",upstream="u"}`]++
		if c.code != "" {
			codes[`mcp_proxy_errors_total{code="`+c.code+`"}`]++
		}
	}
	if got := withPrefix(all, "mcp_proxy_requests_total"); !reflect.DeepEqual(got, want) {
		t.Errorf("requests:\n got %v\nwant %v", got, want)
	}
	if got := withPrefix(all, "mcp_proxy_errors_total"); !reflect.DeepEqual(got, codes) {
		t.Errorf("errors:\n got %v\nwant %v", got, codes)
	}
	n := float64(len(cases))
	for _, k := range []string{`mcp_proxy_request_duration_seconds_count{method="tools/call",upstream="u"}`,
		`mcp_proxy_upstream_request_duration_seconds_count{method="tools/call",upstream="u"}`} {
		if all[k] != n {
			t.Errorf("%s = %v, want %v", k, all[k], n)
		}
	}
	if s := all[`mcp_proxy_request_duration_seconds_sum{method="tools/call",upstream="u"}`]; s < n*0.003-1e-9 || s > n*0.003+1e-9 {
		t.Errorf("latency sum %v, want %v", s, n*0.003)
	}
	if v := all[`mcp_proxy_requests_in_flight{upstream="u"}`]; v != 0 {
		t.Errorf("in flight after the calls: %v", v)
	}
	if v := m.Upstream("u"); v.Latency.Count != uint64(len(cases)) || v.Latency.P50 < 2560*time.Microsecond || v.Latency.P50 > 3072*time.Microsecond {
		t.Errorf("window: %+v", v.Latency)
	}
}

// TestInFlight: a call counts as in flight from the chain's entry to its answer.
func TestInFlight(t *testing.T) {
	m := New(Options{})
	var replies []router.Reply
	h := m.Middleware(func(_ context.Context, _ *router.Call, reply router.Reply) { replies = append(replies, reply) })
	for range 3 {
		h(context.Background(), toolCall("u", "u__slow"), func(json.RawMessage, error) {})
	}
	if v := gather(t, m.Registry())[`mcp_proxy_requests_in_flight{upstream="u"}`]; v != 3 {
		t.Fatalf("in flight: %v", v)
	}
	for _, r := range replies {
		r(json.RawMessage(`{}`), nil)
	}
	if v := m.Upstream("u").InFlight; v != 0 {
		t.Fatalf("in flight after the answers: %v", v)
	}
}

// TestOtherMethods: methods other than tools/call have no tool label, whatever their
// target's name (a URI would be unbounded).
func TestOtherMethods(t *testing.T) {
	m := New(Options{})
	h := m.Middleware(func(_ context.Context, _ *router.Call, reply router.Reply) {
		reply(json.RawMessage(`{"isError":true}`), nil)
	})
	for i := range 3 {
		uri := fmt.Sprintf("file:///tmp/%d", i)
		h(context.Background(), &router.Call{Method: mcp.MethodResourcesRead, Target: &router.Target{Kind: router.TargetResource, Name: uri, Upstream: "fs"},
			Request: &router.Request{}}, func(json.RawMessage, error) {})
	}
	got := withPrefix(gather(t, m.Registry()), "mcp_proxy_requests_total")
	want := map[string]float64{`mcp_proxy_requests_total{method="resources/read",outcome="ok",tool="",upstream="fs"}`: 3}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v", got)
	}
}

// TestToolCap: past MaxTools distinct tools, calls count under "other", and no more
// series or keys are made.
func TestToolCap(t *testing.T) {
	m := New(Options{})
	h := m.Middleware(func(_ context.Context, _ *router.Call, reply router.Reply) { reply(json.RawMessage(`{}`), nil) })
	for round := range 2 {
		for i := range MaxTools + 50 {
			h(context.Background(), toolCall("u", fmt.Sprintf("u__t%03d", i)), func(json.RawMessage, error) {})
		}
		keys := 0
		m.calls.Range(func(any, any) bool { keys++; return true })
		if keys != MaxTools+1 {
			t.Fatalf("round %d: %d keys, want %d", round, keys, MaxTools+1)
		}
	}
	got := withPrefix(gather(t, m.Registry()), "mcp_proxy_requests_total")
	if len(got) != MaxTools+1 {
		t.Fatalf("%d series, want %d", len(got), MaxTools+1)
	}
	if v := got[`mcp_proxy_requests_total{method="tools/call",outcome="ok",tool="other",upstream="u"}`]; v != 100 {
		t.Errorf("other: %v", v)
	}
	if v := got[`mcp_proxy_requests_total{method="tools/call",outcome="ok",tool="u__t000",upstream="u"}`]; v != 2 {
		t.Errorf("u__t000: %v", v)
	}
}

// TestCodeCap: past maxCodes distinct codes, errors count under "other".
func TestCodeCap(t *testing.T) {
	m := New(Options{})
	for i := range maxCodes + 10 {
		m.countCode(int64(-40000 - i))
	}
	m.countCode(-40000)
	got := withPrefix(gather(t, m.Registry()), "mcp_proxy_errors_total")
	if len(got) != maxCodes+1 || got[`mcp_proxy_errors_total{code="other"}`] != 10 || got[`mcp_proxy_errors_total{code="-40000"}`] != 2 {
		t.Errorf("got %d series: other %v, -40000 %v", len(got), got[`mcp_proxy_errors_total{code="other"}`], got[`mcp_proxy_errors_total{code="-40000"}`])
	}
}

// TestUpstreamEvents: the state follows the upstream's life; restarts, failed starts,
// timeouts, the last start and the last error are kept.
func TestUpstreamEvents(t *testing.T) {
	m := New(Options{})
	m.Upstreams("a", "b")
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	ev := func(k upstream.EventKind, err error, at time.Duration) {
		m.UpstreamEvent(upstream.Event{Kind: k, Upstream: "a", Err: err, Time: t0.Add(at)})
	}
	state := func() string {
		t.Helper()
		all := gather(t, m.Registry())
		var on []string
		for _, s := range States {
			if all[`mcp_proxy_upstream_state{state="`+s+`",upstream="a"}`] == 1 {
				on = append(on, s)
			}
		}
		return strings.Join(on, ",")
	}
	if s := state(); s != StateWaiting {
		t.Errorf("declared: %q", s)
	}
	steps := []struct {
		kind upstream.EventKind
		err  error
		want string
	}{
		{upstream.EventStarting, nil, StateStarting},
		{upstream.EventStartFailed, errors.New("no such file"), StateDown},
		{upstream.EventRestarting, nil, StateRestarting},
		{upstream.EventStarting, nil, StateRestarting},
		{upstream.EventReady, nil, StateUp},
		{upstream.EventCallTimedOut, nil, StateUp},
		{upstream.EventExited, errors.New("exit status 3"), StateDown},
		{upstream.EventRestarting, nil, StateRestarting},
		{upstream.EventStarting, nil, StateRestarting},
		{upstream.EventReady, nil, StateUp},
	}
	for i, s := range steps {
		ev(s.kind, s.err, time.Duration(i)*time.Second)
		if got := state(); got != s.want {
			t.Errorf("after %v: state %q, want %q", s.kind, got, s.want)
		}
	}
	all := gather(t, m.Registry())
	for k, want := range map[string]float64{
		`mcp_proxy_upstream_restarts_total{upstream="a"}`:               2,
		`mcp_proxy_upstream_start_failures_total{upstream="a"}`:         1,
		`mcp_proxy_upstream_timeouts_total{upstream="a"}`:               1,
		`mcp_proxy_upstream_last_start_timestamp_seconds{upstream="a"}`: float64(t0.Add(9 * time.Second).Unix()),
		`mcp_proxy_upstream_state{state="waiting",upstream="b"}`:        1,
		`mcp_proxy_upstream_restarts_total{upstream="b"}`:               0,
	} {
		if got, ok := all[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if _, ok := all[`mcp_proxy_upstream_last_start_timestamp_seconds{upstream="b"}`]; ok {
		t.Error("b never started but has a start time")
	}
	v := m.Upstream("a")
	if v.State != StateUp || v.Restarts != 2 || v.LastError != "exit status 3" || !v.LastErrorAt.Equal(t0.Add(6*time.Second)) ||
		!v.LastReady.Equal(t0.Add(9*time.Second)) || v.Timeouts != 1 {
		t.Errorf("view: %+v", v)
	}
	ev(upstream.EventStopped, nil, 10*time.Second)
	if s := state(); s != StateStopped {
		t.Errorf("stopped: %q", s)
	}
}

// TestSessions: sessions open by era and transport, and the opened counter.
func TestSessions(t *testing.T) {
	m := New(Options{})
	open := func(transport, version string) {
		m.SessionEvent(server.SessionEvent{Kind: server.SessionOpened, Transport: transport, Version: version, Principal: "alice"})
	}
	closeS := func(transport, version string) {
		m.SessionEvent(server.SessionEvent{Kind: server.SessionClosed, Transport: transport, Version: version})
	}
	open(server.TransportStreamableHTTP, "2025-11-25")
	open(server.TransportStreamableHTTP, "2025-06-18")
	open(server.TransportSSE, "2024-11-05")
	open(server.TransportStdio, "2025-06-18")
	closeS(server.TransportStreamableHTTP, "2025-06-18")
	closeS(server.TransportStdio, "2025-06-18")
	closeS(server.TransportStdio, "2025-06-18") // a second close does not go below zero
	want := []SessionCount{{EraLegacy, server.TransportSSE, 1}, {EraLegacy, server.TransportStdio, 0}, {EraLegacy, server.TransportStreamableHTTP, 1}}
	if got := m.Sessions(); !reflect.DeepEqual(got, want) {
		t.Errorf("sessions: %+v", got)
	}
	all := gather(t, m.Registry())
	for k, v := range map[string]float64{
		`mcp_proxy_client_sessions{era="legacy",transport="streamable-http"}`:              1,
		`mcp_proxy_client_sessions_opened_total{era="legacy",transport="streamable-http"}`: 2,
		`mcp_proxy_client_sessions_opened_total{era="legacy",transport="stdio"}`:           1,
	} {
		if all[k] != v {
			t.Errorf("%s = %v, want %v", k, all[k], v)
		}
	}
	for k := range all {
		if strings.Contains(k, "alice") {
			t.Errorf("a principal became a label: %s", k)
		}
	}
}

// TestPolicyAndPlugins: decisions by rule, refusals by limit, hook latency and failures.
func TestPolicyAndPlugins(t *testing.T) {
	m := New(Options{})
	for range 2 {
		m.PolicyDecision(policy.Decided{Stage: policy.StageRules, Method: "tools/call", Upstream: "u", Rule: "devs", Decision: policy.DecisionAllow})
	}
	m.PolicyDecision(policy.Decided{Stage: policy.StageRules, Method: "tools/call", Upstream: "u", Rule: "default", Decision: policy.DecisionDeny})
	m.PolicyDecision(policy.Decided{Stage: policy.StageLimits, Method: "tools/call", Upstream: "u", Rule: "per-user", Decision: policy.DecisionRateLimited})
	m.PolicyDecision(policy.Decided{Stage: policy.StageLimits, Method: "tools/call", Upstream: "u", Rule: "per-user", Decision: policy.DecisionError})
	m.PluginHook(plugins.HookEvent{Plugin: "redact", Hook: plugins.HookAfter, Duration: 2 * time.Millisecond})
	m.PluginHook(plugins.HookEvent{Plugin: "redact", Hook: plugins.HookAfter, Duration: time.Millisecond, Err: errors.New("down")})
	all := gather(t, m.Registry())
	for k, v := range map[string]float64{
		`mcp_proxy_policy_decisions_total{decision="allow",rule="devs",stage="rules"}`:             2,
		`mcp_proxy_policy_decisions_total{decision="deny",rule="default",stage="rules"}`:           1,
		`mcp_proxy_policy_decisions_total{decision="rate_limited",rule="per-user",stage="limits"}`: 1,
		`mcp_proxy_policy_decisions_total{decision="error",rule="per-user",stage="limits"}`:        1,
		`mcp_proxy_rate_limited_total{limit="per-user"}`:                                           1,
		`mcp_proxy_plugin_hook_duration_seconds_count{hook="after",plugin="redact"}`:               2,
		`mcp_proxy_plugin_hook_failures_total{hook="after",plugin="redact"}`:                       1,
	} {
		if all[k] != v {
			t.Errorf("%s = %v, want %v", k, all[k], v)
		}
	}
	if s := all[`mcp_proxy_plugin_hook_duration_seconds_sum{hook="after",plugin="redact"}`]; s < 0.0029 || s > 0.0031 {
		t.Errorf("hook latency sum %v", s)
	}
}

type sizes []router.Sizes

func (s sizes) Sizes() []router.Sizes { return s }

func TestCatalogueAndConnections(t *testing.T) {
	m := New(Options{})
	m.SetCatalogue(sizes{{Upstream: "gh", Tools: 40, Prompts: 2, Resources: 0, Templates: 1}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := m.CountConnections(ln)
	defer cl.Close()
	var dialed []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		dialed = append(dialed, c)
		defer c.Close()
	}
	a1, _ := cl.Accept()
	a2, _ := cl.Accept()
	if cw, ok := a1.(interface{ CloseWrite() error }); !ok || cw.CloseWrite() != nil {
		t.Error("CloseWrite of a TCP connection does not reach it")
	}
	a1.Close()
	a1.Close() // counted once
	all := gather(t, m.Registry())
	for k, v := range map[string]float64{
		`mcp_proxy_catalogue_items{kind="tool",upstream="gh"}`:              40,
		`mcp_proxy_catalogue_items{kind="prompt",upstream="gh"}`:            2,
		`mcp_proxy_catalogue_items{kind="resource",upstream="gh"}`:          0,
		`mcp_proxy_catalogue_items{kind="resource_template",upstream="gh"}`: 1,
		`mcp_proxy_frontend_connections`:                                    1,
		`mcp_proxy_frontend_connections_total`:                              2,
	} {
		if got, ok := all[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	a2.Close()
	if v := gather(t, m.Registry())[`mcp_proxy_frontend_connections`]; v != 0 {
		t.Errorf("open after closing both: %v", v)
	}
}

// TestNames: every family follows the Prometheus conventions, and the runtime and
// process collectors are there.
func TestNames(t *testing.T) {
	m := New(Options{Version: "v1.2.3"})
	m.Upstreams("u")
	m.SetCatalogue(sizes{{Upstream: "u"}})
	through(m, newFakeClock(), toolCall("u", "u__x"), answer{err: mcp.ProxyError(mcp.CodeUpstreamTimeout, "u", "late")}, 0)
	m.PolicyDecision(policy.Decided{Stage: policy.StageRules, Rule: "r", Decision: policy.DecisionAllow})
	m.PluginHook(plugins.HookEvent{Plugin: "p", Hook: plugins.HookBefore})
	m.SessionEvent(server.SessionEvent{Kind: server.SessionOpened, Transport: server.TransportStdio})
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		seen[strings.SplitN(name, "_", 2)[0]] = true
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		if !strings.HasPrefix(name, Namespace+"_") {
			t.Errorf("%s lacks the %s_ prefix", name, Namespace)
		}
		isCounter := mf.GetType().String() == "COUNTER"
		if isCounter != strings.HasSuffix(name, "_total") {
			t.Errorf("%s: type %s; counters, and only they, end in _total", name, mf.GetType())
		}
		if mf.GetType().String() == "HISTOGRAM" && !strings.HasSuffix(name, "_seconds") {
			t.Errorf("%s: a histogram of durations ends in _seconds", name)
		}
		if mf.GetHelp() == "" {
			t.Errorf("%s has no help", name)
		}
	}
	if !seen["go"] || !seen["process"] {
		t.Errorf("runtime or process collector missing: %v", seen)
	}
	if v := gather(t, m.Registry())[`mcp_proxy_build_info{goversion="`+runtime.Version()+`",version="v1.2.3"}`]; v != 1 {
		t.Errorf("build_info: %v", v)
	}
}

func TestIsToolError(t *testing.T) {
	for _, c := range []struct {
		res  string
		want bool
	}{
		{`{"content":[],"isError":true}`, true},
		{`{"isError" :	true ,"content":[]}`, true},
		{`{"is\u0045rror":true}`, true},
		{`{"content":[],"isError":false}`, false},
		{`{"content":[]}`, false},
		{`{"content":[{"type":"text","text":"{\"isError\":true}"}]}`, false},
		{`{"structuredContent":{"isError":true},"isError":false}`, false},
		{`{"structuredContent":{"isError":true}}`, false},
		{`{"label":"isError","isError":true}`, true},
		{`"isError"`, false},
		{`{"xisError":true}`, false},
		{`{"notisError":true,"isError" : true}`, true},
	} {
		if got := isToolError(json.RawMessage(c.res)); got != c.want {
			t.Errorf("isToolError(%s) = %v, want %v", c.res, got, c.want)
		}
	}
}

// FuzzIsToolError: the quick scan never decides otherwise than reading the result's own
// isError member.
func FuzzIsToolError(f *testing.F) {
	f.Add(`{"content":[],"isError":true}`)
	f.Add(`{"structuredContent":{"isError":true},"isError":false}`)
	f.Add(`{"a":"x\"isError","isError" : true}`)
	f.Fuzz(func(t *testing.T, res string) {
		v, ok, err := jsonx.Get([]byte(res), "isError")
		want := err == nil && ok && string(v) == "true"
		if got := isToolError(json.RawMessage(res)); got != want && err == nil {
			t.Fatalf("isToolError(%s) = %v, its isError member says %v", res, got, want)
		}
	})
}
