package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/router"
)

const (
	clientTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan   = "00f067aa0ba902b7"
	clientParent = "00-" + clientTrace + "-" + clientSpan + "-01"
)

// testTracing is a Tracing whose ended spans go to the returned recorder.
func testTracing(sampling float64) (*Tracing, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	s := Settings{Sampling: sampling}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(Sampler(s)))
	return newTracing(tp, s), rec
}

// chain builds the handler of mws around final, as router.Use does.
func chain(final router.Handler, mws ...router.Middleware) router.Handler {
	h := final
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// upstreamEnd is the end of a test chain: it keeps what would go upstream and answers.
type upstreamEnd struct {
	got    *router.Call
	ctx    context.Context
	result json.RawMessage
	err    error
}

func (u *upstreamEnd) handle(ctx context.Context, c *router.Call, reply router.Reply) {
	u.got, u.ctx = c, ctx
	reply(u.result, u.err)
}

// session is a router.Client with an id, as the server's sessions are.
type session struct{ router.Client }

func (session) SessionID() string { return "sess-1" }

func toolCall(params string) *router.Call {
	return &router.Call{Method: mcp.MethodToolsCall, Params: json.RawMessage(params),
		Target:  &router.Target{Kind: router.TargetTool, Name: "gh__search", Original: "search", Upstream: "gh"},
		Request: &router.Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(params), ID: jsonrpc.StringID("r-7"), Session: session{}}}
}

func call(t *testing.T, h router.Handler, ctx context.Context, c *router.Call) (json.RawMessage, error) {
	t.Helper()
	var res json.RawMessage
	var err error
	n := 0
	h(ctx, c, func(r json.RawMessage, e error) { res, err = r, e; n++ })
	if n != 1 {
		t.Fatalf("reply called %d times", n)
	}
	return res, err
}

func attrMap(kvs []attribute.KeyValue) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.Emit()
	}
	return m
}

