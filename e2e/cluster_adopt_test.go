package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// adoptKey is the cluster key of the adoption tests' replicas.
const adoptKey = `key = "adopt-test-key-0123456789abcdef-0123456789"`

// sessionKey is the Redis key of session sid's shared state (cluster.Sessions.Key).
func sessionKey(sid string) string {
	sum := sha256.Sum256([]byte(sid))
	return "mcp-proxy:session:" + hex.EncodeToString(sum[:16])
}

// TestClusterOwnerAdopted: kill -9 of the replica that holds a Go SDK client's session,
// through HAProxy round-robin across three replicas with a cluster key. The call in
// flight on it fails with the proxy's error; the same session goes on through the
// others (one adopts it): lists, calls with progress, sampling and elicitation answered
// through any replica, the subscription made before the kill still delivers updates,
// the log level still applies, the GET stream gets a list_changed; DELETE removes the
// session's state from Redis and the session from every replica.
func TestClusterOwnerAdopted(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, everythingUpstreamEra("ev", "ev", "legacy")+testUpstream("t", "t", nil, ""), adoptKey)
	var progress, sampled, elicited, changed, updates, logs atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-adopt", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			sampled.Add(1)
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled after the kill"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicited.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com", "name": "Ada", "age": 36}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) },
		ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) { updates.Add(1) },
		LoggingMessageHandler:  func(context.Context, *mcp.LoggingMessageRequest) { logs.Add(1) },
	})
	rt := &servedBy{}
	cs, err := client.Connect(ctxT(t, 90*time.Second), &mcp.StreamableClientTransport{Endpoint: topo.URL(),
		HTTPClient: &http.Client{Transport: rt}, MaxRetries: 10}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting through HAProxy: %v", err)
	}
	sid := cs.ID()
	owner := ownerOf(t, topo, sid)
	ctx := ctxT(t, 150*time.Second)
	if got, _ := topo.Redis.Command("EXISTS", sessionKey(sid)); got != ":1" {
		t.Fatalf("the session's state is not in redis: EXISTS = %q", got)
	}

	if names := toolNames(t, cs); !slices.Contains(names, "ev__test_sampling") || !slices.Contains(names, "t__slow") {
		t.Fatalf("tools: %v", names)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"before": 1}}); err != nil || res.IsError {
		t.Fatalf("echo: %v %q", err, textOf(res))
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatalf("setLevel: %v", err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	waitUntil(t, "a resources/updated before the kill", func() bool { return updates.Load() > 0 })

	// A call in flight on the owner when it is killed: wherever it went in (straight to
	// the owner, or through a replica that forwards it), it fails with the proxy's error.
	slowErr := make(chan error, 1)
	slowProgress := progress.Load()
	go func() {
		p := &mcp.CallToolParams{Name: "t__slow", Arguments: map[string]any{"ms": 20000}}
		p.SetProgressToken("in-flight")
		_, err := cs.CallTool(ctx, p)
		slowErr <- err
	}()
	waitUntil(t, "the slow call's first progress", func() bool { return progress.Load() > slowProgress })

	owner.Kill()
	killed := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"after-kill": 0}})
	if err != nil || res.IsError {
		t.Fatalf("the first call after kill -9 of the owner %s: %v %q", owner.Name, err, textOf(res))
	}
	t.Logf("kill -9 of the owner to the session's first answer from another replica: %v", time.Since(killed).Round(time.Millisecond))
	select {
	case err := <-slowErr:
		if err == nil || !strings.Contains(err.Error(), "stopped while the call was in flight") {
			t.Errorf("the call in flight on the killed owner: %v, want the proxy's error", err)
		}
		t.Logf("the call in flight on the killed owner got: %v", err)
	case <-ctx.Done():
		t.Fatal("the call in flight on the killed owner never ended")
	}

	if cs.ID() != sid {
		t.Fatalf("the session id changed: %q → %q", sid, cs.ID())
	}
	if names := toolNames(t, cs); !slices.Contains(names, "ev__test_elicitation") {
		t.Fatalf("tools after the kill: %v", names)
	}
	for i := range 4 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"after-kill": i + 1}})
		if err != nil || res.IsError {
			t.Fatalf("echo %d after the kill: %v %q", i, err, textOf(res))
		}
	}
	before := progress.Load()
	p := &mcp.CallToolParams{Name: "ev__test_tool_with_progress"}
	p.SetProgressToken("after-kill")
	if _, err := cs.CallTool(ctx, p); err != nil {
		t.Fatalf("progress tool after the kill: %v", err)
	}
	waitUntil(t, "progress after the kill", func() bool { return progress.Load() > before })
	for range 2 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_sampling", Arguments: map[string]any{"prompt": "hi"}})
		if err != nil || res.IsError || !strings.Contains(textOf(res), "sampled after the kill") {
			t.Fatalf("sampling after the kill: %v %q", err, textOf(res))
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_elicitation", Arguments: map[string]any{"message": "who?"}})
		if err != nil || res.IsError {
			t.Fatalf("elicitation after the kill: %v %q", err, textOf(res))
		}
	}
	if sampled.Load() != 2 || elicited.Load() != 2 {
		t.Errorf("handlers called: sampling %d, elicitation %d; want 2 each", sampled.Load(), elicited.Load())
	}
	// The log level was re-applied on the adopter's upstream (the Go SDK server sends no
	// log message to a session that never set one).
	logsBefore := logs.Load()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_tool_with_logging"}); err != nil {
		t.Fatalf("logging tool after the kill: %v", err)
	}
	waitUntil(t, "a log message after the kill", func() bool { return logs.Load() > logsBefore })
	// The subscription made before the kill was re-established on the adopter's upstream.
	updatesBefore := updates.Load()
	waitUntil(t, "a resources/updated after the kill", func() bool { return updates.Load() > updatesBefore })
	// The GET stream came back (on the adopter) and carries list_changed.
	changedBefore := changed.Load()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_trigger_tool_change"}); err != nil {
		t.Fatalf("trigger tool change after the kill: %v", err)
	}
	waitUntil(t, "tools/list_changed after the kill", func() bool { return changed.Load() > changedBefore })
	adopters := 0
	for _, r := range topo.Replicas {
		if r == owner {
			continue
		}
		for _, line := range strings.Split(r.Output.String(), "\n") {
			if strings.Contains(line, "adopted a session whose proxy replica is gone") {
				adopters++
				t.Logf("%s: %s", r.Name, line)
			}
		}
	}
	if adopters != 1 {
		t.Errorf("%d replicas adopted the session, want 1", adopters)
	}

	// DELETE: the state leaves Redis, and no replica serves or adopts the session.
	if err := cs.Close(); err != nil {
		t.Errorf("closing the session: %v", err)
	}
	if got, _ := topo.Redis.Command("EXISTS", sessionKey(sid)); got != ":0" {
		t.Errorf("after DELETE the session's state is still in redis: EXISTS = %q", got)
	}
	for range 3 {
		if status := rawPing(t, topo.URL(), sid); status != http.StatusNotFound {
			t.Errorf("after DELETE: HTTP %d, want 404 from every replica", status)
		}
	}
}

