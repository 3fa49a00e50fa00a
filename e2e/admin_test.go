package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// heldUpstream is an upstream block for the test server behind a switch: while the file
// hold exists, every start of it fails at once, so that an upstream that crashed stays
// down (restarting with backoff) until the test removes the file.
func heldUpstream(label, hold string, extra string) string {
	script := fmt.Sprintf("if [ -e %s ]; then echo held down by the test >&2; exit 1; fi; exec %s", shellQuote(hold), shellQuote(testserverBin))
	return fmt.Sprintf("upstream %q {\n  command = [\"sh\", \"-c\", %s]\n  %s\n}\n", label, q(script), extra)
}

// adminGet GETs path from the admin listener at base with an optional bearer key.
func adminGet(t *testing.T, base, path, key string) (int, []byte) {
	t.Helper()
	return adminDo(t, http.MethodGet, base, path, key)
}

// adminDo sends one request to the admin listener.
func adminDo(t *testing.T, method, base, path, key string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// scrape reads /metrics and returns every sample of the proxy's own series, keyed by
// the series as the exposition prints it (labels sorted by name).
func scrape(t *testing.T, base, key string) map[string]float64 {
	t.Helper()
	code, body := adminGet(t, base, "/metrics", key)
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// family returns the samples of one metric family (name and labels), without buckets.
func family(all map[string]float64, name string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range all {
		if k == name || strings.HasPrefix(k, name+"{") {
			out[k] = v
		}
	}
	return out
}

// waitReady polls /readyz until it answers want (200 or 503), and returns its body.
func waitReady(t *testing.T, base string, want int, within time.Duration, logs fmt.Stringer) []byte {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, body := adminGet(t, base, "/readyz", "")
		if code == want {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %s after %v (want %d)\n%s", code, body, within, want, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// statusCLI runs `mcp-proxy status --admin base --json` and returns its exit status and
// the status it printed.
func statusCLI(t *testing.T, base, key string) (int, map[string]any) {
	t.Helper()
	cmd := exec.Command(proxyBin, "status", "--admin", base, "--json")
	cmd.Env = append(os.Environ(), "MCP_PROXY_API_KEY="+key)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
		t.Fatalf("status --json printed %q (stderr %q): %v", stdout.String(), stderr.String(), err)
	}
	return code, st
}

// upstreamOf finds one upstream in a decoded status.
func upstreamOf(t *testing.T, st map[string]any, name string) map[string]any {
	t.Helper()
	ups, _ := st["upstreams"].([]any)
	for _, u := range ups {
		if m, ok := u.(map[string]any); ok && m["name"] == name {
			return m
		}
	}
	t.Fatalf("no upstream %q in %v", name, st)
	return nil
}

// TestAdminMetricsAndReadiness: over the authenticated HTTP front end, a known mix of
// calls (allowed, denied by a rule, rate limited, a tool error, an upstream timeout)
// shows exactly those counts on /metrics; /readyz turns 503 naming the required
// upstream when it dies and 200 when it is back, an optional upstream that never starts
// notwithstanding; `mcp-proxy status --json` agrees and exits 1 while not ready. The
// admin endpoints take the front end's API keys; the probes take none.
func TestAdminMetricsAndReadiness(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hold := filepath.Join(dir, "hold")
	addr, adminAddr := freeAddr(t), freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf(`
listen "http" {
  address = %q
}
admin {
  address = %q
}
auth {
  api_key "ops" {
    token = %q
  }
}
policy {
  default = "allow"
  rule "no-long-notes" {
    effect    = "deny"
    tools     = ["t__echo"]
    condition = try(length(args.note) >= 20, false)
  }
  rate_limit "fail-once" {
    rate  = "1/h"
    burst = 1
    tools = ["t__fail"]
  }
}
`, addr, adminAddr, aliceKey)+heldUpstream("t", hold, `timeout = "1s"`)+
		"upstream \"opt\" {\n  command  = [\"/nonexistent/mcp-server\"]\n  required = false\n}\n")
	stderr, _ := startProxy(t, cfg, true, addr, adminAddr)
	base := "http://" + adminAddr
	ctx := ctxT(t, 120*time.Second)

	// Credentials: the front end's API key for /metrics and /status; none for probes.
	if code, _ := adminGet(t, base, "/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without a key: %d", code)
	}
	if code, _ := adminGet(t, base, "/status?format=json", "wrong-key-0123456789abcdef"); code != http.StatusUnauthorized {
		t.Errorf("/status with a wrong key: %d", code)
	}
	if code, body := adminGet(t, base, "/healthz", ""); code != 200 || string(body) != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}

	c := &httpWire{t: t, url: "http://" + addr + "/mcp"}
	c.initializeAs(ctx, aliceKey)
	waitReady(t, base, 200, 30*time.Second, stderr) // "opt" never starts: it is not required

	// The front end's own answers are counted too (not as calls of an upstream).
	if r := c.post(ctx, `{"jsonrpc":"2.0","id":100,"method":"tools/list"}`, bearer(aliceKey)); !bytes.Contains(r.body, []byte(`"tools"`)) {
		t.Fatalf("tools/list: %d %s", r.status, r.body)
	}
	call := func(id int, tool, args string) wireReply {
		return c.post(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args), bearer(aliceKey))
	}
	for i, tc := range []struct {
		tool, args string
		code       int64 // 0: a result
		isError    bool
	}{
		{"t__echo", `{"note":"short"}`, 0, false},
		{"t__echo", `{"note":"also short"}`, 0, false},
		{"t__echo", `{"note":"far too long for the rule's condition"}`, -31005, false},
		{"t__fail", `{}`, 0, true},
		{"t__fail", `{}`, -31006, false},
		{"t__slow", `{"ms":5000}`, -31001, false},
	} {
		r := call(i+1, tc.tool, tc.args)
		if tc.code != 0 {
			if code := rpcErrorCode(t, r.body); code != tc.code {
				t.Fatalf("call %d (%s): code %d, want %d: %s", i+1, tc.tool, code, tc.code, r.body)
			}
			continue
		}
		if !bytes.Contains(r.body, []byte(`"result"`)) || bytes.Contains(r.body, []byte(`"isError":true`)) != tc.isError {
			t.Fatalf("call %d (%s): %s", i+1, tc.tool, r.body)
		}
	}

	m := scrape(t, base, aliceKey)
	series := func(outcome, tool string) string {
		return fmt.Sprintf(`mcp_proxy_requests_total{method="tools/call",outcome=%q,tool=%q,upstream="t"}`, outcome, tool)
	}
	for name, want := range map[string]map[string]float64{
		"mcp_proxy_requests_total": {
			series("ok", "t__echo"): 2, series("denied", "t__echo"): 1,
			series("tool_error", "t__fail"): 1, series("rate_limited", "t__fail"): 1,
			series("timeout", "t__slow"): 1,
			`mcp_proxy_requests_total{method="initialize",outcome="ok",tool="",upstream=""}`: 1,
			`mcp_proxy_requests_total{method="tools/list",outcome="ok",tool="",upstream=""}`: 1,
		},
		"mcp_proxy_errors_total": {`mcp_proxy_errors_total{code="-31005"}`: 1, `mcp_proxy_errors_total{code="-31006"}`: 1,
			`mcp_proxy_errors_total{code="-31001"}`: 1},
		"mcp_proxy_policy_decisions_total": {
			`mcp_proxy_policy_decisions_total{decision="allow",rule="default",stage="rules"}`:           5,
			`mcp_proxy_policy_decisions_total{decision="deny",rule="no-long-notes",stage="rules"}`:      1,
			`mcp_proxy_policy_decisions_total{decision="rate_limited",rule="fail-once",stage="limits"}`: 1,
		},
		"mcp_proxy_rate_limited_total": {`mcp_proxy_rate_limited_total{limit="fail-once"}`: 1},
		"mcp_proxy_request_duration_seconds_count": {`mcp_proxy_request_duration_seconds_count{method="tools/call",upstream="t"}`: 6,
			`mcp_proxy_request_duration_seconds_count{method="initialize",upstream=""}`: 1,
			`mcp_proxy_request_duration_seconds_count{method="tools/list",upstream=""}`: 1},
		"mcp_proxy_upstream_request_duration_seconds_count":   {`mcp_proxy_upstream_request_duration_seconds_count{method="tools/call",upstream="t"}`: 4},
		"mcp_proxy_client_sessions":                           {`mcp_proxy_client_sessions{era="legacy",transport="streamable-http"}`: 1},
		"mcp_proxy_client_sessions_opened_total":              {`mcp_proxy_client_sessions_opened_total{era="legacy",transport="streamable-http"}`: 1},
		"mcp_proxy_upstream_timeouts_total":                   {`mcp_proxy_upstream_timeouts_total{upstream="t"}`: 1, `mcp_proxy_upstream_timeouts_total{upstream="opt"}`: 0},
		"mcp_proxy_requests_in_flight":                        {`mcp_proxy_requests_in_flight{upstream="t"}`: 0, `mcp_proxy_requests_in_flight{upstream="opt"}`: 0},
		`mcp_proxy_upstream_state{state="up",upstream="t"}`:   {`mcp_proxy_upstream_state{state="up",upstream="t"}`: 1},
		`mcp_proxy_upstream_restarts_total{upstream="t"}`:     {`mcp_proxy_upstream_restarts_total{upstream="t"}`: 0},
		`mcp_proxy_catalogue_items{kind="tool",upstream="t"}`: {`mcp_proxy_catalogue_items{kind="tool",upstream="t"}`: 11},
	} {
		if got := family(m, name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", name, got, want)
		}
	}
	if m[`mcp_proxy_upstream_state{state="up",upstream="opt"}`] != 0 || m[`mcp_proxy_upstream_start_failures_total{upstream="opt"}`] < 1 {
		t.Errorf("opt: state up %v, start failures %v", m[`mcp_proxy_upstream_state{state="up",upstream="opt"}`], m[`mcp_proxy_upstream_start_failures_total{upstream="opt"}`])
	}
	if m["mcp_proxy_frontend_connections_total"] < 1 || m["go_goroutines"] == 0 || m["process_cpu_seconds_total"] == 0 {
		t.Errorf("connections %v, go_goroutines %v, process_cpu_seconds_total %v", m["mcp_proxy_frontend_connections_total"],
			m["go_goroutines"], m["process_cpu_seconds_total"])
	}

	code, st := statusCLI(t, base, aliceKey)
	if code != 0 || st["ready"] != true {
		t.Fatalf("status while ready: exit %d, %v", code, st)
	}
	if u := upstreamOf(t, st, "t"); u["state"] != "up" || u["required"] != true || u["calls"] != float64(6) || u["tools"] != float64(11) ||
		u["transport"] != "stdio" || u["era"] != "legacy" {
		t.Errorf("status of t: %v", u)
	}
	if u := upstreamOf(t, st, "opt"); u["ready"] != false || u["required"] != false || !strings.Contains(fmt.Sprint(u["last_error"]), "/nonexistent/mcp-server") {
		t.Errorf("status of opt: %v", u)
	}

	// The required upstream dies and cannot come back while the hold is there.
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := call(10, "t__crash", `{}`); rpcErrorCode(t, r.body) != -31002 {
		t.Fatalf("crash: %s", r.body)
	}
	body := waitReady(t, base, 503, 10*time.Second, stderr)
	var rd struct {
		Ready    bool     `json:"ready"`
		NotReady []string `json:"not_ready"`
	}
	if err := json.Unmarshal(body, &rd); err != nil || rd.Ready || !reflect.DeepEqual(rd.NotReady, []string{"t"}) {
		t.Errorf("/readyz while t is down: %s", body)
	}
	code, st = statusCLI(t, base, aliceKey)
	if code != 1 || st["ready"] != false || !reflect.DeepEqual(st["not_ready"], []any{"t"}) {
		t.Errorf("status while t is down: exit %d, %v", code, st)
	}
	if u := upstreamOf(t, st, "t"); u["ready"] != false || (u["state"] != "restarting" && u["state"] != "down") {
		t.Errorf("status of t while down: %v", u)
	}
	m = scrape(t, base, aliceKey)
	if m[`mcp_proxy_upstream_state{state="up",upstream="t"}`] != 0 || m[series("unavailable", "t__crash")] != 1 {
		t.Errorf("metrics while t is down: up %v, crash %v", m[`mcp_proxy_upstream_state{state="up",upstream="t"}`], m[series("unavailable", "t__crash")])
	}

	// Released, it restarts with backoff and the proxy is ready again.
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	waitReady(t, base, 200, 45*time.Second, stderr)
	code, st = statusCLI(t, base, aliceKey)
	if u := upstreamOf(t, st, "t"); code != 0 || u["state"] != "up" || u["restarts"].(float64) < 1 {
		t.Errorf("status once t is back: exit %d, %v", code, u)
	}
	m = scrape(t, base, aliceKey)
	if m[`mcp_proxy_upstream_state{state="up",upstream="t"}`] != 1 || m[`mcp_proxy_upstream_restarts_total{upstream="t"}`] < 1 {
		t.Errorf("metrics once t is back: up %v, restarts %v", m[`mcp_proxy_upstream_state{state="up",upstream="t"}`], m[`mcp_proxy_upstream_restarts_total{upstream="t"}`])
	}
	if r := call(11, "t__echo", `{"note":"back"}`); !bytes.Contains(r.body, []byte(`"result"`)) {
		t.Errorf("echo once t is back: %s", r.body)
	}
}
