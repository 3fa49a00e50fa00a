package e2e

import (
	"bufio"
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// servedBy is an http.RoundTripper that records which replica served each answer
// (HAProxy's X-Served-By), by method.
type servedBy struct {
	mu   sync.Mutex
	seen map[string]map[string]int // method → replica → count
}

func (s *servedBy) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		s.mu.Lock()
		if s.seen == nil {
			s.seen = map[string]map[string]int{}
		}
		if s.seen[req.Method] == nil {
			s.seen[req.Method] = map[string]int{}
		}
		s.seen[req.Method][resp.Header.Get("X-Served-By")]++
		s.mu.Unlock()
	}
	return resp, err
}

func (s *servedBy) replicas(method string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.seen[method] {
		out[k] = v
	}
	return out
}

var replicaIDLog = regexp.MustCompile(`"replica":"([0-9a-f]{8})"`)

// ownerOf returns the replica whose id starts the session id.
func ownerOf(t *testing.T, topo *topology.Topology, sid string) *topology.Replica {
	t.Helper()
	for _, r := range topo.Replicas {
		if m := replicaIDLog.FindStringSubmatch(r.Output.String()); m != nil && strings.HasPrefix(sid, m[1]+"-") {
			return r
		}
	}
	t.Fatalf("no replica owns session %q", sid)
	return nil
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterLegacySession: the Go SDK client keeps one legacy session through HAProxy
// round-robin across three replicas: lists, calls with progress, sampling and
// elicitation whose answers land on other replicas, a GET stream that receives
// list_changed, then kill -9 of a replica that does not hold the session (the session
// goes on, the GET stream comes back), and DELETE, after which the session is gone on
// every replica.
func TestClusterLegacySession(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, everythingUpstreamEra("ev", "ev", "legacy")+testUpstream("t", "t", nil, ""), "")
	var progress, sampled, elicited, changed atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-cluster", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			sampled.Add(1)
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled across replicas"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicited.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com", "name": "Ada", "age": 36}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) },
	})
	rt := &servedBy{}
	cs, err := client.Connect(ctxT(t, 90*time.Second), &mcp.StreamableClientTransport{Endpoint: topo.URL(),
		HTTPClient: &http.Client{Transport: rt}, MaxRetries: 10}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting through HAProxy: %v", err)
	}
	sid := cs.ID()
	owner := ownerOf(t, topo, sid)
	ctx := ctxT(t, 120*time.Second)

	names := toolNames(t, cs)
	if !slices.Contains(names, "ev__test_sampling") || !slices.Contains(names, "t__echo") {
		t.Fatalf("tools: %v", names)
	}
	for i := range 4 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"n": i}})
		if err != nil || res.IsError {
			t.Fatalf("echo %d: %v %q", i, err, textOf(res))
		}
	}
	p := &mcp.CallToolParams{Name: "ev__test_tool_with_progress"}
	p.SetProgressToken("cluster-progress")
	if _, err := cs.CallTool(ctx, p); err != nil {
		t.Fatalf("progress tool: %v", err)
	}
	waitUntil(t, "progress notifications", func() bool { return progress.Load() > 0 })
	// The sampling and elicitation answers are POSTs of their own: round-robin sends them
	// to whichever replica, and they must reach the owner, where the call waits.
	for range 3 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_sampling", Arguments: map[string]any{"prompt": "hi"}})
		if err != nil || res.IsError || !strings.Contains(textOf(res), "sampled across replicas") {
			t.Fatalf("sampling: %v %q", err, textOf(res))
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_elicitation", Arguments: map[string]any{"message": "who?"}})
		if err != nil || res.IsError {
			t.Fatalf("elicitation: %v %q", err, textOf(res))
		}
	}
	if sampled.Load() != 3 || elicited.Load() != 3 {
		t.Errorf("handlers called: sampling %d, elicitation %d; want 3 each", sampled.Load(), elicited.Load())
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_trigger_tool_change"}); err != nil {
		t.Fatalf("trigger tool change: %v", err)
	}
	waitUntil(t, "tools/list_changed on the GET stream", func() bool { return changed.Load() >= 1 })
	if posts := rt.replicas(http.MethodPost); len(posts) != 3 {
		t.Errorf("the session's POSTs were served by %v, want all three replicas", posts)
	}

	// kill -9 of a replica that does not hold the session.
	var victim *topology.Replica
	for _, r := range topo.Replicas {
		if r != owner {
			victim = r
			break
		}
	}
	victim.Kill()
	for i := range 6 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"after-kill": i}})
		if err != nil || res.IsError {
			t.Fatalf("echo %d after kill -9 of %s: %v %q", i, victim.Name, err, textOf(res))
		}
	}
	before := changed.Load()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_trigger_tool_change"}); err != nil {
		t.Fatalf("trigger tool change after the kill: %v", err)
	}
	waitUntil(t, "tools/list_changed after the kill", func() bool { return changed.Load() > before })

	// DELETE (forwarded to the owner wherever it lands): the session is gone everywhere.
	if err := cs.Close(); err != nil {
		t.Errorf("closing the session: %v", err)
	}
	for range 3 {
		if status := rawPing(t, topo.URL(), sid); status != http.StatusNotFound {
			t.Errorf("after DELETE: HTTP %d, want 404 from every replica", status)
		}
	}
}