// metaOf returns the _meta of params as a map of strings.
func metaOf(t *testing.T, params json.RawMessage) map[string]any {
	t.Helper()
	meta, ok, err := jsonx.Get(params, "_meta")
	if err != nil || !ok {
		t.Fatalf("no _meta in %s", params)
	}
	var m map[string]any
	if err := json.Unmarshal(meta, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSpansFromClientContext(t *testing.T) {
	tr, rec := testTracing(0.5)
	end := &upstreamEnd{result: json.RawMessage(`{"content":[]}`)}
	var between trace.SpanContext
	policy := func(next router.Handler) router.Handler { // a stage between the two: sees the request span
		return func(ctx context.Context, c *router.Call, reply router.Reply) {
			between = trace.SpanContextFromContext(ctx)
			next(ctx, c, reply)
		}
	}
	h := chain(end.handle, tr.Wrap([]router.Middleware{policy})...)
	params := `{"name":"search","arguments":{"q":"x"},"_meta":{"progressToken":5,"traceparent":"` + clientParent + `","tracestate":"congo=t61rcWkgMzE"}}`
	if _, err := call(t, h, context.Background(), toolCall(params)); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	leg, server := spans[0], spans[1] // the inner span ends first
	if server.SpanKind() != trace.SpanKindServer || leg.SpanKind() != trace.SpanKindClient {
		t.Fatalf("kinds: server %v, leg %v", server.SpanKind(), leg.SpanKind())
	}
	if got := server.SpanContext().TraceID().String(); got != clientTrace {
		t.Errorf("trace id %s, want the client's %s", got, clientTrace)
	}
	if got := server.Parent().SpanID().String(); got != clientSpan || !server.Parent().IsRemote() {
		t.Errorf("server span's parent %s (remote %v), want the client's %s", got, server.Parent().IsRemote(), clientSpan)
	}
	if leg.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Errorf("upstream span's parent is not the request span")
	}
	if between.SpanID() != server.SpanContext().SpanID() {
		t.Errorf("the stage between saw span %s, want the request span", between.SpanID())
	}
	if server.Name() != "tools/call gh__search" || leg.Name() != "tools/call search" {
		t.Errorf("names %q, %q", server.Name(), leg.Name())
	}
	sa, la := attrMap(server.Attributes()), attrMap(leg.Attributes())
	for k, want := range map[attribute.Key]string{keyMethod: "tools/call", keyToolName: "gh__search", keyOperation: "execute_tool",
		keyRequestID: "r-7", keySessionID: "sess-1", keyUpstream: "gh", keyOutcome: OutcomeOK} {
		if sa[k] != want {
			t.Errorf("server span %s = %q, want %q", k, sa[k], want)
		}
	}
	for k, want := range map[attribute.Key]string{keyMethod: "tools/call", keyToolName: "search", keyExposedName: "gh__search",
		keyUpstream: "gh", keyOutcome: OutcomeOK} {
		if la[k] != want {
			t.Errorf("upstream span %s = %q, want %q", k, la[k], want)
		}
	}
	// Upstream gets the leg's context in _meta, the rest of _meta as it was.
	meta := metaOf(t, end.got.Params)
	want := "00-" + clientTrace + "-" + leg.SpanContext().SpanID().String() + "-01"
	if meta["traceparent"] != want || meta["tracestate"] != "congo=t61rcWkgMzE" || meta["progressToken"] != float64(5) {
		t.Errorf("upstream _meta %v, want traceparent %s, the tracestate and the progress token", meta, want)
	}
	if !strings.HasPrefix(string(end.got.Params), `{"name":"search","arguments":{"q":"x"},"_meta":{"progressToken":5,`) {
		t.Errorf("params rewritten beyond _meta: %s", end.got.Params)
	}
	if !strings.Contains(params, clientParent) || string(toolCall(params).Params) != params {
		t.Error("the client's params were edited in place")
	}
}

func TestSpansWithoutClientContext(t *testing.T) {
	tr, rec := testTracing(1)
	end := &upstreamEnd{result: json.RawMessage(`{"content":[]}`)}
	h := chain(end.handle, tr.Wrap(nil)...)
	if _, err := call(t, h, context.Background(), toolCall(`{"name":"search"}`)); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	leg, server := spans[0], spans[1]
	if server.Parent().IsValid() {
		t.Errorf("the request span has a parent: %v", server.Parent())
	}
	meta := metaOf(t, end.got.Params)
	want := "00-" + server.SpanContext().TraceID().String() + "-" + leg.SpanContext().SpanID().String() + "-01"
	if meta["traceparent"] != want {
		t.Errorf("upstream traceparent %v, want %s", meta["traceparent"], want)
	}
	if _, ok := meta["tracestate"]; ok {
		t.Errorf("tracestate invented: %v", meta)
	}
}

func TestSampledOut(t *testing.T) {
	for _, ratio := range []float64{0, 1e-12} { // no span started; a span started and dropped
		t.Run(fmt.Sprintf("no client context, ratio %g: nothing goes upstream", ratio), func(t *testing.T) {
			tr, rec := testTracing(ratio)
			end := &upstreamEnd{result: json.RawMessage(`{}`)}
			h := chain(end.handle, tr.Wrap(nil)...)
			const params = `{"name":"search","_meta":{"progressToken":7}}`
			call(t, h, context.Background(), toolCall(params))
			if n := len(rec.Ended()); n != 0 {
				t.Fatalf("%d spans recorded", n)
			}
			if string(end.got.Params) != params {
				t.Errorf("params %s, want them untouched", end.got.Params)
			}
			if sc := trace.SpanContextFromContext(end.ctx); sc.IsValid() {
				t.Errorf("the upstream leg's context has trace %s, of a trace nobody records", sc.TraceID())
			}
		})
	}
	t.Run("unsampled client context passes unchanged", func(t *testing.T) {
		tr, rec := testTracing(1) // parent-based: the client's decision wins
		end := &upstreamEnd{result: json.RawMessage(`{}`)}
		h := chain(end.handle, tr.Wrap(nil)...)
		params := `{"name":"search","_meta":{"traceparent":"00-` + clientTrace + `-` + clientSpan + `-00"}}`
		call(t, h, context.Background(), toolCall(params))
		if n := len(rec.Ended()); n != 0 {
			t.Fatalf("%d spans recorded", n)
		}
		if string(end.got.Params) != params {
			t.Errorf("params %s, want them untouched", end.got.Params)
		}
		if sc := trace.SpanContextFromContext(end.ctx); sc.TraceID().String() != clientTrace || trace.SpanFromContext(end.ctx).IsRecording() {
			t.Errorf("the upstream leg's context has %v, want the client's trace, not recording (for the log lines)", sc)
		}
	})
	t.Run("unsampled header context goes upstream unchanged", func(t *testing.T) {
		tr, rec := testTracing(1)
		end := &upstreamEnd{result: json.RawMessage(`{}`)}
		h := chain(end.handle, tr.Wrap(nil)...)
		r, _ := http.NewRequest(http.MethodPost, "http://proxy/mcp", nil)
		unsampled := "00-" + clientTrace + "-" + clientSpan + "-00"
		r.Header.Set("traceparent", unsampled)
		r.Header.Set("tracestate", "vendor=x")
		call(t, h, tr.HTTPContext(context.Background(), r), toolCall(`{"name":"search","_meta":{"progressToken":7}}`))
		if n := len(rec.Ended()); n != 0 {
			t.Fatalf("%d spans recorded", n)
		}
		meta := metaOf(t, end.got.Params)
		if meta["traceparent"] != unsampled || meta["tracestate"] != "vendor=x" || meta["progressToken"] != float64(7) {
			t.Errorf("upstream _meta %v, want the header's context as it came, and the progress token", meta)
		}
	})
	t.Run("sampled client context is recorded at ratio 0", func(t *testing.T) {
		tr, rec := testTracing(0)
		end := &upstreamEnd{result: json.RawMessage(`{}`)}
		h := chain(end.handle, tr.Wrap(nil)...)
		call(t, h, context.Background(), toolCall(`{"name":"search","_meta":{"traceparent":"`+clientParent+`"}}`))
		if n := len(rec.Ended()); n != 2 {
			t.Fatalf("%d spans recorded, want 2", n)
		}
	})
}

func TestHTTPHeaderContext(t *testing.T) {
	const headerTrace = "0af7651916cd43dd8448eb211c80319c"
	header := "00-" + headerTrace + "-b7ad6b7169203331-01"
	httpCtx := func(tr *Tracing, tp string) context.Context {
		r, _ := http.NewRequest(http.MethodPost, "http://proxy/mcp", nil)
		if tp != "" {
			r.Header.Set("traceparent", tp)
		}
		return tr.HTTPContext(context.Background(), r)
	}
	t.Run("header alone is the parent", func(t *testing.T) {
		tr, rec := testTracing(0)
		h := chain((&upstreamEnd{result: json.RawMessage(`{}`)}).handle, tr.Wrap(nil)...)
		call(t, h, httpCtx(tr, header), toolCall(`{"name":"search"}`))
		spans := rec.Ended()
		if len(spans) != 2 || spans[1].SpanContext().TraceID().String() != headerTrace || len(spans[1].Links()) != 0 {
			t.Fatalf("spans %v, want two in the header's trace, unlinked", spans)
		}
	})
	t.Run("_meta wins, header linked", func(t *testing.T) {
		tr, rec := testTracing(1)
		h := chain((&upstreamEnd{result: json.RawMessage(`{}`)}).handle, tr.Wrap(nil)...)
		call(t, h, httpCtx(tr, header), toolCall(`{"name":"search","_meta":{"traceparent":"`+clientParent+`"}}`))
		server := rec.Ended()[1]
		if server.SpanContext().TraceID().String() != clientTrace {
			t.Errorf("trace %s, want the _meta's", server.SpanContext().TraceID())
		}
		if l := server.Links(); len(l) != 1 || l[0].SpanContext.TraceID().String() != headerTrace {
			t.Errorf("links %v, want the header's context", l)
		}
	})
	t.Run("no header", func(t *testing.T) {
		tr, _ := testTracing(1)
		ctx := context.Background()
		if got := httpCtx(tr, ""); got != ctx {
			t.Error("a context was made for a request without trace context")
		}
		if sc := trace.SpanContextFromContext(httpCtx(tr, "garbage")); sc.IsValid() {
			t.Error("a malformed header gave a context")
		}
	})
}

func TestOutcomes(t *testing.T) {
	denied := mcp.ProxyError(mcp.CodePolicyDenied, "gh", "denied by rule r1")
	tests := []struct {
		name                     string
		result                   string
		err                      error
		refuse                   error // a stage between the two refuses with it: no upstream span
		outcome, errType, status string
		origin                   string
	}{
		{name: "ok", result: `{"content":[]}`, outcome: OutcomeOK},
		{name: "tool error", result: `{"content":[],"isError":true}`, outcome: OutcomeToolError, errType: "tool_error"},
		{name: "upstream error", err: jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "bad q"), outcome: OutcomeError,
			errType: "-32602", status: "bad q", origin: "upstream"},
		{name: "timeout", err: mcp.ProxyError(mcp.CodeUpstreamTimeout, "gh", "no answer in 60s"), outcome: OutcomeTimeout,
			errType: "-31001", status: "no answer in 60s", origin: "proxy"},
		{name: "cancelled", err: router.ErrCancelled, outcome: OutcomeCancelled},
		{name: "denied by the policy", refuse: denied, outcome: OutcomeDenied, errType: "-31005", status: "denied by rule r1", origin: "proxy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, rec := testTracing(1)
			end := &upstreamEnd{result: json.RawMessage(tt.result), err: tt.err}
			var stages []router.Middleware
			if tt.refuse != nil {
				stages = append(stages, func(router.Handler) router.Handler {
					return func(_ context.Context, _ *router.Call, reply router.Reply) { reply(nil, tt.refuse) }
				})
			}
			call(t, chain(end.handle, tr.Wrap(stages)...), context.Background(), toolCall(`{"name":"search"}`))
			spans := rec.Ended()
			want := 2
			if tt.refuse != nil {
				want = 1
			}
			if len(spans) != want {
				t.Fatalf("%d spans, want %d", len(spans), want)
			}
			for _, s := range spans {
				a := attrMap(s.Attributes())
				if a[keyOutcome] != tt.outcome || a[keyErrorType] != tt.errType || a[keyErrorOrigin] != tt.origin {
					t.Errorf("%s: outcome %q error.type %q origin %q, want %q %q %q", s.Name(), a[keyOutcome], a[keyErrorType],
						a[keyErrorOrigin], tt.outcome, tt.errType, tt.origin)
				}
				if tt.status != "" && (s.Status().Code != codes.Error || s.Status().Description != tt.status) {
					t.Errorf("%s: status %v, want Error %q", s.Name(), s.Status(), tt.status)
				}
				if tt.status == "" && s.Status().Code == codes.Error {
					t.Errorf("%s: status %v, want unset", s.Name(), s.Status())
				}
				if tt.errType != "" && strings.HasPrefix(tt.errType, "-") && a[keyStatusCode] != tt.errType {
					t.Errorf("%s: rpc.response.status_code %q, want %q", s.Name(), a[keyStatusCode], tt.errType)
				}
			}
		})
	}
}

