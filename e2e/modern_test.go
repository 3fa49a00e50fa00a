package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestModernClient drives the proxy with the Go SDK client in the 2026-07-28 (stateless)
// era against legacy upstreams: discovery, calls, a subscription that relays list
// changes, progress, and sampling and elicitation bridged from the upstreams' requests
// into input-required results and back.
func TestModernClient(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `proxy { name = "modern-proxy" }
`+everythingUpstreamEra("everything", "ev", "legacy")+npmUpstream("npm", "npm"))
	var changed, progress, sampled, elicited atomic.Int32
	cs, stderr := connectSDK(t, cfg, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) },
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if r.Params.ProgressToken == "modern-token" {
				progress.Add(1)
			}
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			sampled.Add(1)
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "bridged sample"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicited.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com", "name": "Ada", "age": 36}}, nil
		},
	}, "") // the SDK's default: probe server/discover first
	ctx := ctxT(t, 90*time.Second)

	if v := cs.InitializeResult().ProtocolVersion; v != "" && v != "2026-07-28" {
		t.Logf("negotiated %q", v)
	}
	if !strings.Contains(stderr.String(), "") {
		t.Fatal()
	}
	names := toolNames(t, cs)
	if !slices.Contains(names, "ev__test_simple_text") || !slices.Contains(names, "npm__echo") {
		t.Fatalf("modern tools/list: %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "npm__echo", Arguments: map[string]any{"message": "modern"}})
	if err != nil || textOf(res) != "Echo: modern" {
		t.Errorf("modern call: %v %q", err, textOf(res))
	}
	p := &mcp.CallToolParams{Name: "ev__test_tool_with_progress"}
	p.SetProgressToken("modern-token")
	if _, err := cs.CallTool(ctx, p); err != nil || progress.Load() == 0 {
		t.Errorf("modern progress: %v (%d notifications)", err, progress.Load())
	}
	if rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static-text"}); err != nil || len(rr.Contents) == 0 {
		t.Errorf("modern read: %v", err)
	}

	// Sampling and elicitation from a legacy upstream reach the modern client as
	// input-required results, and the SDK's retry completes the call.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_sampling", Arguments: map[string]any{"prompt": "hi"}})
	if err != nil || !strings.Contains(textOf(res), "bridged sample") || sampled.Load() == 0 {
		t.Errorf("bridged sampling: %v %q (handler calls %d)", err, textOf(res), sampled.Load())
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_elicitation", Arguments: map[string]any{"message": "who?"}})
	if err != nil || res.IsError || elicited.Load() == 0 {
		t.Errorf("bridged elicitation: %v %q (handler calls %d)", err, textOf(res), elicited.Load())
	}

	// A list change reaches the subscription the SDK opened.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_trigger_tool_change"}); err != nil {
		t.Fatalf("trigger: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for changed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no tools/list_changed on the subscription\n%s", stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestModernRaw checks the modern front end byte by byte: discovery, version and _meta
// errors, legacy-only methods, resultType and caching hints, and refused batches.
func TestModernRaw(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, testUpstream("t", "t", []string{"-instructions", "Be kind."}, ""))
	rc := startRaw(t, cfg)
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`

	rc.send(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`)
	var d struct {
		ResultType        string                     `json:"resultType"`
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      json.RawMessage            `json:"capabilities"`
		Instructions      string                     `json:"instructions"`
		CacheScope        string                     `json:"cacheScope"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(rc.response("1")["result"], &d); err != nil {
		t.Fatal(err)
	}
	if d.ResultType != "complete" || d.SupportedVersions[0] != "2026-07-28" || !slices.Contains(d.SupportedVersions, "2024-11-05") ||
		!strings.Contains(d.Instructions, "Be kind.") || d.CacheScope == "" || d.Meta["io.modelcontextprotocol/serverInfo"] == nil {
		t.Errorf("discover: %+v", d)
	}

	cases := []struct {
		req  string
		code int64
	}{
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, -32022},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, -32602},
		{`{"jsonrpc":"2.0","id":4,"method":"ping","params":{` + meta + `}}`, -32601},
		{`{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"debug",` + meta + `}}`, -32601},
		{`{"jsonrpc":"2.0","id":6,"method":"resources/subscribe","params":{"uri":"mis://item/1",` + meta + `}}`, -32601},
		{`{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"nobody://x",` + meta + `}}`, -32602},
	}
	for _, c := range cases {
		var probe struct{ ID json.RawMessage }
		json.Unmarshal([]byte(c.req), &probe)
		rc.send(c.req)
		m := rc.response(string(probe.ID))
		if got := errorCode(t, m); got != c.code {
			t.Errorf("%s: %d, want %d (%s)", c.req, got, c.code, m["error"])
		}
		if c.code == -32022 && !strings.Contains(string(m["error"]), `"supported":["2026-07-28"`) {
			t.Errorf("-32022 without the supported list: %s", m["error"])
		}
	}

	rc.send(`{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{` + meta + `}}`)
	var l struct {
		ResultType string `json:"resultType"`
		TTLMs      *int   `json:"ttlMs"`
		CacheScope string `json:"cacheScope"`
		Tools      []any  `json:"tools"`
	}
	json.Unmarshal(rc.response("8")["result"], &l)
	if l.ResultType != "complete" || l.TTLMs == nil || l.CacheScope == "" || len(l.Tools) == 0 {
		t.Errorf("modern tools/list result: %+v", l)
	}
	rc.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"t__echo","arguments":{"a":1},` + meta + `}}`)
	if r := rc.response("9"); !strings.Contains(string(r["result"]), `"resultType":"complete"`) {
		t.Errorf("modern call result: %s", r["result"])
	}
	rc.send(`[{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{` + meta + `}}]`)
	line := rc.next(10 * time.Second)
	if !strings.Contains(string(line), "-32600") {
		t.Errorf("modern batch not refused: %s", line)
	}
}

