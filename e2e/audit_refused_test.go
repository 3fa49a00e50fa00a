package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// auditSecret is an argument value of the refused requests: it must reach no record.
const auditSecret = "hunter2-refused"

// auditConfig is a config with an audit file (arguments as their hash, the default) in
// front of the test server; listen, when set, adds the HTTP front end with an API key
// for alice and a 4 KiB body limit.
func auditConfig(t *testing.T, auditPath, listen string) string {
	t.Helper()
	front := `proxy {
  principal = "me"
}
`
	if listen != "" {
		front = fmt.Sprintf(`listen "http" {
  address       = %q
  path          = "/mcp"
  max_body_size = 4096
}
auth {
  resource = "http://%s/mcp"
  api_key "alice" {
    token = %q
  }
}
`, listen, listen, aliceKey)
	}
	return writeConfig(t, front+fmt.Sprintf("policy {\n  default = \"allow\"\n}\naudit {\n  file = %q\n}\n", auditPath)+
		testUpstream("t", "t", nil, ""))
}

// auditRecords waits until the audit file holds a record with the name marker (the
// last call of a test, audited after everything before it) and returns its records.
func auditRecords(t *testing.T, path, marker string) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		var recs []map[string]any
		found := false
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("audit line is not JSON: %q", sc.Text())
			}
			recs = append(recs, m)
			found = found || m["name"] == marker
		}
		if found {
			if strings.Contains(string(b), auditSecret) {
				t.Errorf("a refused request's argument is in the audit file:\n%s", b)
			}
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit record of %s:\n%s", marker, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkRefusals checks that recs hold exactly one "invalid" record per reason in want
// (a substring of its error), each of tools/call by principal, with its arguments'
// hash only when hashed is set for that reason.
func checkRefusals(t *testing.T, recs []map[string]any, principal string, want map[string]bool) {
	t.Helper()
	var invalid []map[string]any
	for _, m := range recs {
		if m["decision"] == "invalid" {
			invalid = append(invalid, m)
		}
	}
	if len(invalid) != len(want) {
		t.Errorf("%d records of refused requests, want %d: %v", len(invalid), len(want), invalid)
	}
	for reason, hashed := range want {
		n := 0
		for _, m := range invalid {
			e, _ := m["error"].(string)
			if !strings.Contains(e, reason) {
				continue
			}
			n++
			if m["outcome"] != "invalid" || m["method"] != "tools/call" || m["kind"] != "tool" || m["principal"] != principal {
				t.Errorf("refusal %q: record %v", reason, m)
			}
			if _, ok := m["args"]; ok {
				t.Errorf("refusal %q: arguments recorded: %v", reason, m)
			}
			if _, ok := m["args_sha256"]; ok != hashed {
				t.Errorf("refusal %q: args_sha256 present %v, want %v: %v", reason, ok, hashed, m)
			}
		}
		if n != 1 {
			t.Errorf("refusal %q: %d records, want 1: %v", reason, n, invalid)
		}
	}
}

// TestAuditRefusedOverStdio: tools/call requests a stdio client sends that are refused
// before routing each leave an "invalid" audit record with the principal and the
// reason, and their arguments only as a hash; refused requests of methods the audit does
// not cover leave none.
func TestAuditRefusedOverStdio(t *testing.T) {
	t.Parallel()
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	rc := startRaw(t, auditConfig(t, auditPath, ""))
	// Before initialize: refused by the session.
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__echo","arguments":{"note":"` + auditSecret + `"}}}`)
	if errorCode(t, rc.response("1")) != -32600 {
		t.Errorf("a call before initialize was not refused")
	}
	rc.initialize()
	for _, tc := range []struct{ id, line string }{
		// Two names: read differently by different parsers.
		{"2", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t__echo","name":"t__slow","arguments":{"note":"` + auditSecret + `"}}}`},
		// One method for the proxy, another for a case-insensitive reader.
		{"3", `{"jsonrpc":"2.0","id":3,"method":"ping","METHOD":"tools/call","params":{"name":"t__echo","arguments":{"note":"` + auditSecret + `"}}}`},
		// Params that name no tool.
		{"4", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"arguments":{"note":"` + auditSecret + `"}}}`},
		// Not audited: a list, refused all the same.
		{"5", `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"cursor":"a","cursor":"b"}}`},
	} {
		rc.send(tc.line)
		if errorCode(t, rc.response(tc.id)) == 0 {
			t.Errorf("request %s was not refused", tc.id)
		}
	}
	rc.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"t__echo","arguments":{}}}`)
	if errorCode(t, rc.response("9")) != 0 {
		t.Fatalf("the marker call failed")
	}
	recs := auditRecords(t, auditPath, "t__echo")
	checkRefusals(t, recs, "me", map[string]bool{
		"before initialize":         true,
		`duplicate member "name"`:   true,
		`duplicate member "METHOD"`: true,
		"tool name is required":     true,
	})
}

