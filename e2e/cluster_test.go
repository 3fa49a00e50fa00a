package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// startCluster starts redis-server, three replicas of the proxy with base (plus their
// listen and cluster blocks) and HAProxy round-robin in front, for the test. Without
// redis-server or haproxy installed the test is skipped, or fails when CI is set.
func startCluster(t *testing.T, front, base, clusterAttrs string) *topology.Topology {
	t.Helper()
	topo, err := topology.Start(topology.Options{ProxyBin: proxyBin, Replicas: 3, Base: withTestGrace(base), ClusterAttrs: clusterAttrs,
		FrontAddr: front, Dir: t.TempDir(), LogLevel: "debug"})
	if errors.Is(err, topology.ErrMissing) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
		for _, r := range topo.Replicas {
			for _, bad := range []string{"WARNING: DATA RACE", "panic:"} {
				if strings.Contains(r.Output.String(), bad) {
					t.Errorf("replica %s logged %q:\n%s", r.Name, bad, r.Output)
				}
			}
		}
		if t.Failed() {
			t.Logf("cluster logs:\n%s", topo.Logs())
		}
	})
	return topo
}

// clusterBase is the replicas' configuration: two API keys, the test server, and a limit
// of 10 calls a minute per principal on its echo tool (other tools are not limited).
func clusterBase(front string) string {
	return fmt.Sprintf(`
auth {
  resource = "http://%s/mcp"
  api_key "alice" {
    token = %q
  }
  api_key "bob" {
    token = %q
  }
  api_key "carol" {
    token = %q
  }
}
admin {
  address = "127.0.0.1:0"
}
policy {
  default = "allow"
  rate_limit "echo-per-principal" {
    rate  = "10/m"
    burst = 10
    per   = ["principal"]
    tools = ["t__echo"]
  }
}
`, front, aliceKey, bobKey, carolKey) + testUpstream("t", "t", nil, "")
}

const carolKey = "carol-key-0123456789abcdef"

// modernCall sends one stateless (2026-07-28) tools/call as key's principal through the
// front end; it returns the JSON-RPC error code (0 for a result), the message, and the
// replica that served it.
func modernCall(t *testing.T, url, key, tool string) (code int64, message, servedBy string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"text":"hi"},`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, tool)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	msg := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") { // the response is the last data line
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id":1`) {
				msg = []byte(d)
			}
		}
	}
	var m struct {
		Result *json.RawMessage `json:"result"`
		Error  *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg, &m); err != nil || (m.Result == nil && m.Error == nil) {
		t.Fatalf("answer to %s (HTTP %d): %v: %s", tool, resp.StatusCode, err, raw)
	}
	served := resp.Header.Get("X-Served-By")
	if m.Error != nil {
		return m.Error.Code, m.Error.Message, served
	}
	return 0, "", served
}

// callMany makes n calls and counts the admitted ones, the refusals by code, and the
// replicas that served them.
func callMany(t *testing.T, url, key, tool string, n int) (admitted int, refused map[int64]int, replicas map[string]int) {
	t.Helper()
	refused, replicas = map[int64]int{}, map[string]int{}
	for range n {
		code, msg, by := modernCall(t, url, key, tool)
		replicas[by]++
		switch code {
		case 0:
			admitted++
		case -31006, -32603:
			refused[code]++
		default:
			t.Fatalf("%s: unexpected error %d %s", tool, code, msg)
		}
	}
	return admitted, refused, replicas
}