// TestModernListenRaw opens a subscriptions/listen byte by byte: the acknowledgement comes
// first with the honoured subset, notifications carry the listen id as subscriptionId,
// and kinds not asked for are not delivered; cancelling the listen ends it.
func TestModernListenRaw(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, everythingUpstream("everything", "ev"))
	rc := startRaw(t, cfg)
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	rc.send(`{"jsonrpc":"2.0","id":"sub-1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + meta + `}}`)
	ack := rc.next(30 * time.Second)
	if !strings.Contains(string(ack), `"method":"notifications/subscriptions/acknowledged"`) ||
		!strings.Contains(string(ack), `"io.modelcontextprotocol/subscriptionId":"sub-1"`) ||
		!strings.Contains(string(ack), `"toolsListChanged":true`) || strings.Contains(string(ack), "prompts") {
		t.Fatalf("first message of the subscription: %s", ack)
	}
	rc.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ev__test_trigger_prompt_change",` + meta + `}}`)
	rc.response("2")
	rc.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ev__test_trigger_tool_change",` + meta + `}}`)
	rc.response("3")
	var sawTools bool
	timeout := time.After(10 * time.Second)
	for !sawTools {
		select {
		case l := <-rc.lines:
			s := string(l)
			if strings.Contains(s, "prompts/list_changed") {
				t.Errorf("a kind the subscription did not ask for was delivered: %s", s)
			}
			if strings.Contains(s, "notifications/tools/list_changed") {
				sawTools = true
				if !strings.Contains(s, `"io.modelcontextprotocol/subscriptionId":"sub-1"`) {
					t.Errorf("notification not tagged with the subscription: %s", s)
				}
			}
		case <-timeout:
			t.Fatalf("no tools/list_changed on the subscription")
		}
	}
	rc.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"sub-1"}}`)
	rc.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ev__test_trigger_tool_change",` + meta + `}}`)
	rc.response("4")
	select {
	case l := <-rc.lines:
		t.Errorf("message after the subscription was cancelled: %s", l)
	case <-time.After(time.Second):
	}
}

// TestModernFirstRequestAndHints sends a modern tools/list as the very first message
// (there is no initialize to wait in): it is answered from the started upstreams, with
// the upstreams' caching hints merged (public only when every upstream says public;
// a legacy upstream makes the list private).
func TestModernFirstRequestAndHints(t *testing.T) {
	t.Parallel()
	const req = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	for _, tc := range []struct {
		name, cfg, scope string
	}{
		{"modern upstream", everythingUpstream("everything", "ev"), "public"},
		{"modern and legacy upstreams", everythingUpstream("everything", "ev") + testUpstream("t", "t", nil, ""), "private"},
	} {
		rc := startRaw(t, writeConfig(t, tc.cfg))
		rc.send(req)
		var l struct {
			Tools      []struct{ Name string }
			CacheScope string `json:"cacheScope"`
			TTLMs      *int   `json:"ttlMs"`
		}
		if err := json.Unmarshal(rc.response("1")["result"], &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Tools) < 10 || l.CacheScope != tc.scope || l.TTLMs == nil {
			t.Errorf("%s: %d tools, cacheScope %q, ttl %v", tc.name, len(l.Tools), l.CacheScope, l.TTLMs)
		}
	}
}
