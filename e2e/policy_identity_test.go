package e2e

import (
	"bufio"
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

	mcpconst "github.com/mcp-proxy/mcp-proxy/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/authserver"
)

// TestPolicyIdentity: an API key named "alice" and a token whose subject is "alice"
// are two people to the policy too. A rule about "api_key:alice" hides and refuses a
// tool to the key and not to the token, whose rule ("jwt:alice", the jwt block's
// issuer) allows it; a per-principal rate limit gives each her own bucket; the audit
// records carry each one's identity next to the shared name. `validate` warns that the
// bare name "alice" in such a configuration means both, at its line.
func TestPolicyIdentity(t *testing.T) {
	t.Parallel()
	as := startAuthServer(t, authserver.Options{})
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	addr := freeAddr(t)
	resource := "http://" + addr + "/mcp"
	const key = "alice-key-0123456789"
	head := fmt.Sprintf(`listen "http" {
  address = %q
}
auth {
  resource = %q
  api_key "alice" {
    token = %q
  }
  jwt {
    issuer   = %q
    jwks_url = %q
  }
}
audit {
  file = %q
}
`, addr, resource, key, as.URL, as.URL+"/jwks", auditPath) + testUpstream("t", "t", nil, "")
	cfg := writeConfig(t, head+`policy {
  default = "allow"
  rule "keys-no-env" {
    effect     = "deny"
    tools      = ["t__env"]
    principals = ["api_key:alice"]
  }
  rule "token-alice-env" {
    effect     = "allow"
    tools      = ["t__env"]
    principals = ["jwt:alice"]
  }
  rate_limit "each-person" {
    rate  = "1/h"
    burst = 2
    per   = ["principal"]
    tools = ["t__echo"]
  }
}
`)
	stderr, _ := startProxy(t, cfg, false, addr)
	byKey := connectAs(t, resource, key, nil, stderr)
	byJWT := connectAs(t, resource, as.IssueFront("alice", resource, 10*time.Minute), nil, stderr)
	ctx := ctxT(t, 60*time.Second)

	if names := toolNames(t, byKey); slices.Contains(names, "t__env") || !slices.Contains(names, "t__echo") {
		t.Errorf("the API key alice's tools: %v (want t__echo, not t__env)", names)
	}
	if names := toolNames(t, byJWT); !slices.Contains(names, "t__env") {
		t.Errorf("the token alice's tools: %v (want t__env)", names)
	}
	env := &mcp.CallToolParams{Name: "t__env", Arguments: map[string]any{"name": "HOME"}}
	if _, err := byKey.CallTool(ctx, env); err == nil {
		t.Error("the API key alice called t__env")
	} else if code := callErrCode(err); code != mcpconst.CodePolicyDenied && !strings.Contains(err.Error(), "Unknown tool") && !strings.Contains(err.Error(), "not found") {
		t.Errorf("the API key alice's t__env: %v (code %d)", err, code)
	}
	if res, err := byJWT.CallTool(ctx, env); err != nil || res.IsError {
		t.Errorf("the token alice's t__env: %v %q\n%s", err, textOf(res), stderr)
	}

	echo := func(cs *mcp.ClientSession) int64 {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"x": 1}})
		return callErrCode(err)
	}
	for i, c := range []struct {
		who  string
		cs   *mcp.ClientSession
		want int64
	}{
		{"key", byKey, 0}, {"key", byKey, 0}, {"key", byKey, mcpconst.CodeRateLimited},
		{"token", byJWT, 0}, {"token", byJWT, 0}, {"token", byJWT, mcpconst.CodeRateLimited},
	} {
		if got := echo(c.cs); got != c.want {
			t.Errorf("echo %d by the %s alice: code %d, want %d", i, c.who, got, c.want)
		}
	}

	// The audit trail: the same name, two identities, each with her own decisions.
	jwtAlice := "jwt:" + as.URL + "#alice"
	want := []string{
		"api_key:alice t__echo allow", "api_key:alice t__echo allow", "api_key:alice t__echo rate_limited",
		"api_key:alice t__env deny",
		jwtAlice + " t__echo allow", jwtAlice + " t__echo allow", jwtAlice + " t__echo rate_limited",
		jwtAlice + " t__env allow",
	}
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = got[:0]
		f, err := os.Open(auditPath)
		if err == nil {
			for sc := bufio.NewScanner(f); sc.Scan(); {
				var r struct {
					Principal, Identity, Name, Decision string
				}
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("audit line %s: %v", sc.Bytes(), err)
				}
				if r.Principal != "alice" {
					t.Errorf("audit principal %q, want alice", r.Principal)
				}
				got = append(got, r.Identity+" "+r.Name+" "+r.Decision)
			}
			f.Close()
		}
		slices.Sort(got)
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("audit records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The same policy by bare name: valid, with a warning at the line that says it.
	bare := writeConfig(t, head+`policy {
  default = "allow"
  rule "alice-no-env" {
    effect     = "deny"
    tools      = ["t__env"]
    principals = ["alice"]
  }
}
`)
	out, err := exec.Command(proxyBin, "validate", "--config", bare).CombinedOutput()
	line := strings.Count(head, "\n") + 6 // the principals line
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("proxy.hcl:%d:", line)) ||
		!strings.Contains(string(out), `Ambiguous principal`) || !strings.Contains(string(out), `Write "api_key:alice" or "jwt:alice"`) {
		t.Errorf("validate of a bare, ambiguous name: %v\n%s", err, out)
	}
}
