package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawCall sends one request with the given id and returns its response.
func (rc *rawClient) rawCall(id int, method, params string) map[string]json.RawMessage {
	rc.t.Helper()
	rc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	return rc.response(fmt.Sprint(id))
}

// errorMessage is the message of a response's error ("" when it succeeded).
func errorMessage(t *testing.T, m map[string]json.RawMessage) string {
	t.Helper()
	var e struct {
		Message string `json:"message"`
	}
	if raw, ok := m["error"]; ok {
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("bad error object %s", raw)
		}
	}
	return e.Message
}

// TestUpstreamFilters runs the proxy over two test servers with tools and prompts
// filters and overrides: what is left out is neither listed nor callable by the name it
// would have had (the same answer as a name that never existed); a renamed tool is
// listed under its new name with its new title and description (bytes as configured,
// the rest of the item as the upstream sent it) and reaches the upstream under its own
// name.
func TestUpstreamFilters(t *testing.T) {
	t.Parallel()
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := writeConfig(t, fmt.Sprintf("audit {\n  file = %q\n}\n", auditPath)+testUpstream("t", "t", nil, `
  tools {
    include = ["e*", "f*", "slow"]
    exclude = ["env"]
  }
  tool "echo" {
    name        = "repeat"
    title       = "Repeat"
    description = "Says <it> back & \"again\"."
  }
  tool "fail" {
    description = "Always fails."
  }
  prompt "greet" {
    name = "hello"
  }
  tool "not_listed" {
    title = "Comes later"
  }`)+testUpstream("u", "u", []string{"-name", "other"}, `
  tools {
    include = ["echo"]
  }
  prompts {
    exclude = ["g*"]
  }`))

	t.Run("raw", func(t *testing.T) {
		t.Parallel()
		rc := startRaw(t, cfg)
		rc.initialize()
		m := rc.rawCall(1, "tools/list", `{}`)
		var list struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(m["result"], &list); err != nil {
			t.Fatalf("tools/list: %s", m["error"])
		}
		var names []string
		byName := map[string]string{}
		for _, raw := range list.Tools {
			var tl struct{ Name string }
			json.Unmarshal(raw, &tl)
			names = append(names, tl.Name)
			byName[tl.Name] = string(raw)
		}
		if want := []string{"t__fail", "t__repeat", "t__slow", "u__echo"}; !slices.Equal(names, want) {
			t.Fatalf("listed %q, want %q", names, want)
		}
		// The overrides replace title and description (no HTML escaping); the rest is
		// the test server's own bytes.
		want := `{"name":"t__repeat","description":"Says <it> back & \"again\".","inputSchema":{"type":"object","additionalProperties":true},"title":"Repeat"}`
		if got := byName["t__repeat"]; got != want {
			t.Errorf("renamed tool\n got %s\nwant %s", got, want)
		}
		want = `{"name":"t__fail","description":"Always fails.","inputSchema":{"type":"object","properties":{}}}`
		if got := byName["t__fail"]; got != want {
			t.Errorf("re-described tool\n got %s\nwant %s", got, want)
		}

		// The renamed tool is called by its new name; the test server only knows "echo"
		// (and encodes its answer as it likes).
		m = rc.rawCall(2, "tools/call", `{"name":"t__repeat","arguments":{"said":"<hi>"}}`)
		if !strings.Contains(string(m["result"]), `"structuredContent":{"said":"\u003chi\u003e"}`) &&
			!strings.Contains(string(m["result"]), `"structuredContent":{"said":"<hi>"}`) {
			t.Errorf("t__repeat: %s %s", m["result"], m["error"])
		}
		// The audit names the tool as the client called it and as the upstream knows it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, _ := os.ReadFile(auditPath)
			if strings.Contains(string(b), `"name":"t__repeat","original_name":"echo"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("no audit record of t__repeat with original_name echo:\n%s", b)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Left out, or renamed away: unknown, exactly like a name nobody lists.
		for i, name := range []string{"t__echo", "t__env", "t__big", "u__fail", "t__never_was"} {
			m = rc.rawCall(10+i, "tools/call", `{"name":"`+name+`","arguments":{}}`)
			if code, msg := errorCode(t, m), errorMessage(t, m); code != -32602 || msg != "Unknown tool: "+name {
				t.Errorf("calling %s: %d %q, want -32602 \"Unknown tool: %s\"", name, code, msg, name)
			}
		}

		// Prompts: renamed in t, left out in u.
		m = rc.rawCall(20, "prompts/list", `{}`)
		if got, want := string(m["result"]), `{"prompts":[{"name":"t__hello","description":"Greets someone by name.","arguments":[{"name":"who","description":"Whom to greet.","required":true}]}]}`; got != want {
			t.Errorf("prompts/list\n got %s\nwant %s", got, want)
		}
		m = rc.rawCall(21, "prompts/get", `{"name":"t__hello","arguments":{"who":"Ann"}}`)
		if !strings.Contains(string(m["result"]), "Hello, Ann") {
			t.Errorf("prompts/get t__hello: %s %s", m["result"], m["error"])
		}
		for i, name := range []string{"t__greet", "u__greet"} {
			m = rc.rawCall(22+i, "prompts/get", `{"name":"`+name+`","arguments":{"who":"Ann"}}`)
			if code, msg := errorCode(t, m), errorMessage(t, m); code != -32602 || msg != "Unknown prompt: "+name {
				t.Errorf("prompts/get %s: %d %q", name, code, msg)
			}
		}
		if s := rc.stderr.String(); !strings.Contains(s, `"tool":"not_listed"`) || !strings.Contains(s, "does not list that tool") {
			t.Errorf("no warning for the block of a tool the upstream does not list:\n%s", s)
		}
	})

	t.Run("go-sdk", func(t *testing.T) {
		t.Parallel()
		cs, _ := connectSDK(t, cfg, nil, "")
		ctx := ctxT(t, 60*time.Second)
		var got []string
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, tool.Name)
			if tool.Name == "t__repeat" && (tool.Title != "Repeat" || tool.Description != `Says <it> back & "again".`) {
				t.Errorf("t__repeat as the SDK sees it: %+v", tool)
			}
		}
		if want := []string{"t__fail", "t__repeat", "t__slow", "u__echo"}; !slices.Equal(got, want) {
			t.Fatalf("listed %q, want %q", got, want)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__repeat", Arguments: map[string]any{"n": 7}})
		if err != nil || res.IsError || textOf(res) != `{"n":7}` {
			t.Errorf("t__repeat: %v %s", err, textOf(res))
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo"}); err == nil || !strings.Contains(err.Error(), "Unknown tool: t__echo") {
			t.Errorf("t__echo: %v", err)
		}
	})
}

// TestUpstreamRenameCollisions: a rename onto a name that is taken at run time is
// resolved by the router's rule for every collision — within an upstream the tool the
// upstream itself calls so keeps the name, between upstreams the earlier one in the file
// does — the other is exposed under a hashed name, the proxy says so in its log, and
// both stay callable. What validate can know (two blocks renaming to one name) it
// refuses, with every other problem, each with its position.
func TestUpstreamRenameCollisions(t *testing.T) {
	t.Parallel()
	t.Run("within an upstream", func(t *testing.T) {
		t.Parallel()
		cfg := writeConfig(t, testUpstream("t", "t", nil, `
  tools {
    include = ["echo", "fail"]
  }
  tool "echo" {
    name = "fail"
  }`))
		cs, stderr := connectSDK(t, cfg, nil, "")
		ctx := ctxT(t, 60*time.Second)
		names := toolNames(t, cs)
		if len(names) != 2 || names[0] != "t__fail" || !strings.HasPrefix(names[1], "t__fail_") {
			t.Fatalf("listed %q", names)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__fail"})
		if err != nil || !res.IsError {
			t.Errorf("t__fail must stay the test server's fail: %v %s", err, textOf(res))
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: names[1], Arguments: map[string]any{"k": "v"}})
		if err != nil || res.IsError || textOf(res) != `{"k":"v"}` {
			t.Errorf("%s must be the renamed echo: %v %s", names[1], err, textOf(res))
		}
		if s := stderr.String(); !strings.Contains(s, `"tool":"echo","exposed":"`+names[1]+`"`) ||
			!strings.Contains(s, "collides with another tool of the same upstream") {
			t.Errorf("the collision is not logged:\n%s", s)
		}
	})

	t.Run("between upstreams", func(t *testing.T) {
		t.Parallel()
		cfg := writeConfig(t, everythingUpstream("ev", "")+testUpstream("t", "", nil, `
  tools {
    include = ["echo"]
  }
  tool "echo" {
    name = "test_simple_text"
  }`))
		cs, stderr := connectSDK(t, cfg, nil, "")
		ctx := ctxT(t, 60*time.Second)
		var hashed string
		for _, n := range toolNames(t, cs) {
			if strings.HasPrefix(n, "test_simple_text_") {
				hashed = n
			}
		}
		if hashed == "" {
			t.Fatalf("the renamed echo is not listed under a hashed name: %q", toolNames(t, cs))
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
		if err != nil || res.IsError || strings.HasPrefix(textOf(res), "{") {
			t.Errorf("test_simple_text must stay the everything-server's: %v %s", err, textOf(res))
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: hashed, Arguments: map[string]any{"k": 1}})
		if err != nil || res.IsError || textOf(res) != `{"k":1}` {
			t.Errorf("%s must be the renamed echo: %v %s", hashed, err, textOf(res))
		}
		if s := stderr.String(); !strings.Contains(s, `"conflicts_with_upstream":"ev"`) || !strings.Contains(s, `"renamed_to":"test_simple_text"`) {
			t.Errorf("the collision is not logged:\n%s", s)
		}
	})

	t.Run("validate", func(t *testing.T) {
		t.Parallel()
		cfg := writeConfig(t, testUpstream("t", "t", nil, `
  timeout = "soon"
  tools {
    include = []
    exclude = ["a\\"]
  }
  tool "echo" {
    name = "same"
  }
  tool "fail" {
    name = "same"
  }
  tool "slow" {
    name = "no spaces please"
  }`)+testUpstream("u", "", nil, `
  tool "echo" {
    name = "t__same"
  }`))
		out, err := exec.Command(proxyBin, "validate", "--config", cfg).CombinedOutput()
		if err == nil {
			t.Fatalf("validate accepted it:\n%s", out)
		}
		want := []string{
			cfg + `:5:13: error: Invalid duration`,
			cfg + `:7:15: error: Empty pattern list; include = [] is ambiguous`,
			cfg + `:8:15: error: Invalid pattern; "exclude": pattern "a\\" ends with a lone backslash.`,
			cfg + `:14:12: error: Name collision; tool "fail" is renamed to "same", which tool "echo" is also renamed to, at ` + cfg + `:11:12`,
			cfg + `:17:12: error: Invalid name; "name" must be 1 to 128 characters`,
			cfg + `:25:12: error: Name collision; tool "echo" of upstream "u" is renamed to "t__same", exposed as "t__same", as is tool "echo" of upstream "t"`,
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(want)+1 {
			t.Errorf("validate printed %d lines, want %d:\n%s", len(lines), len(want)+1, out)
		}
		for i, w := range want {
			if i >= len(lines) || !strings.HasPrefix(lines[i], w) {
				t.Errorf("line %d of validate's output:\n%s\nwant it to start with\n%s", i+1, out, w)
				break
			}
		}
	})
}
