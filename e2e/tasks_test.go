package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestTasks runs an experimental (2025-11-25) task on npm's server-everything through the
// proxy: the task-augmented call, then tasks/get, tasks/result and tasks/list routed by
// the task id alone, and an unknown task id refused.
func TestTasks(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, testUpstream("t", "t", nil, "")+npmUpstream("npm", "npm"))
	rc := startRaw(t, cfg)
	init := rc.initialize()
	if !strings.Contains(string(init["result"]), `"tasks"`) {
		t.Errorf("the proxy does not offer the upstream's tasks capability: %s", init["result"])
	}
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"npm__simulate-research-query","arguments":{"topic":"proxies"},"task":{"ttl":60000}}}`)
	m := rc.response("1")
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"task"`
	}
	if err := json.Unmarshal(m["result"], &created); err != nil || created.Task.TaskID == "" {
		t.Fatalf("task-augmented call: %v %s %s", err, m["result"], m["error"])
	}
	id := created.Task.TaskID
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; ; n++ {
		rc.send(`{"jsonrpc":"2.0","id":"g` + string(rune('a'+n%26)) + `","method":"tasks/get","params":{"taskId":"` + id + `"}}`)
		g := rc.response(`"g` + string(rune('a'+n%26)) + `"`)
		var st struct{ Status string }
		if err := json.Unmarshal(g["result"], &st); err != nil {
			t.Fatalf("tasks/get: %s", g["error"])
		}
		if st.Status == "completed" {
			break
		}
		if st.Status == "failed" || st.Status == "cancelled" || time.Now().After(deadline) {
			t.Fatalf("task ended as %q", st.Status)
		}
		time.Sleep(250 * time.Millisecond)
	}
	rc.send(`{"jsonrpc":"2.0","id":"r","method":"tasks/result","params":{"taskId":"` + id + `"}}`)
	if r := rc.response(`"r"`); !strings.Contains(string(r["result"]), "proxies") {
		t.Errorf("tasks/result: %s %s", r["result"], r["error"])
	}
	rc.send(`{"jsonrpc":"2.0","id":"l","method":"tasks/list"}`)
	if l := rc.response(`"l"`); !strings.Contains(string(l["result"]), id) {
		t.Errorf("tasks/list does not hold the task: %s %s", l["result"], l["error"])
	}
	rc.send(`{"jsonrpc":"2.0","id":"u","method":"tasks/get","params":{"taskId":"no-such-task"}}`)
	if u := rc.response(`"u"`); errorCode(t, u) != -32602 {
		t.Errorf("unknown task: %v", u)
	}
}