// waitRecovered makes unlimited calls as carol until every replica has logged that Redis
// is reachable again (each finds out with the first call it serves a second after the
// last failure).
func waitRecovered(t *testing.T, topo *topology.Topology) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		done := 0
		for _, r := range topo.Replicas {
			if strings.Contains(r.Output.String(), "redis is reachable again") {
				done++
			}
		}
		if done == len(topo.Replicas) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d replicas use redis again", done, len(topo.Replicas))
		}
		modernCall(t, topo.URL(), carolKey, "t__echo")
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClusterRateLimitLocal: a limit of 10/m per principal across three replicas behind
// round-robin HAProxy admits 10 calls, not 30; another principal has its own 10. With
// Redis stopped and on_redis_failure = "local", each replica limits on its own (so up to
// 30 pass, and each replica logs the change once); with Redis back, the limit is shared
// again.
func TestClusterRateLimitLocal(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, clusterBase(front), `on_redis_failure = "local"`)
	url := topo.URL()

	start := time.Now()
	admitted, refused, replicas := callMany(t, url, aliceKey, "t__echo", 18)
	if extra := refilled(start); admitted < 10 || admitted > 10+extra || admitted+refused[-31006] != 18 {
		t.Errorf("alice through 3 replicas: %d admitted, refused %v; want 10 admitted (+%d refilled meanwhile), the rest rate-limited (-31006)",
			admitted, refused, extra)
	}
	if len(replicas) != 3 {
		t.Errorf("the calls were served by %v, want all three replicas (round-robin without stickiness)", replicas)
	}
	if admitted, _, _ := callMany(t, url, bobKey, "t__echo", 4); admitted != 4 {
		t.Errorf("bob: %d of 4 admitted; his bucket is his own", admitted)
	}

	if err := topo.Redis.Stop(); err != nil {
		t.Fatal(err)
	}
	// Each replica now has a bucket of 10 in its own memory: 45 calls, 15 a replica.
	start = time.Now()
	admitted, refused, replicas = callMany(t, url, aliceKey, "t__echo", 45)
	if extra := 3 * refilled(start); admitted < 30 || admitted > 30+extra || admitted+refused[-31006] != 45 {
		t.Errorf("without redis: %d admitted, refused %v (served by %v); want 10 per replica, 30 (+%d refilled meanwhile)",
			admitted, refused, replicas, extra)
	}
	local := 0
	for _, r := range topo.Replicas {
		if n := strings.Count(r.Output.String(), "redis is unreachable"); n != 1 {
			t.Errorf("replica %s logged the outage %d times, want once", r.Name, n)
		}
		m := clusterMetrics(t, r)
		if m["mcp_proxy_cluster_redis_reachable"] != "0" || m["mcp_proxy_cluster_redis_failures_total"] != "1" {
			t.Errorf("replica %s metrics without redis: %v; want unreachable and 1 failure", r.Name, m)
		}
		n, _ := strconv.Atoi(m[`mcp_proxy_cluster_redis_fallback_calls_total{mode="local"}`])
		local += n
	}
	if local != 45 {
		t.Errorf("calls decided locally, over the replicas' metrics: %d, want the 45 made without redis", local)
	}

	if err := topo.Redis.Start(); err != nil {
		t.Fatal(err)
	}
	waitRecovered(t, topo)
	for _, r := range topo.Replicas {
		if m := clusterMetrics(t, r); m["mcp_proxy_cluster_redis_reachable"] != "1" {
			t.Errorf("replica %s metrics with redis back: %v", r.Name, m)
		}
	}
	// Redis came back empty: a fresh shared bucket of 10.
	start = time.Now()
	admitted, refused, _ = callMany(t, url, aliceKey, "t__echo", 15)
	if extra := refilled(start); admitted < 10 || admitted > 10+extra || admitted+refused[-31006] != 15 {
		t.Errorf("with redis back: %d admitted, refused %v; want 10 shared (+%d refilled meanwhile)", admitted, refused, extra)
	}
}

