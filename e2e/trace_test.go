package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/otlptest"
)

const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
)

// telemetryBlock is a telemetry block exporting everything to recv.
func telemetryBlock(recv *otlptest.Receiver, protocol string) string {
	return fmt.Sprintf("telemetry {\n  otlp_endpoint = %q\n  protocol = %q\n  sampling = 1\n  service_name = \"e2e-proxy\"\n}\n",
		recv.Endpoint, protocol)
}

// traceOf finds, among spans, the proxy's server span of a call and the upstream span
// below it, failing the test when the parentage is not what the client asked for.
func traceOf(t *testing.T, spans []otlptest.Span, traceID, parentID string) (server, leg otlptest.Span) {
	t.Helper()
	for _, s := range spans {
		if s.TraceID != traceID {
			continue
		}
		switch s.Kind {
		case tracepb.Span_SPAN_KIND_SERVER:
			server = s
		case tracepb.Span_SPAN_KIND_CLIENT:
			leg = s
		}
	}
	if server.SpanID == "" || leg.SpanID == "" {
		t.Fatalf("no server and upstream spans in trace %s:\n%+v", traceID, spans)
	}
	if server.ParentSpanID != parentID {
		t.Errorf("server span's parent %q, want the client's %q", server.ParentSpanID, parentID)
	}
	if leg.ParentSpanID != server.SpanID {
		t.Errorf("upstream span's parent %q, want the server span %q", leg.ParentSpanID, server.SpanID)
	}
	if server.Service != "e2e-proxy" {
		t.Errorf("service.name %q", server.Service)
	}
	return server, leg
}

func hasTwoSpans(traceID string) func([]otlptest.Span) bool {
	return func(spans []otlptest.Span) bool {
		n := 0
		for _, s := range spans {
			if s.TraceID == traceID {
				n++
			}
		}
		return n >= 2
	}
}