func TestResourceAndTaskTargets(t *testing.T) {
	tr, rec := testTracing(1)
	end := &upstreamEnd{result: json.RawMessage(`{"contents":[]}`)}
	h := chain(end.handle, tr.Wrap(nil)...)
	c := &router.Call{Method: mcp.MethodResourcesRead, Params: json.RawMessage(`{"uri":"file:///a"}`),
		Target:  &router.Target{Kind: router.TargetResource, Name: "file:///a", Original: "file:///a", Upstream: "fs"},
		Request: &router.Request{Method: mcp.MethodResourcesRead, ID: jsonrpc.IntID(3)}}
	call(t, h, context.Background(), c)
	server := rec.Ended()[1]
	a := attrMap(server.Attributes())
	if server.Name() != "resources/read" || a[keyResourceURI] != "file:///a" || a[keyRequestID] != "3" || a[keyOperation] != "" {
		t.Errorf("resource span %q %v", server.Name(), a)
	}
	if _, ok := a[keySessionID]; ok {
		t.Error("session id without a session")
	}
	c = &router.Call{Method: mcp.MethodTasksGet, Params: json.RawMessage(`{"taskId":"t1"}`),
		Target:  &router.Target{Kind: router.TargetTask, Name: "t1", Original: "t1", Upstream: "fs"},
		Request: &router.Request{Method: mcp.MethodTasksGet}}
	call(t, h, context.Background(), c)
	server = rec.Ended()[3]
	if a := attrMap(server.Attributes()); server.Name() != "tasks/get" || a[keyTaskID] != "t1" {
		t.Errorf("task span %q %v", server.Name(), a)
	}
}

