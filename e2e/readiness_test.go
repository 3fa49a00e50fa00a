package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestInitializeDoesNotWaitForSlowUpstream: a proxy with a fast upstream and one that
// answers initialize only when the test lets it (-init-gate, so nothing here depends on
// timing) answers the client's initialize after the ready grace, with every list kind
// offered with listChanged, and lists the fast upstream's tools (at once, or after the
// list_changed announcing them on a loaded machine) and not the slow one's; a call to a tool
// of the slow upstream waits for it instead of failing as unknown; once the slow
// upstream is let through, the client is sent tools/list_changed, the waiting call is
// answered by the slow upstream, and the list has both upstreams' tools.
func TestInitializeDoesNotWaitForSlowUpstream(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "slow-may-answer")
	cfg := writeConfig(t, "proxy {\n  ready_grace = \"300ms\"\n}\n"+
		testUpstream("fast", "fast", []string{"-name", "fast"}, "")+
		testUpstream("slow", "slow", []string{"-name", "slow", "-init-gate", gate}, `startup_timeout = "60s"`))
	rc := startRaw(t, cfg)

	// The slow upstream cannot have answered its initialize: its gate does not exist.
	init := rc.initialize()
	var res struct {
		Capabilities map[string]struct {
			ListChanged bool `json:"listChanged"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(init["result"], &res); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"tools", "prompts", "resources"} {
		if !res.Capabilities[kind].ListChanged {
			t.Errorf("initialize: capabilities.%s.listChanged is not true while an upstream starts: %s", kind, init["result"])
		}
	}
	if _, err := os.Stat(gate); err == nil {
		t.Fatal("the gate exists before the test made it")
	}

	// The fast upstream is listed once it is ready: within the grace as a rule, else
	// (a loaded machine) after the list_changed that announces it.
	first := listToolNames(t, rc, "1")
	for id := 10; !contains(first, "fast__echo"); id++ {
		if hasPrefix(first, "slow__") {
			break
		}
		rc.awaitNotification("notifications/tools/list_changed")
		first = listToolNames(t, rc, strconv.Itoa(id))
	}
	if !contains(first, "fast__echo") || hasPrefix(first, "slow__") {
		t.Fatalf("tools/list = %v; want the fast upstream's tools only", first)
	}

	// A call to the slow upstream's tool waits; a ping sent after it is answered first.
	rc.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow__echo","arguments":{"text":"late"}}}`)
	rc.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	for seen := false; !seen; {
		m := rc.message()
		switch string(m["id"]) {
		case "2":
			t.Fatalf("the call to a tool of the upstream still starting was answered before it started: %s", rc.raw(m))
		case "3":
			seen = true
		}
	}

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var changed, answered bool
	for !changed || !answered {
		m := rc.message()
		switch {
		case string(m["method"]) == `"notifications/tools/list_changed"`:
			changed = true
		case string(m["id"]) == "2":
			answered = true
			if _, ok := m["result"]; !ok || !strings.Contains(string(m["result"]), "late") {
				t.Fatalf("the waiting call: %s", rc.raw(m))
			}
		}
	}
	after := listToolNames(t, rc, "4")
	if !contains(after, "fast__echo") || !contains(after, "slow__echo") {
		t.Fatalf("tools/list after list_changed = %v; want both upstreams' tools", after)
	}
	if !strings.Contains(rc.stderr.String(), "still starting") {
		t.Errorf("the proxy did not log that it answered while an upstream was starting:\n%s", rc.stderr)
	}
}

// TestCallUnknownToolWhileStarting: a tool no upstream lists is still refused as
// unknown (-32602) once the upstreams still starting have started, not before, and not
// as a hang.
func TestCallUnknownToolWhileStarting(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "slow-may-answer")
	cfg := writeConfig(t, "proxy {\n  ready_grace = \"0s\"\n}\n"+
		testUpstream("fast", "fast", []string{"-name", "fast"}, "")+
		testUpstream("slow", "slow", []string{"-name", "slow", "-init-gate", gate}, `startup_timeout = "60s"`))
	rc := startRaw(t, cfg)
	rc.initialize()
	rc.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nobody__echo","arguments":{}}}`)
	rc.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	for seen := false; !seen; {
		m := rc.message()
		switch string(m["id"]) {
		case "2":
			t.Fatalf("the call was answered while an upstream was still starting: %s", rc.raw(m))
		case "3":
			seen = true
		}
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for {
		m := rc.message()
		if string(m["id"]) == "2" {
			if code := errorCode(t, m); code != -32602 {
				t.Fatalf("unknown tool: error code %d, want -32602: %s", code, rc.raw(m))
			}
			return
		}
	}
}

// awaitNotification reads messages until a notification with the method arrives,
// failing on a response (none is expected meanwhile).
func (rc *rawClient) awaitNotification(method string) {
	rc.t.Helper()
	for {
		m := rc.message()
		if string(m["method"]) == strconv.Quote(method) {
			return
		}
		if _, isNote := m["method"]; !isNote {
			rc.t.Fatalf("waiting for %s, got %s", method, rc.raw(m))
		}
	}
}

// message returns the next message from the proxy, decoded one level.
func (rc *rawClient) message() map[string]json.RawMessage {
	rc.t.Helper()
	line := rc.next(60 * time.Second)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		rc.t.Fatalf("proxy wrote a line that is not JSON: %q", line)
	}
	return m
}

// raw re-encodes a decoded message for an error message.
func (rc *rawClient) raw(m map[string]json.RawMessage) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// listToolNames sends tools/list with the raw id and returns the names listed (one page),
// skipping the notifications that come before the answer.
func listToolNames(t *testing.T, rc *rawClient, id string) []string {
	t.Helper()
	rc.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`)
	for {
		m := rc.message()
		if _, isNote := m["method"]; isNote {
			continue
		}
		if string(m["id"]) != id {
			t.Fatalf("expected the answer to %s, got %s", id, rc.raw(m))
		}
		var res struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(m["result"], &res); err != nil {
			t.Fatalf("tools/list: %s", rc.raw(m))
		}
		names := make([]string, len(res.Tools))
		for i, x := range res.Tools {
			names[i] = x.Name
		}
		return names
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func hasPrefix(xs []string, p string) bool {
	for _, x := range xs {
		if strings.HasPrefix(x, p) {
			return true
		}
	}
	return false
}