// TestTraceStdio: a tools/call from a stdio client that sent traceparent in _meta gives
// the OTLP collector (over gRPC) a server span whose parent is the client's span and an
// upstream span below it, and the upstream receives, in _meta, a traceparent of the same
// trace whose parent is that upstream span. The spans still buffered are flushed when
// the proxy exits.
func TestTraceStdio(t *testing.T) {
	t.Parallel()
	recv, err := otlptest.StartGRPC()
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := writeConfig(t, telemetryBlock(recv, "grpc")+fmt.Sprintf("audit {\n  file = %q\n  log = true\n}\n", auditPath)+
		testUpstream("t", "t", []string{"-echo-meta"}, `timeout = "300ms"`))
	rc := startRaw(t, cfg)
	rc.initialize()
	rc.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"t__echo_meta","_meta":{"progressToken":"p1",` +
		`"traceparent":"00-` + clientTraceID + `-` + clientSpanID + `-01","tracestate":"congo=t61rcWkgMzE"}}}`)
	m := rc.response(`"c1"`)
	// A call the upstream does not answer in time, in a trace of its own, and an
	// unsampled one: every line about them names their trace.
	rc.send(`{"jsonrpc":"2.0","id":"c2","method":"tools/call","params":{"name":"t__slow","arguments":{"ms":5000},` +
		`"_meta":{"traceparent":"00-` + slowTraceID + `-` + clientSpanID + `-01"}}}`)
	if r := rc.response(`"c2"`); !strings.Contains(string(r["error"]), "-31001") {
		t.Fatalf("the slow call: %s %s, want the upstream timeout", r["result"], r["error"])
	}
	rc.send(`{"jsonrpc":"2.0","id":"c3","method":"tools/call","params":{"name":"t__echo_meta",` +
		`"_meta":{"traceparent":"00-` + unsampledTraceID + `-` + clientSpanID + `-00"}}}`)
	rc.response(`"c3"`)
	// The proxy's own answers are traced too: a list, under the client's span.
	rc.send(`{"jsonrpc":"2.0","id":"l1","method":"tools/list","params":{"_meta":{"traceparent":"00-` + listTraceID + `-` + clientSpanID + `-01"}}}`)
	rc.response(`"l1"`)
	var res struct {
		StructuredContent map[string]any `json:"structuredContent"`
	}
	if err := json.Unmarshal(m["result"], &res); err != nil {
		t.Fatalf("tools/call: %s %s", m["result"], m["error"])
	}
	upstreamParent, _ := res.StructuredContent["traceparent"].(string)

	rc.stdin.Close() // the proxy exits and flushes its spans
	if err, exited := rc.wait(20 * time.Second); !exited || err != nil {
		t.Fatalf("proxy exit: %v (exited %v)\n%s", err, exited, rc.stderr)
	}
	spans, err := recv.Wait(10*time.Second, hasTwoSpans(clientTraceID))
	if err != nil {
		t.Fatalf("%v\nproxy stderr:\n%s", err, rc.stderr)
	}
	server, leg := traceOf(t, spans, clientTraceID, clientSpanID)
	spans, err = recv.Wait(10*time.Second, hasTwoSpans(slowTraceID))
	if err != nil {
		t.Fatalf("%v\nproxy stderr:\n%s", err, rc.stderr)
	}
	slowServer, slowLeg := traceOf(t, spans, slowTraceID, clientSpanID)
	var list, initialize bool
	for _, sp := range spans {
		switch {
		case sp.Name == "tools/list" && sp.TraceID == listTraceID:
			list = sp.Kind == tracepb.Span_SPAN_KIND_SERVER && sp.ParentSpanID == clientSpanID && sp.Attributes["jsonrpc.request.id"] == "l1"
		case sp.Name == "initialize":
			initialize = sp.Kind == tracepb.Span_SPAN_KIND_SERVER && sp.ParentSpanID == "" && sp.Attributes["mcp_proxy.outcome"] == "ok"
		}
	}
	if !list || !initialize {
		t.Errorf("spans of the proxy's own answers: tools/list under the client's span %v, initialize %v:\n%+v", list, initialize, spans)
	}
	checkTraceLogs(t, rc.stderr.String(), auditPath, map[string]traceWant{
		"t__echo_meta":        {trace: clientTraceID, auditSpan: server.SpanID},
		"t__slow":             {trace: slowTraceID, auditSpan: slowServer.SpanID, timeoutSpan: slowLeg.SpanID},
		"unsampled echo_meta": {trace: unsampledTraceID},
	})
	if want := "00-" + clientTraceID + "-" + leg.SpanID + "-01"; upstreamParent != want {
		t.Errorf("the upstream got traceparent %q, want %q (its parent the upstream span)", upstreamParent, want)
	}
	if ts := res.StructuredContent["tracestate"]; ts != "congo=t61rcWkgMzE" {
		t.Errorf("the upstream got tracestate %v", ts)
	}
	if res.StructuredContent["progressToken"] == nil {
		t.Errorf("the rest of _meta was lost: %v", res.StructuredContent)
	}
	for k, want := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "t__echo_meta",
		"jsonrpc.request.id": "c1", "mcp_proxy.upstream": "t", "mcp_proxy.outcome": "ok"} {
		if server.Attributes[k] != want {
			t.Errorf("server span %s = %q, want %q", k, server.Attributes[k], want)
		}
	}
	if leg.Attributes["gen_ai.tool.name"] != "echo_meta" || leg.Name != "tools/call echo_meta" || server.Name != "tools/call t__echo_meta" {
		t.Errorf("upstream span %q %v; server span %q", leg.Name, leg.Attributes, server.Name)
	}
}

// Traces of TestTraceStdio's other calls.
const (
	slowTraceID      = "5bf92f3577b34da6a3ce929d0e0e4737"
	listTraceID      = "7bf92f3577b34da6a3ce929d0e0e4739"
	unsampledTraceID = "6bf92f3577b34da6a3ce929d0e0e4738"
)

// traceWant is the trace a call's log lines and audit record must name: its trace id;
// the span id of its audit record (the proxy's server span; "" for an unsampled call,
// which has none); and, for a call that timed out, that of the timeout's log line (the
// upstream leg's span).
type traceWant struct{ trace, auditSpan, timeoutSpan string }

// checkTraceLogs checks, in the proxy's log and its audit file, the trace of each call
// (want's keys only label them in messages): every line and record that names a trace
// names one of want's, with the span want says, and each call has its audit line and
// record (and its timeout line when want has a timeout span).
func checkTraceLogs(t *testing.T, stderr, auditPath string, want map[string]traceWant) {
	t.Helper()
	byTrace := map[string]string{} // trace id → key of want
	for k, w := range want {
		byTrace[w.trace] = k
	}
	type line struct {
		Message string `json:"message"`
		Name    string `json:"name"`
		TraceID string `json:"trace_id"`
		SpanID  string `json:"span_id"`
	}
	seen := map[string]bool{}
	for _, raw := range strings.Split(stderr, "\n") {
		var l line
		if json.Unmarshal([]byte(raw), &l) != nil || l.TraceID == "" {
			continue
		}
		k, ok := byTrace[l.TraceID]
		if !ok {
			t.Errorf("a log line names a trace no call has: %s", raw)
			continue
		}
		w := want[k]
		switch {
		case l.Message == "audit":
			seen[k+" audit line"] = true
			if l.SpanID != w.auditSpan {
				t.Errorf("%s: audit line span_id %q, want %q: %s", k, l.SpanID, w.auditSpan, raw)
			}
		case strings.Contains(l.Message, "did not answer in time"):
			seen[k+" timeout line"] = true
			if l.SpanID != w.timeoutSpan {
				t.Errorf("%s: timeout line span_id %q, want the upstream span %q: %s", k, l.SpanID, w.timeoutSpan, raw)
			}
		}
	}
	b, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r line
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			t.Fatalf("audit record %q: %v", raw, err)
		}
		k, ok := byTrace[r.TraceID]
		if !ok {
			t.Errorf("audit record without its call's trace: %s", raw)
			continue
		}
		seen[k+" audit record"] = true
		if r.SpanID != want[k].auditSpan {
			t.Errorf("%s: audit record span_id %q, want %q: %s", k, r.SpanID, want[k].auditSpan, raw)
		}
	}
	for k, w := range want {
		for _, what := range []string{" audit line", " audit record"} {
			if !seen[k+what] {
				t.Errorf("%s: no%s with trace_id %s\n%s", k, what, w.trace, stderr)
			}
		}
		if w.timeoutSpan != "" && !seen[k+" timeout line"] {
			t.Errorf("%s: no timeout line with trace_id %s\n%s", k, w.trace, stderr)
		}
	}
}

// startTestserverHTTP runs the test server over Streamable HTTP with extra flags and
// returns its MCP URL and its stderr.
func startTestserverHTTP(t *testing.T, flags ...string) (string, *syncBuffer) {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	cmd := exec.Command(testserverBin, append([]string{"-name", "remote", "-http", "127.0.0.1:0", "-http-addr-file", addrFile}, flags...)...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(interruptSignal())
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			return "http://" + strings.TrimSpace(string(b)) + "/mcp", stderr
		}
	}
	t.Fatalf("the test server did not start listening:\n%s", stderr)
	return "", nil
}

// TestTraceHTTP: over the HTTP front end, a traceparent header (no _meta) is the parent
// of the call's server span, spans go to the collector over OTLP/HTTP, and an HTTP
// upstream gets the proxy's trace context both in _meta and as a traceparent header.
func TestTraceHTTP(t *testing.T) {
	t.Parallel()
	recv, err := otlptest.StartHTTP()
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	upURL, upStderr := startTestserverHTTP(t, "-echo-meta")
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	url, stderr, proxy := startHTTPProxyCmd(t, telemetryBlock(recv, "http/protobuf")+
		fmt.Sprintf("audit {\n  file = %q\n  log = true\n}\n", auditPath)+
		fmt.Sprintf("upstream \"r\" {\n  url = %q\n  protocol = \"legacy\"\n}\n", upURL))
	c := &httpWire{t: t, url: url}
	ctx := ctxT(t, 90*time.Second)
	init := c.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`, nil)
	if init.status != http.StatusOK || init.header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s\n%s", init.status, init.body, stderr)
	}
	c.sid = init.header.Get("Mcp-Session-Id")
	c.post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)

	const headerTrace, headerSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	r := c.post(ctx, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"r__echo_meta"}}`,
		map[string]string{"traceparent": "00-" + headerTrace + "-" + headerSpan + "-01"})
	var resp struct {
		Result struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.body, &resp); err != nil || r.status != http.StatusOK {
		t.Fatalf("tools/call: %d %s\n%s", r.status, r.body, stderr)
	}
	proxy.Process.Signal(interruptSignal()) // the proxy exits and flushes its spans
	spans, err := recv.Wait(20*time.Second, hasTwoSpans(headerTrace))
	if err != nil {
		t.Fatalf("%v\nproxy stderr:\n%s", err, stderr)
	}
	server, leg := traceOf(t, spans, headerTrace, headerSpan)
	checkTraceLogs(t, stderr.String(), auditPath, map[string]traceWant{"r__echo_meta": {trace: headerTrace, auditSpan: server.SpanID}})
	want := "00-" + headerTrace + "-" + leg.SpanID + "-01"
	if got := resp.Result.StructuredContent["traceparent"]; got != want {
		t.Errorf("the upstream got _meta.traceparent %v, want %s", got, want)
	}
	if !regexp.MustCompile(`request id=\d+ traceparent="` + want + `"`).MatchString(upStderr.String()) {
		t.Errorf("the upstream's traceparent header is not %s:\n%s", want, upStderr)
	}
	if server.Attributes["mcp.session.id"] != c.sid || server.Attributes["jsonrpc.request.id"] != "7" {
		t.Errorf("server span attributes %v, want session %s and request id 7", server.Attributes, c.sid)
	}
}

// TestTraceInputRounds: a legacy client's call to a modern upstream that answers
// input_required takes several rounds (the proxy asks the client, then calls again);
// each is a span under the call's upstream span, numbered in order.
func TestTraceInputRounds(t *testing.T) {
	t.Parallel()
	recv, err := otlptest.StartGRPC()
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	cfg := writeConfig(t, telemetryBlock(recv, "grpc")+everythingUpstreamEra("everything", "ev", "modern"))
	cs, stderr, _ := connectSDKWithRoots(t, cfg, &sdkmcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *sdkmcp.CreateMessageRequest) (*sdkmcp.CreateMessageResult, error) {
			return &sdkmcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &sdkmcp.TextContent{Text: "sampled answer"}}, nil
		},
		ElicitationHandler: func(context.Context, *sdkmcp.ElicitRequest) (*sdkmcp.ElicitResult, error) {
			return &sdkmcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada", "username": "ada", "confirm": true, "color": "blue"}}, nil
		},
	}, "2025-11-25", &sdkmcp.Root{URI: "file:///mrtr/root", Name: "root"})
	res, err := cs.CallTool(ctxT(t, 60*time.Second), &sdkmcp.CallToolParams{Name: "ev__test_input_required_result_multi_round", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("multi-round call: %v %q\n%s", err, textOf(res), stderr)
	}
	cs.Close() // the proxy exits and flushes its spans
	rounds := func(spans []otlptest.Span) []otlptest.Span {
		var out []otlptest.Span
		for _, s := range spans {
			if s.Name == "tools/call input round" {
				out = append(out, s)
			}
		}
		return out
	}
	spans, err := recv.Wait(20*time.Second, func(spans []otlptest.Span) bool { return len(rounds(spans)) >= 2 })
	if err != nil {
		t.Fatalf("%v\nproxy stderr:\n%s", err, stderr)
	}
	var leg otlptest.Span
	for _, s := range spans {
		if s.Kind == tracepb.Span_SPAN_KIND_CLIENT && s.Name == "tools/call test_input_required_result_multi_round" {
			leg = s
		}
	}
	seen := map[string]bool{}
	for _, r := range rounds(spans) {
		if r.TraceID != leg.TraceID || r.ParentSpanID != leg.SpanID || r.Attributes["mcp_proxy.round"] == "" {
			t.Errorf("round span %+v, want one under the upstream span %+v", r, leg)
		}
		seen[r.Attributes["mcp_proxy.round"]] = true
	}
	for i := 1; i <= len(seen); i++ {
		if !seen[fmt.Sprint(i)] {
			t.Errorf("rounds %v: round %d missing", seen, i)
		}
	}
}
