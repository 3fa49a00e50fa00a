package e2e

import (
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

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/mcp-proxy/mcp-proxy/internal/otlptest"
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
	cfg := writeConfig(t, telemetryBlock(recv, "grpc")+testUpstream("t", "t", []string{"-echo-meta"}, ""))
	rc := startRaw(t, cfg)
	rc.initialize()
	rc.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"t__echo_meta","_meta":{"progressToken":"p1",` +
		`"traceparent":"00-` + clientTraceID + `-` + clientSpanID + `-01","tracestate":"congo=t61rcWkgMzE"}}}`)
	m := rc.response(`"c1"`)
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
	url, stderr, proxy := startHTTPProxyCmd(t, telemetryBlock(recv, "http/protobuf")+
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
