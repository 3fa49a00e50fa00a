package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// endpointLifeConfig is the configuration of the endpoints' long-lived tests: an HTTP
// proxy (with an admin listener) in front of the test server and the Go SDK
// everything-server, with the endpoint blocks given.
func endpointLifeConfig(addr, adminAddr, endpoints string) string {
	return fmt.Sprintf(`
listen "http" {
  address = %q
  path    = "/mcp"
}
admin {
  address = %q
}
%s
`, addr, adminAddr, endpoints) + testUpstream("t", "t", nil, "") + everythingUpstream("ev", "ev")
}

func plainClient(t *testing.T, name string, tr mcp.Transport, version string, changed *atomic.Int32, logs fmt.Stringer) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if changed != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) }
	}
	var sopts *mcp.ClientSessionOptions
	if version != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts).Connect(ctxT(t, 90*time.Second), tr, sopts)
	if err != nil {
		t.Fatalf("connecting %s: %v\n%s", name, err, logs)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestEndpointReload: a reload changes an endpoint's filter and mode, removes one and
// adds one, while a session of the changed endpoint stays open: the session gets a
// list_changed and lists the new catalogue under the same session id; the removed
// endpoint's path answers 404, the added one serves.
func TestEndpointReload(t *testing.T) {
	t.Parallel()
	addr, adminAddr := freeAddr(t), freeAddr(t)
	v1 := endpointLifeConfig(addr, adminAddr, `
endpoint "a" {
  tools {
    include = ["t__*"]
  }
}
endpoint "b" {
  upstreams = ["ev"]
}
endpoint "keep" {
  upstreams = ["ev"]
  mode      = "search"
}
`)
	cfg := writeConfig(t, v1)
	stderr, _ := startProxy(t, cfg, false, addr, adminAddr)
	base := "http://" + addr
	ctx := ctxT(t, 90*time.Second)
	var changed atomic.Int32
	cs := plainClient(t, "reload-a", &mcp.StreamableClientTransport{Endpoint: base + "/mcp/a"}, "2025-11-25", &changed, stderr)
	sid := cs.ID()
	// Sessions whose view the reload does not change: they are not told of it.
	var keepChanged, wholeChanged atomic.Int32
	keep := plainClient(t, "reload-keep", &mcp.StreamableClientTransport{Endpoint: base + "/mcp/keep"}, "2025-11-25", &keepChanged, stderr)
	whole := plainClient(t, "reload-whole", &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, "2025-11-25", &wholeChanged, stderr)
	before := listed(t, ctx, cs)
	if len(before) < 3 || slices.ContainsFunc(before, func(n string) bool { return !strings.HasPrefix(n, "t__") }) {
		t.Fatalf("a lists %v", before)
	}

	// b's clients: a Streamable HTTP session with its GET stream, an HTTP+SSE stream,
	// and a modern subscription; each ends when b is removed.
	bWire := &httpWire{t: t, url: base + "/mcp/b"}
	bWire.initialize(ctx, stderr)
	bEnded := map[string]chan struct{}{}
	follow := func(what string, resp *http.Response) {
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d\n%s", what, resp.StatusCode, stderr)
		}
		ch := make(chan struct{})
		bEnded[what] = ch
		go func() {
			defer close(ch)
			defer resp.Body.Close()
			readWireEvents(resp.Body, nil)
		}()
	}
	follow("the GET stream", bWire.do(ctx, http.MethodGet, "", nil))
	sseReq, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/mcp/b/sse", nil)
	sseResp, err := http.DefaultClient.Do(sseReq)
	if err != nil {
		t.Fatal(err)
	}
	follow("the HTTP+SSE stream", sseResp)
	modernB := &httpWire{t: t, url: base + "/mcp/b"}
	follow("the modern subscription", modernB.do(ctx, http.MethodPost,
		`{"jsonrpc":"2.0","id":"sub-1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}))

	rewrite(t, cfg, endpointLifeConfig(addr, adminAddr, `
endpoint "a" {
  mode   = "search"
  always = ["t__echo"]
}
endpoint "c" {
  upstreams = ["t"]
  tools {
    include = ["t__echo"]
  }
}
endpoint "keep" {
  upstreams = ["ev"]
  mode      = "search"
}
`))
	code, out := reloadCLI(t, "http://"+adminAddr)
	changes := fmt.Sprint(out["changes"])
	if code != 0 || out["outcome"] != "applied" || !strings.Contains(changes, "endpoint a changed") ||
		!strings.Contains(changes, "endpoint b removed") || !strings.Contains(changes, "endpoint c added") {
		t.Fatalf("reload: %d %v\n%s", code, out, stderr)
	}
	waitChanged(t, &changed, 1)
	// The changed endpoint's session was told; by then the others would have been (one
	// flush tells them all), and a request on each has had its answer since.
	for _, other := range []*mcp.ClientSession{keep, whole} {
		if err := other.Ping(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n, m := keepChanged.Load(), wholeChanged.Load(); n != 0 || m != 0 {
		t.Errorf("sessions whose view the reload left alone were told it changed: keep %d, the listen path %d", n, m)
	}
	if got := listed(t, ctx, cs); !slices.Equal(got, []string{"search_tools", "call_tool", "t__echo"}) {
		t.Errorf("a after the reload lists %v", got)
	}
	if cs.ID() != sid {
		t.Errorf("the session changed: %s, was %s", cs.ID(), sid)
	}
	if got := searchNames(t, ctx, cs, "audio content", 2); !slices.Contains(got, "ev__test_audio_content") {
		t.Errorf("a's search after the reload found %v", got)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo"}); err != nil || res.IsError {
		t.Errorf("a call after the reload: %v", err)
	}
	// b is gone: its streams closed, its session unknown (404), and a new initialize
	// at its path is 404 too; c serves.
	for what, ch := range bEnded {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Errorf("%s of the removed endpoint is still open\n%s", what, stderr)
		}
	}
	if r := bWire.post(ctx, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, nil); r.status != http.StatusNotFound {
		t.Errorf("the removed endpoint's session: %d %s", r.status, r.body)
	}
	bWire.sid = ""
	if r := bWire.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`, nil); r.status != http.StatusNotFound {
		t.Errorf("an initialize at the removed endpoint's path: %d %s", r.status, r.body)
	}
	c := plainClient(t, "reload-c", &mcp.StreamableClientTransport{Endpoint: base + "/mcp/c"}, "2025-11-25", nil, stderr)
	if got := listed(t, ctx, c); !slices.Equal(got, []string{"t__echo"}) {
		t.Errorf("c lists %v", got)
	}
	// The status shows the endpoints as they are now.
	st, err := http.Get("http://" + adminAddr + "/status?format=json")
	if err == nil {
		defer st.Body.Close()
		var b strings.Builder
		buf := make([]byte, 64<<10)
		for {
			n, err := st.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if !strings.Contains(b.String(), `"name": "c"`) || strings.Contains(b.String(), `"name": "b"`) || !strings.Contains(b.String(), `"mode": "search"`) {
			t.Errorf("status: %s", b.String())
		}
	}
}

// TestEndpointMixedClients is the long-lived shape with endpoints: one HTTP proxy used
// in turn by clients of both eras and both HTTP transports on its endpoints and its
// listen path, then a stdio proxy on one endpoint, each seeing its own catalogue; the
// first session keeps its activated tools throughout.
func TestEndpointMixedClients(t *testing.T) {
	t.Parallel()
	addr, adminAddr := freeAddr(t), freeAddr(t)
	endpoints := `
endpoint "find" {
  mode = "search"
}
endpoint "tonly" {
  upstreams = ["t"]
}
`
	cfg := writeConfig(t, endpointLifeConfig(addr, adminAddr, endpoints))
	stderr, _ := startProxy(t, cfg, false, addr, adminAddr)
	base := "http://" + addr
	ctx := ctxT(t, 120*time.Second)

	// 1. A legacy Streamable HTTP client searches and activates.
	var changed atomic.Int32
	first := plainClient(t, "legacy-find", &mcp.StreamableClientTransport{Endpoint: base + "/mcp/find"}, "2025-11-25", &changed, stderr)
	found := searchNames(t, ctx, first, "echo", 2)
	if len(found) == 0 {
		t.Fatalf("nothing found for echo")
	}
	waitChanged(t, &changed, 1)

	// 2. A modern client of the same endpoint: stateless, it lists no activated tools,
	// and calls what a search found by its name.
	modern := plainClient(t, "modern-find", &mcp.StreamableClientTransport{Endpoint: base + "/mcp/find"}, "2026-07-28", nil, stderr)
	if got := listed(t, ctx, modern); !slices.Equal(got, []string{"search_tools", "call_tool"}) {
		t.Errorf("the modern client lists %v", got)
	}
	mfound := searchNames(t, ctx, modern, "echo", 2)
	if !slices.Equal(mfound, found) {
		t.Errorf("the modern client found %v, the legacy one %v", mfound, found)
	}
	if res, err := modern.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo"}); err != nil || res.IsError {
		t.Errorf("the modern client's call by name: %v", err)
	}

	// 3. A legacy HTTP+SSE client of the other endpoint, at its /sse.
	sse := plainClient(t, "sse-tonly", &mcp.SSEClientTransport{Endpoint: base + "/mcp/tonly/sse"}, "", nil, stderr)
	tonly := listed(t, ctx, sse)
	if len(tonly) == 0 || slices.ContainsFunc(tonly, func(n string) bool { return !strings.HasPrefix(n, "t__") }) {
		t.Errorf("the HTTP+SSE client of tonly lists %v", tonly)
	}
	if _, err := sse.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_simple_text"}); err == nil {
		t.Error("tonly reached another upstream's tool")
	}

	// 4. The listen path and /sse: the whole catalogue.
	whole := plainClient(t, "legacy-whole", &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, "2025-11-25", nil, stderr)
	all := listed(t, ctx, whole)
	if !slices.Contains(all, "ev__test_simple_text") || !slices.Contains(all, "t__echo") || slices.Contains(all, "search_tools") {
		t.Errorf("the listen path lists %v", all)
	}
	wsse := plainClient(t, "sse-whole", &mcp.SSEClientTransport{Endpoint: base + "/sse"}, "", nil, stderr)
	if n := len(listed(t, ctx, wsse)); n != len(all) {
		t.Errorf("/sse lists %d tools, the listen path %d", n, len(all))
	}
	// A session of one endpoint is unknown on another's path.
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp/tonly", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Mcp-Session-Id", first.ID())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("find's session on tonly's path: %v %v", resp.StatusCode, err)
	}

	// 5. The first session, after all that, still lists what it activated.
	after := listed(t, ctx, first)
	for _, n := range found {
		if !slices.Contains(after, n) {
			t.Errorf("the first session lost %s: %v", n, after)
		}
	}

	// 6. stdio: run --endpoint, legacy and modern (a file without the listen block:
	// over HTTP every endpoint has its path).
	stdioCfg := writeConfig(t, endpoints+testUpstream("t", "t", nil, "")+everythingUpstream("ev", "ev"))
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		cmd := exec.Command(proxyBin, "run", "--config", stdioCfg, "--endpoint", "tonly", "--log-level", "debug")
		cmd.Stderr = &syncBuffer{}
		stdio := plainClient(t, "stdio-"+version, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, version, nil, stderr)
		if got := listed(t, ctx, stdio); !slices.Equal(got, tonly) {
			t.Errorf("stdio %s on tonly lists %v, want %v", version, got, tonly)
		}
	}

	// A reload that removes the endpoint a stdio proxy serves is refused whole: the
	// client goes on with the same catalogue.
	ownCfg := writeConfig(t, endpoints+testUpstream("t", "t", nil, "")+everythingUpstream("ev", "ev"))
	cmd := exec.Command(proxyBin, "run", "--config", ownCfg, "--endpoint", "tonly", "--log-level", "debug")
	own := &syncBuffer{}
	cmd.Stderr = own
	stdio := plainClient(t, "stdio-reload", &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, "2025-11-25", nil, own)
	rewrite(t, ownCfg, "endpoint \"find\" {\n  mode = \"search\"\n}\n"+testUpstream("t", "t", nil, "")+everythingUpstream("ev", "ev"))
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(own.String(), "configuration reload rejected"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no rejected reload in the log:\n%s", own)
		}
	}
	if !strings.Contains(own.String(), `endpoint \"tonly\" is served on stdio by this process`) {
		t.Errorf("the rejection does not say why:\n%s", own)
	}
	if got := listed(t, ctx, stdio); !slices.Equal(got, tonly) {
		t.Errorf("after the refused reload, stdio on tonly lists %v, want %v", got, tonly)
	}

	// 7. The CLI: tools --endpoint prints an endpoint's catalogue (in search mode, what
	// its search may find); an unknown endpoint and --endpoint over HTTP are errors.
	out, errOut, code := runCLI(t, "tools", "--config", stdioCfg, "--endpoint", "tonly", "--json")
	if code != 0 || strings.Count(out, `"name"`) != len(tonly) || strings.Contains(out, "ev__") {
		t.Errorf("tools --endpoint tonly (exit %d): %s\n%s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "tools", "--config", stdioCfg, "--endpoint", "find")
	if code != 0 || !strings.Contains(out, "ev__test_simple_text") || !strings.Contains(errOut, "search mode") {
		t.Errorf("tools --endpoint find (exit %d): %s\n%s", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, "run", "--config", stdioCfg, "--endpoint", "nope"); code == 0 || !strings.Contains(errOut, `endpoint "nope": no such endpoint block (endpoints: [find tonly])`) {
		t.Errorf("run --endpoint nope: %d %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "run", "--config", cfg, "--endpoint", "find"); code == 0 || !strings.Contains(errOut, "over HTTP every endpoint is served on its own path") {
		t.Errorf("run --endpoint with a listen block: %d %s", code, errOut)
	}
}

// TestEndpointRateLimits: a rate_limit can select endpoints and keep a bucket per
// endpoint: the Go SDK client exhausts ops' bucket (-31006 naming the limit) while the
// same principal's calls through another endpoint and the listen path go on; and
// `mcp-proxy validate` reports a limit naming an endpoint that does not exist at its
// line.
func TestEndpointRateLimits(t *testing.T) {
	t.Parallel()
	addr, adminAddr := freeAddr(t), freeAddr(t)
	cfg := writeConfig(t, endpointLifeConfig(addr, adminAddr, `
endpoint "ops" {
  upstreams = ["t"]
}
endpoint "ops-eu" {
  upstreams = ["t"]
}
endpoint "ide" {
  upstreams = ["t"]
}
policy {
  default = "allow"
  rate_limit "ops-each" {
    rate      = "1/h"
    burst     = 2
    endpoints = ["ops*"]
    per       = ["endpoint", "principal"]
  }
}
`))
	stderr, _ := startProxy(t, cfg, false, addr, adminAddr)
	base := "http://" + addr
	ctx := ctxT(t, 60*time.Second)
	echo := func(cs *mcp.ClientSession) error {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"text": "hi"}})
		return err
	}
	sessions := map[string]*mcp.ClientSession{}
	for _, p := range []string{"/mcp/ops", "/mcp/ops-eu", "/mcp/ide", "/mcp"} {
		sessions[p] = plainClient(t, "limits"+p, &mcp.StreamableClientTransport{Endpoint: base + p}, "2025-11-25", nil, stderr)
	}
	for i := range 2 {
		if err := echo(sessions["/mcp/ops"]); err != nil {
			t.Fatalf("call %d through ops: %v\n%s", i, err, stderr)
		}
	}
	if err := echo(sessions["/mcp/ops"]); err == nil || !strings.Contains(err.Error(), `rate limit "ops-each" exceeded`) {
		t.Errorf("the third call through ops: %v", err)
	}
	for _, p := range []string{"/mcp/ops-eu", "/mcp/ops-eu", "/mcp/ide", "/mcp/ide", "/mcp/ide", "/mcp", "/mcp", "/mcp"} {
		if err := echo(sessions[p]); err != nil {
			t.Errorf("a call through %s, ops' bucket empty: %v", p, err)
		}
	}

	bad := writeConfig(t, testUpstream("t", "t", nil, "")+`endpoint "ops" {
}
policy {
  rate_limit "typo" {
    rate      = "1/s"
    endpoints = ["osp"]
  }
}
`)
	out, err := exec.Command(proxyBin, "validate", "--config", bad).CombinedOutput()
	if err == nil || !regexp.MustCompile(`proxy.hcl:11:\d+: error: Unknown endpoint; rate_limit "typo" names endpoint "osp"`).Match(out) {
		t.Errorf("validate: %v\n%s", err, out)
	}
}