func TestModernProtocolVersion(t *testing.T) {
	tr, rec := testTracing(1)
	h := chain((&upstreamEnd{result: json.RawMessage(`{}`)}).handle, tr.Wrap(nil)...)
	params := `{"name":"search","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`
	c := toolCall(params)
	c.Request.Modern = true
	call(t, h, context.Background(), c)
	if a := attrMap(rec.Ended()[1].Attributes()); a[keyProtocolVersion] != "2026-07-28" {
		t.Errorf("mcp.protocol.version %q", a[keyProtocolVersion])
	}
}

func TestWrapNil(t *testing.T) {
	var tr *Tracing
	stages := []router.Middleware{func(h router.Handler) router.Handler { return h }}
	if got := tr.Wrap(stages); len(got) != 1 {
		t.Errorf("nil Tracing added stages: %d", len(got))
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestEndpointAttribute: a request through an endpoint block names it on its span.
func TestEndpointAttribute(t *testing.T) {
	tr, rec := testTracing(1)
	h := chain((&upstreamEnd{result: json.RawMessage(`{}`)}).handle, tr.Wrap(nil)...)
	c := toolCall(`{"name":"search"}`)
	c.Request.Endpoint = "review"
	call(t, h, context.Background(), c)
	if a := attrMap(rec.Ended()[1].Attributes()); a[keyEndpoint] != "review" {
		t.Errorf("mcp_proxy.endpoint %q", a[keyEndpoint])
	}
	call(t, h, context.Background(), toolCall(`{"name":"search"}`))
	if _, ok := attrMap(rec.Ended()[3].Attributes())[keyEndpoint]; ok {
		t.Error("a request through no endpoint names one")
	}
}