// TestClusterAdoptionRefusals: with a cluster key, a forged or tampered session id is
// refused 404 by every replica, and a session whose owner is gone is not adopted for
// another principal's request.
func TestClusterAdoptionRefusals(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, clusterBase(front), adoptKey)
	ctx := ctxT(t, 90*time.Second)
	c := &httpWire{t: t, url: topo.URL()}
	c.initializeAs(ctx, aliceKey)
	owner := ownerOf(t, topo, c.sid)
	tampered := []byte(c.sid)
	tampered[len(tampered)-3] ^= 1
	forged := c.sid[:9] + strings.Repeat("A", len(c.sid)-9)
	owner.Kill()
	for _, sid := range []string{string(tampered), forged} {
		for range 3 {
			if status := pingAs(t, topo.URL(), sid, aliceKey); status != http.StatusNotFound {
				t.Errorf("a %d-byte forged session id: HTTP %d, want 404", len(sid), status)
			}
		}
	}
	// Bob holds the id of Alice's session: no replica adopts it for him.
	for range 3 {
		if status := pingAs(t, topo.URL(), c.sid, bobKey); status != http.StatusNotFound && status != http.StatusForbidden {
			t.Errorf("another principal's request for the session: HTTP %d, want 404 or 403", status)
		}
	}
	// Alice's own request is served: the session goes on.
	if status := pingAs(t, topo.URL(), c.sid, aliceKey); status != http.StatusOK {
		t.Errorf("the session's principal after the owner's death: HTTP %d, want 200", status)
	}
}

