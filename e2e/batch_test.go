package e2e

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestBatchSameOnEveryTransport: one batch, sent over stdio and over Streamable HTTP,
// gets the same answers: requests served, an initialize, a modern request, an invalid
// element and an ambiguous one refused each with its own error, a notification and a
// stray response taken without an answer.
func TestBatchSameOnEveryTransport(t *testing.T) {
	t.Parallel()
	const batch = `[` +
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__echo","arguments":{"x":1}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"ping"},` +
		`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"b","version":"1"}}},` +
		`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}},` +
		`{"jsonrpc":"1.0","id":5,"method":"ping"},` +
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"t__echo","arguments":{"a":1,"A":2}}},` +
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},` +
		`{"jsonrpc":"2.0","id":99,"result":{}}` +
		`]`
	upstream := testUpstream("t", "t", nil, "")

	// stdio
	rc := startRaw(t, writeConfig(t, upstream))
	rc.initialize()
	rc.send(batch)
	var stdio []byte
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		if line := rc.next(time.Until(deadline)); bytes.HasPrefix(line, []byte("[")) {
			stdio = line
			break
		}
	}

	// HTTP
	url, _ := startHTTPProxy(t, upstream)
	c := &httpWire{t: t, url: url}
	ctx := ctxT(t, 60*time.Second)
	init := c.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`, nil)
	c.sid = init.header.Get("Mcp-Session-Id")
	c.post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	r := c.post(ctx, batch, nil)
	httpBody := r.body
	if strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		// One stream: each event holds one response (or the whole array).
		var all []json.RawMessage
		for _, line := range strings.Split(string(r.body), "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok || strings.TrimSpace(data) == "" {
				continue
			}
			var arr []json.RawMessage
			if json.Unmarshal([]byte(data), &arr) == nil {
				all = append(all, arr...)
			} else if strings.Contains(data, `"id"`) && !strings.Contains(data, `"method"`) {
				all = append(all, json.RawMessage(data))
			}
		}
		httpBody, _ = json.Marshal(all)
	}

	want := map[string]int64{"1": 0, "2": 0, "3": -32600, "4": -32600, "5": -32600, "6": -32602}
	for name, body := range map[string][]byte{"stdio": stdio, "http": httpBody} {
		got := answers(t, name, body)
		if len(got) != len(want) {
			t.Errorf("%s: %d answers, want %d: %s", name, len(got), len(want), body)
		}
		for id, code := range want {
			if c, ok := got[id]; !ok || c != code {
				t.Errorf("%s: id %s answered with code %d (present %v), want %d: %s", name, id, c, ok, code, body)
			}
		}
	}
}

// answers maps each response's id to its error code (0 for a result).
func answers(t *testing.T, name string, body []byte) map[string]int64 {
	t.Helper()
	var rs []struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &rs); err != nil {
		t.Fatalf("%s: not a batch answer: %s", name, body)
	}
	out := map[string]int64{}
	for _, r := range rs {
		id := strings.Trim(string(r.ID), `"`)
		if r.Error != nil {
			out[id] = r.Error.Code
		} else {
			out[id] = 0
		}
	}
	return out
}