// TestClusterRateLimitDeny: with on_redis_failure = "deny", a call a limit applies to is
// refused with a proxy error while Redis is down, a call no limit applies to still
// passes, and when Redis is back calls pass again.
func TestClusterRateLimitDeny(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, clusterBase(front), `on_redis_failure = "deny"`)
	url := topo.URL()
	if admitted, _, _ := callMany(t, url, aliceKey, "t__echo", 3); admitted != 3 {
		t.Fatalf("with redis: %d of 3 admitted", admitted)
	}
	if err := topo.Redis.Stop(); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		code, msg, by := modernCall(t, url, aliceKey, "t__echo")
		if code != -32603 || !strings.Contains(msg, "mcp-proxy: rate limit \"echo-per-principal\" could not be checked") {
			t.Errorf("limited call without redis (served by %s): %d %q, want the proxy's -32603", by, code, msg)
		}
	}
	if code, msg, _ := modernCall(t, url, aliceKey, "t__env"); code != 0 {
		t.Errorf("a call no limit applies to, without redis: %d %s", code, msg)
	}
	if err := topo.Redis.Start(); err != nil {
		t.Fatal(err)
	}
	waitRecovered(t, topo)
	if admitted, refused, _ := callMany(t, url, aliceKey, "t__echo", 3); admitted != 3 {
		t.Errorf("with redis back: %d of 3 admitted (refused %v)", admitted, refused)
	}
}

var adminAddrLog = regexp.MustCompile(`"address":"([^"]+)"[^\n]*admin listener serving`)

// clusterMetrics reads the mcp_proxy_cluster_* series of a replica's admin listener.
func clusterMetrics(t *testing.T, r *topology.Replica) map[string]string {
	t.Helper()
	m := adminAddrLog.FindStringSubmatch(r.Output.String())
	if m == nil {
		t.Fatalf("replica %s logged no admin listener", r.Name)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+m[1]+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, value, ok := strings.Cut(sc.Text(), " "); ok && strings.HasPrefix(name, "mcp_proxy_cluster_") {
			out[name] = value
		}
	}
	return out
}

// refilled is how many tokens a bucket of the 10/m limit can have regained since start
// (one every 6 s): on a slow machine a phase of calls may take that long, and the limit
// then rightly admits that many more.
func refilled(start time.Time) int { return int(time.Since(start) / (6 * time.Second)) }

// modernList sends one stateless tools/list (with cursor, when not "") and returns the
// page's names, its nextCursor, the JSON-RPC error code (0 for a result) and the replica
// that served it.
func modernList(t *testing.T, url, cursor string) (names []string, next string, code int64, servedBy string) {
	t.Helper()
	params := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	if cursor != "" {
		params = fmt.Sprintf(`"cursor":%q,`, cursor) + params
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+params+`}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Result *struct {
			Tools      []struct{ Name string } `json:"tools"`
			NextCursor string                  `json:"nextCursor"`
		} `json:"result"`
		Error *struct{ Code int64 } `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("tools/list answer: %v", err)
	}
	if m.Error != nil {
		return nil, "", m.Error.Code, resp.Header.Get("X-Served-By")
	}
	for _, tl := range m.Result.Tools {
		names = append(names, tl.Name)
	}
	return names, m.Result.NextCursor, 0, resp.Header.Get("X-Served-By")
}

// TestClusterModernPagination: with the cluster's shared key, a modern (stateless)
// client pages through tools/list through HAProxy round-robin, each page on another
// replica, and gets the whole list, as one replica alone gives it.
func TestClusterModernPagination(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, "proxy {\n  page_size = 2\n}\n"+testUpstream("t", "t", nil, ""),
		`key = "0123456789abcdef0123456789abcdef-e2e"`)
	all := func(url string) ([]string, map[string]int) {
		var names []string
		served := map[string]int{}
		cursor := ""
		for page := 0; ; page++ {
			if page > 100 {
				t.Fatal("more than 100 pages")
			}
			got, next, code, by := modernList(t, url, cursor)
			if code != 0 {
				t.Fatalf("page %d (cursor %q) served by %s: error %d", page+1, cursor, by, code)
			}
			names = append(names, got...)
			served[by]++
			if next == "" {
				return names, served
			}
			cursor = next
		}
	}
	through, served := all(topo.URL())
	alone, _ := all("http://" + topo.Replicas[0].Addr + "/mcp")
	if len(served) != 3 {
		t.Errorf("pages served by %v, want all three replicas", served)
	}
	if strings.Join(through, ",") != strings.Join(alone, ",") || len(through) < 6 {
		t.Errorf("paging through the cluster: %v\none replica alone: %v", through, alone)
	}
}