// pingAs posts a ping in session sid with API key key and returns the HTTP status.
func pingAs(t *testing.T, url, sid, key string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestClusterTypeScriptAdopted: the TypeScript SDK client's session through HAProxy
// round-robin across three replicas with a cluster key: a call, kill -9 of the replica
// that holds the session while a call is in flight on it (which fails with the proxy's
// error), then calls (one with sampling answered through whichever replica) and a list
// on the same session id. Before the kill, a call (on whichever replica) changes the
// tools and the client's GET stream gets the list_changed; at the end the client's
// DELETE ends the session on every replica. (The TS client's resumption with
// Last-Event-ID is what brings it the in-flight call's error.)
func TestClusterTypeScriptAdopted(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, everythingUpstreamEra("ev", "ev", "legacy")+testUpstream("t", "t", nil, ""), adoptKey)
	cmd := exec.Command("node", filepath.Join("testdata", "ts-adopt.mjs"), topo.URL())
	cmd.Dir = "."
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "session ") {
		cmd.Wait()
		t.Fatalf("TS client: %q\n%s", sc.Text(), stderr.String())
	}
	sid := strings.TrimPrefix(sc.Text(), "session ")
	owner := ownerOf(t, topo, sid)
	owner.Kill()
	io.WriteString(stdin, "go on\n")
	var last string
	for sc.Scan() {
		last = sc.Text()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("TS client after kill -9 of %s: %v\n%s\n%s", owner.Name, err, last, stderr.String())
	}
	var got struct {
		Before, After, Sampling     string
		Inflight                    string
		InflightMs, AfterMs         int
		SessionBefore, SessionAfter string
		Sampled, Tools              int
		ChangedBefore, ChangedAfter bool
		SessionAfterDelete          string
	}
	if err := json.Unmarshal([]byte(last), &got); err != nil {
		t.Fatalf("TS client output %q: %v", last, err)
	}
	if got.SessionBefore != sid || got.SessionAfter != sid {
		t.Errorf("session id %q before, %q after; want %q throughout", got.SessionBefore, got.SessionAfter, sid)
	}
	if got.Before == "" || got.After == "" || got.Tools == 0 {
		t.Errorf("calls: before %q, after %q, %d tools", got.Before, got.After, got.Tools)
	}
	if got.Sampled != 1 || !strings.Contains(got.Sampling, "sampled by the TS client") {
		t.Errorf("sampling after the kill: %d calls, result %q", got.Sampled, got.Sampling)
	}
	if !strings.Contains(got.Inflight, "-32603") || !strings.Contains(got.Inflight, "stopped while the call was in flight") {
		t.Errorf("the call in flight on the killed replica: %q, want the proxy's error", got.Inflight)
	}
	if !got.ChangedBefore {
		t.Error("the TS client's GET stream got no tools/list_changed after a call that changed the tools")
	}
	if got.SessionAfterDelete != "" {
		t.Errorf("the TS client still has session %q after terminateSession", got.SessionAfterDelete)
	}
	for range 3 { // DELETE reached the session's holder: it is gone on every replica
		if status := rawPing(t, topo.URL(), sid); status != http.StatusNotFound {
			t.Errorf("after the TS client's DELETE: HTTP %d, want 404 from every replica", status)
		}
	}
	t.Logf("the TS client's call in flight on the killed replica got, %d ms after the kill: %s; its next call took %d ms; list_changed after the adoption: %v",
		got.InflightMs, got.Inflight, got.AfterMs, got.ChangedAfter)
}