// rawPing posts a ping in session sid and returns the HTTP status.
func rawPing(t *testing.T, url, sid string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestClusterOwnerKilled: kill -9 of the replica that holds a session. A call in flight
// that another replica was forwarding gets the proxy's error event; the next request of
// the session answers 404 (start a new session), and a new session works.
func TestClusterOwnerKilled(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, testUpstream("t", "t", nil, ""), "")
	c := &httpWire{t: t, url: topo.URL()}
	ctx := ctxT(t, 90*time.Second)
	init := c.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"owner-killed","version":"1"}}}`, nil)
	c.sid = init.header.Get("Mcp-Session-Id")
	if init.status != http.StatusOK || c.sid == "" {
		t.Fatalf("initialize: %d %s", init.status, init.body)
	}
	c.post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	owner := ownerOf(t, topo, c.sid)
	var other *topology.Replica
	for _, r := range topo.Replicas {
		if r != owner {
			other = r
			break
		}
	}
	// A slow call sent straight to a replica that does not hold the session, which
	// forwards it; its first progress notification says it runs on the owner.
	direct := &httpWire{t: t, url: "http://" + other.Addr + "/mcp", sid: c.sid}
	resp := direct.do(ctx, http.MethodPost, `{"jsonrpc":"2.0","id":"slow-1","method":"tools/call","params":{"name":"t__slow","arguments":{"ms":6000},"_meta":{"progressToken":"p1"}}}`, nil)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("slow call: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for l := range lines {
		if strings.Contains(l, "notifications/progress") {
			break
		}
	}
	owner.Kill()
	var got string
	for l := range lines {
		if strings.HasPrefix(l, "data: ") && strings.Contains(l, `"slow-1"`) {
			got = l
		}
	}
	if !strings.Contains(got, `"code":-32603`) || !strings.Contains(got, "mcp-proxy: the proxy replica that held this session stopped while the call was in flight") ||
		!strings.Contains(got, `"origin":"mcp-proxy"`) {
		t.Errorf("the in-flight call's answer: %q, want the proxy's error", got)
	}
	// Any replica now answers the session 404: the client must start a new one.
	for range 3 {
		if status := rawPing(t, topo.URL(), c.sid); status != http.StatusNotFound {
			t.Errorf("a request of the dead owner's session: HTTP %d, want 404", status)
		}
	}
	c2 := &httpWire{t: t, url: topo.URL()}
	init = c2.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"owner-killed","version":"1"}}}`, nil)
	if init.status != http.StatusOK || init.header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("a new session after the owner died: %d %s", init.status, init.body)
	}
}

// TestClusterTypeScriptClient: the TypeScript SDK client's legacy session through HAProxy
// round-robin across three replicas (list, calls, progress, sampling and elicitation
// answered through whichever replica, read, get), as TestTypeScriptClient checks it
// against one proxy.
func TestClusterTypeScriptClient(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, everythingUpstreamEra("everything", "ev", "legacy")+npmUpstream("npm", "npm"), "")
	runTSClient(t, "--http", topo.URL())
}

// TestClusterResumption: a call's answer stream, read through one replica that does not
// hold the session until the connection breaks, is resumed with Last-Event-ID through
// another replica: the rest of the stream, ending with the response, without the events
// the client had.
func TestClusterResumption(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, testUpstream("t", "t", nil, ""), "")
	c := &httpWire{t: t, url: topo.URL()}
	ctx := ctxT(t, 90*time.Second)
	init := c.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"resume","version":"1"}}}`, nil)
	c.sid = init.header.Get("Mcp-Session-Id")
	if init.status != http.StatusOK || c.sid == "" {
		t.Fatalf("initialize: %d %s", init.status, init.body)
	}
	c.post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	owner := ownerOf(t, topo, c.sid)
	var others []*topology.Replica
	for _, r := range topo.Replicas {
		if r != owner {
			others = append(others, r)
		}
	}
	via := func(r *topology.Replica) *httpWire {
		return &httpWire{t: t, url: "http://" + r.Addr + "/mcp", sid: c.sid}
	}

	pctx, cancel := context.WithCancel(ctx)
	resp := via(others[0]).do(pctx, http.MethodPost, `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"t__slow","arguments":{"ms":1500},"_meta":{"progressToken":"pt"}}}`, nil)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("slow call with progress answered as %q", ct)
	}
	var lastID string
	first := readWireEvents(resp.Body, func(e wireEvent) bool {
		lastID = e.id
		return strings.Contains(e.data, "notifications/progress")
	})
	cancel()
	resp.Body.Close()
	if len(first) < 2 || lastID == "" {
		t.Fatalf("the first part of the stream: %+v", first)
	}

	get := via(others[1]).do(ctx, http.MethodGet, "", map[string]string{"Accept": "text/event-stream", "Last-Event-ID": lastID})
	defer get.Body.Close()
	if get.StatusCode != http.StatusOK {
		t.Fatalf("resuming GET through %s: %d", others[1].Name, get.StatusCode)
	}
	rest := readWireEvents(get.Body, func(e wireEvent) bool { return strings.Contains(e.data, `"id":"slow"`) })
	if len(rest) == 0 || !strings.Contains(rest[len(rest)-1].data, `slept 1500ms`) {
		t.Fatalf("resumed stream: %+v", rest)
	}
	for _, e := range rest {
		if e.id <= lastID && len(e.id) == len(lastID) {
			t.Errorf("event %q replayed although the client had it (last %q)", e.id, lastID)
		}
	}
}
