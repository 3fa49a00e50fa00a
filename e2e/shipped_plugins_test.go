package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRedactPlugin runs the shipped redact plugin through the proxy: secrets in a tool's
// text and structuredContent (echoed by the test server), an embedded resource's text
// (the everything-server's), and the arguments going upstream are masked; the result's
// _meta says how many of each, never the values.
func TestRedactPlugin(t *testing.T) {
	const email, key = "alice@example.com", "AKIAIOSFODNN7EXAMPLE"
	jwt := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	cfg := writeConfig(t, testUpstream("t", "t", nil, "")+everythingUpstream("ev", "ev")+
		fmt.Sprintf("plugin \"redact\" {\n  command = [%s]\n  upstreams = [\"ev\"]\n  config {\n    custom = { phrase = \"embedded resource\" }\n  }\n}\n", q(redactBin))+
		fmt.Sprintf("plugin \"redact-args\" {\n  command = [%s]\n  tools = [\"t__echo\"]\n  config {\n    patterns = [\"email\", \"aws_access_key\", \"jwt\"]\n    arguments = true\n  }\n}\n", q(redactBin)))
	cs, stderr := connectSDK(t, cfg, nil, "")
	ctx := ctxT(t, 60*time.Second)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{
		"note": "write to " + email, "creds": map[string]any{"aws": key, "token": jwt}, "n": 1}})
	if err != nil {
		t.Fatalf("t__echo: %v\n%s", err, stderr)
	}
	all, _ := json.Marshal(res)
	for _, secret := range []string{email, key, jwt} {
		if strings.Contains(string(all), secret) {
			t.Errorf("the result still holds %q: %s", secret, all)
		}
	}
	sc := structured(t, res)
	if creds, _ := sc["creds"].(map[string]any); creds == nil || !strings.Contains(fmt.Sprint(creds["aws"]), "REDACTED") {
		t.Errorf("structuredContent not masked: %v", sc)
	}
	if !strings.Contains(textOf(res), "[REDACTED:email]") {
		t.Errorf("text %q: want the email masked", textOf(res))
	}
	// The upstream itself received masked arguments (it echoes them), so the masking
	// happened before the call: the after hook of redact-args found nothing left.
	if !strings.Contains(string(all), `"n":1`) {
		t.Errorf("an unmasked argument was lost: %s", all)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_embedded_resource"})
	if err != nil {
		t.Fatal(err)
	}
	emb, _ := json.Marshal(res.Content)
	if strings.Contains(string(emb), "embedded resource") || !strings.Contains(string(emb), "[REDACTED:phrase]") {
		t.Errorf("embedded resource not masked: %s", emb)
	}
	meta, _ := json.Marshal(res.Meta)
	if !strings.Contains(string(meta), `"dev.mcp-proxy/redact":{"masked":{"phrase":1}}`) {
		t.Errorf("_meta %s: want the count of what was masked", meta)
	}
	if !strings.Contains(string(meta), "io.modelcontextprotocol/serverInfo") {
		t.Errorf("_meta %s: the upstream's own _meta was lost", meta)
	}
}

// TestGuardPlugin runs the shipped guard plugin through the proxy: SQL, command and URL
// arguments refused or allowed after parsing.
func TestGuardPlugin(t *testing.T) {
	cfg := writeConfig(t, testUpstream("t", "t", nil, "")+fmt.Sprintf(`plugin "guard" {
  command = [%s]
  tools   = ["t__echo"]
  config {
    sql_arguments     = ["sql"]
    command_arguments = ["cmd"]
    commands          = ["ls", "git"]
    url_arguments     = ["url"]
    hosts             = ["api.github.com", "*.example.com"]
  }
}
`, q(guardBin)))
	cs, stderr := connectSDK(t, cfg, nil, "")
	ctx := ctxT(t, 60*time.Second)
	for _, c := range []struct {
		args map[string]any
		ok   bool
	}{
		{map[string]any{"sql": "SELECT name FROM users WHERE note = '; DROP TABLE users'"}, true},
		{map[string]any{"sql": "SELECT 1; DROP TABLE users"}, false},
		{map[string]any{"sql": "SELECT 1 /* */; DELETE FROM t"}, false},
		{map[string]any{"sql": "WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x"}, false},
		{map[string]any{"cmd": "git log --oneline"}, true},
		{map[string]any{"cmd": "ls; rm -rf /"}, false},
		{map[string]any{"cmd": "curl http://x"}, false},
		{map[string]any{"url": "https://API.GitHub.com./repos"}, true},
		{map[string]any{"url": "https://docs.example.com/a"}, true},
		{map[string]any{"url": "https://api.github.com@evil.com/"}, false},
		{map[string]any{"url": "https://example.com/"}, false},
		{map[string]any{"note": "no guarded argument"}, true},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: c.args})
		switch {
		case c.ok && err != nil:
			t.Errorf("%v: refused: %v", c.args, err)
		case !c.ok && callErrCode(err) != -31007:
			t.Errorf("%v: got %v %v, want -31007 from the guard", c.args, err, res)
		}
	}
	checkStderr(t, stderr)
}