// TestClusterAnswerBeforeKill: a call whose answer has not started (no event yet) when
// the replica it runs on is killed gets HTTP 502 with a JSON-RPC error naming mcp-proxy,
// whether it went straight to that replica (HAProxy's errorfile) or through another
// (the forwarder's error); the next request of the session is served by an adopter. With
// every replica down, HAProxy's 503 is a JSON-RPC error naming mcp-proxy too.
func TestClusterAnswerBeforeKill(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, testUpstream("t", "t", []string{"-stderr-chatter"}, ""), adoptKey)
	ctx := ctxT(t, 90*time.Second)
	c := &httpWire{t: t, url: topo.URL()}
	init := c.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"before-answer","version":"1"}}}`, nil)
	c.sid = init.header.Get("Mcp-Session-Id")
	if init.status != http.StatusOK || c.sid == "" {
		t.Fatalf("initialize: %d %s", init.status, init.body)
	}
	owner := ownerOf(t, topo, c.sid)
	// Three calls in a row through round-robin: one goes straight to the owner, the
	// others through a replica that forwards it.
	done := make(chan *http.Response, 3)
	for i := range 3 {
		go func() {
			done <- c.do(ctx, http.MethodPost, fmt.Sprintf(`{"jsonrpc":"2.0","id":"slow-%d","method":"tools/call","params":{"name":"t__slow","arguments":{"ms":20000}}}`, i),
				map[string]string{"MCP-Protocol-Version": "2025-06-18"})
		}()
		waitUntil(t, "the slow call to reach the owner", func() bool {
			return strings.Count(owner.Output.String(), `received method=\"tools/call\"`) > i
		})
	}
	owner.Kill()
	var direct int
	for range 3 {
		resp := <-done
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), `"code":-32603`) ||
			!strings.Contains(string(body), `"message":"mcp-proxy: `) || !strings.Contains(string(body), `"origin":"mcp-proxy"`) {
			t.Errorf("a call whose replica died before answering: HTTP %d %s", resp.StatusCode, body)
		}
		if strings.Contains(string(body), `"id":null`) {
			direct++ // HAProxy's errorfile: it does not know the request's id
		}
		t.Logf("a call whose replica died before answering: HTTP %d %s", resp.StatusCode, body)
	}
	if direct != 1 {
		t.Errorf("%d of the calls were answered by HAProxy, want the 1 that went straight to the owner", direct)
	}
	if status := rawPing(t, topo.URL(), c.sid); status != http.StatusOK {
		t.Errorf("the session after its replica died: HTTP %d", status)
	}
	for _, r := range topo.Replicas {
		r.Kill()
	}
	waitUntil(t, "HAProxy's 503", func() bool {
		req, _ := http.NewRequest(http.MethodPost, topo.URL(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), `"origin":"mcp-proxy"`)
	})
}

// TestClusterOwnerStopped: a replica stopped gracefully (SIGTERM, as in a rolling
// restart) leaves its sessions' state in Redis: another replica adopts them, and the
// session goes on.
func TestClusterOwnerStopped(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, testUpstream("t", "t", nil, ""), adoptKey)
	ctx := ctxT(t, 90*time.Second)
	c := &httpWire{t: t, url: topo.URL()}
	init := c.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stopped","version":"1"}}}`, nil)
	c.sid = init.header.Get("Mcp-Session-Id")
	if init.status != http.StatusOK || c.sid == "" {
		t.Fatalf("initialize: %d %s", init.status, init.body)
	}
	owner := ownerOf(t, topo, c.sid)
	if err := owner.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if status := rawPing(t, topo.URL(), c.sid); status != http.StatusOK {
			t.Errorf("the session after its replica stopped: HTTP %d, want 200", status)
		}
	}
	r := c.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__echo","arguments":{"after":"stop"}}}`, nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"after"`) {
		t.Errorf("a call after the owner stopped: %d %s", r.status, r.body)
	}
}
