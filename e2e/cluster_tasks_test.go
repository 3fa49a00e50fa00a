package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// legacyRequest sends one request of c's session and returns its response (read from
// JSON or from the event stream).
func legacyRequest(ctx context.Context, t *testing.T, c *httpWire, id, method, params string) (result json.RawMessage, errCode int64, errMsg string) {
	t.Helper()
	r := c.post(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":%q,"params":%s}`, id, method, params), nil)
	body := r.body
	if strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		for _, ev := range readWireEvents(bytes.NewReader(r.body), nil) {
			if strings.Contains(ev.data, fmt.Sprintf(`"id":%q`, id)) {
				body = []byte(ev.data)
			}
		}
	}
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &m); err != nil || (m.Result == nil && m.Error == nil) {
		t.Fatalf("%s at %s: HTTP %d: %v: %s", method, c.url, r.status, err, r.body)
	}
	if m.Error != nil {
		return nil, m.Error.Code, m.Error.Message
	}
	return m.Result, 0, ""
}

// createResearchTask makes a task-augmented call of server-everything's research tool in
// session c (held by r0) and returns the task's id.
func createResearchTask(ctx context.Context, t *testing.T, c *httpWire) string {
	t.Helper()
	res, code, msg := legacyRequest(ctx, t, c, "create", "tools/call",
		`{"name":"npm__simulate-research-query","arguments":{"topic":"proxies"},"task":{"ttl":120000}}`)
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if code != 0 || json.Unmarshal(res, &created) != nil || created.Task.TaskID == "" {
		t.Fatalf("task-augmented call on r0: %d %s %s", code, msg, res)
	}
	return created.Task.TaskID
}

// openSession initializes a legacy session straight at replica r (which then holds it)
// and returns a client of it that sends to url.
func openSession(ctx context.Context, t *testing.T, r *topology.Replica, url string) *httpWire {
	t.Helper()
	c := &httpWire{t: t, url: "http://" + r.Addr + "/mcp"}
	init := c.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"cluster-tasks","version":"1"}}}`, nil)
	c.sid = init.header.Get("Mcp-Session-Id")
	if init.status != http.StatusOK || c.sid == "" {
		t.Fatalf("initialize at %s: %d %s", r.Name, init.status, init.body)
	}
	c.post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	c.url = url
	return c
}

// TestClusterTasks: a task created in a session held by r0 (its upstream, a stdio
// server, is r0's own child process) is found, followed and fetched from a session held
// by r1: sent to r1, the task's requests are forwarded to r0 (the task store in Redis
// names it); sent to r2, they take two hops (to r1, which holds the session, then to
// r0); through HAProxy, whichever replica takes them. Once r0 is killed, the task's
// requests get a clear error.
func TestClusterTasks(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, npmUpstream("npm", "npm"), "")
	ctx := ctxT(t, 180*time.Second)
	r0, r1, r2 := topo.Replicas[0], topo.Replicas[1], topo.Replicas[2]
	at := func(r *topology.Replica) string { return "http://" + r.Addr + "/mcp" }

	a := openSession(ctx, t, r0, at(r0))
	id := createResearchTask(ctx, t, a)
	params := fmt.Sprintf(`{"taskId":%q}`, id)

	b := openSession(ctx, t, r1, at(r1))
	deadline := time.Now().Add(60 * time.Second)
	for n := 0; ; n++ {
		url := []string{at(r1), at(r2), topo.URL()}[n%3]
		b.url = url
		res, code, msg := legacyRequest(ctx, t, b, fmt.Sprintf("get-%d", n), "tasks/get", params)
		if code != 0 {
			t.Fatalf("tasks/get from r1's session, sent to %s: %d %s", url, code, msg)
		}
		var st struct{ Status string }
		if err := json.Unmarshal(res, &st); err != nil {
			t.Fatalf("tasks/get: %s", res)
		}
		if st.Status == "completed" && n >= 3 {
			break
		}
		if st.Status == "failed" || st.Status == "cancelled" || time.Now().After(deadline) {
			t.Fatalf("task ended as %q", st.Status)
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, url := range []string{at(r1), at(r2)} {
		b.url = url
		if res, code, msg := legacyRequest(ctx, t, b, "result", "tasks/result", params); code != 0 || !strings.Contains(string(res), "proxies") {
			t.Errorf("tasks/result from r1's session, sent to %s: %d %s %s", url, code, msg, res)
		}
	}
	// Unknown to the store: answered where it lands, as by one proxy.
	b.url = at(r1)
	if _, code, _ := legacyRequest(ctx, t, b, "unknown", "tasks/get", `{"taskId":"no-such-task"}`); code != -32602 {
		t.Errorf("an unknown task: %d, want -32602", code)
	}

	r0.Kill()
	_, code, msg := legacyRequest(ctx, t, b, "after-kill", "tasks/get", params)
	if code == 0 || !strings.Contains(msg, "replica") {
		t.Errorf("tasks/get of a task whose replica was killed: %d %q", code, msg)
	}
}