// TestAuditRefusedOverHTTP: the same over the HTTP front end, with the principal of the
// request's API key: a body over the size limit, duplicate member names, a modern
// request whose headers disagree with its body, params that name no tool.
func TestAuditRefusedOverHTTP(t *testing.T) {
	t.Parallel()
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	addr := freeAddr(t)
	cfg := auditConfig(t, auditPath, addr)
	cmd := exec.Command(proxyBin, "run", "--config", cfg, "--log-level", "debug")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(interruptSignal())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Errorf("the proxy did not stop\n%s", stderr)
		}
		checkStderr(t, stderr)
	})
	waitListening(t, addr, stderr)
	ctx := ctxT(t, 60*time.Second)
	url := "http://" + addr + "/mcp"
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	modern := func(body string, header map[string]string) wireReply {
		h := bearer(aliceKey)
		h["MCP-Protocol-Version"], h["Mcp-Method"], h["Mcp-Name"] = "2026-07-28", "tools/call", "t__echo"
		for k, v := range header {
			h[k] = v
		}
		return (&httpWire{t: t, url: url}).post(ctx, body, h)
	}
	for _, tc := range []struct {
		name, body string
		header     map[string]string
		status     int
	}{
		{"duplicate", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__echo","arguments":{"note":"` + auditSecret + `","note":"x"},` + meta + `}}`, nil, http.StatusBadRequest},
		{"oversize", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t__echo","arguments":{"note":"` + auditSecret + strings.Repeat("x", 5000) + `"},` + meta + `}}`, nil, http.StatusRequestEntityTooLarge},
		{"header mismatch", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t__echo","arguments":{"note":"` + auditSecret + `"},` + meta + `}}`, map[string]string{"Mcp-Name": "t__slow"}, http.StatusBadRequest},
		{"a list", `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"cursor":"a","cursor":"b",` + meta + `}}`, map[string]string{"Mcp-Method": "tools/list", "Mcp-Name": ""}, http.StatusBadRequest},
	} {
		if r := modern(tc.body, tc.header); r.status != tc.status || !strings.Contains(string(r.body), `"error"`) && r.status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	// A legacy session's refusal: params that name no tool.
	legacy := &httpWire{t: t, url: url}
	legacy.initializeAs(ctx, aliceKey)
	if r := legacy.post(ctx, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":7,"arguments":{"note":"`+auditSecret+`"}}}`, bearer(aliceKey)); !strings.Contains(string(r.body), "name is required") {
		t.Errorf("legacy call without a name: %d %s", r.status, r.body)
	}
	if r := legacy.post(ctx, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"t__echo","arguments":{}}}`, bearer(aliceKey)); !strings.Contains(string(r.body), `"result"`) {
		t.Fatalf("the marker call: %d %s", r.status, r.body)
	}
	recs := auditRecords(t, auditPath, "t__echo")
	checkRefusals(t, recs, "alice", map[string]bool{
		`duplicate member "note"`: true,
		"too large":               false, // its arguments were cut short: nothing to hash
		"Mcp-Name":                true,
		"tool name is required":   true,
	})
}
