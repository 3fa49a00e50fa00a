package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/authserver"
)

// TestCredentialsIdentity: an API key named "alice" and a token whose subject is
// "alice" are two principals, whatever the credentials: each gets its own secrets (the
// secrets file is keyed by identity), its own per-principal process (of an upstream in
// mode "secret", and of one with shared credentials and session = "per-principal"), and
// revoking one leaves the other alone. The CLI says when a bare name is ambiguous, and
// takes the qualified form ("jwt:alice" with the jwt block's issuer).
func TestCredentialsIdentity(t *testing.T) {
	t.Parallel()
	as := startAuthServer(t, authserver.Options{})
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.json")
	if err := os.WriteFile(secrets, []byte(`{
  "api_key:alice": {"who": "key-alice-0001"},
  "jwt:alice":     {"who": "jwt-alice-0002"}
}`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, adminAddr := freeAddr(t), freeAddr(t)
	resource := "http://" + addr + "/mcp"
	const aliceKey, opsKey = "alice-key-0123456789", "ops-key-0123456789"
	cfg := writeConfig(t, fmt.Sprintf(`listen "http" {
  address = %q
}
admin {
  address = %q
  groups  = ["ops"]
}
auth {
  resource = %q
  api_key "alice" {
    token = %q
  }
  api_key "ops" {
    token  = %q
    groups = ["ops"]
  }
  jwt {
    issuer   = %q
    jwks_url = %q
  }
}
upstream "t" {
  command = [%s, "-whoami"]
  env     = { WHOAMI = secret("who") }
  credentials {
    mode         = "secret"
    secrets_file = %q
  }
}
upstream "p" {
  command = [%s, "-whoami"]
  session = "per-principal"
}
`, addr, adminAddr, resource, aliceKey, opsKey, as.URL, as.URL+"/jwks", q(testserverBin), secrets, q(testserverBin)))
	stderr, _ := startProxy(t, cfg, false, addr, adminAddr)
	url := "http://" + addr + "/mcp"
	byKey := connectAs(t, url, aliceKey, nil, stderr)
	byJWT := connectAs(t, url, as.IssueFront("alice", resource, 10*time.Minute), nil, stderr)

	pids := map[string]string{}
	for _, tool := range []string{"t__whoami", "p__whoami"} {
		k, err := whoamiOf(t, byKey, tool)
		if err != nil {
			t.Fatalf("the API key alice, %s: %v\n%s", tool, err, stderr)
		}
		j, err := whoamiOf(t, byJWT, tool)
		if err != nil {
			t.Fatalf("the token alice, %s: %v\n%s", tool, err, stderr)
		}
		if k["pid"] == j["pid"] {
			t.Errorf("%s: the API key alice and the token alice share process %s", tool, k["pid"])
		}
		pids[tool+" key"], pids[tool+" jwt"] = k["pid"], j["pid"]
		if tool == "t__whoami" && (k["env"] != "key-alice-0001" || j["env"] != "jwt-alice-0002") {
			t.Errorf("secrets: the API key alice has %q, the token alice %q", k["env"], j["env"])
		}
	}

	cli := func(args ...string) (string, error) {
		cmd := exec.Command(proxyBin, append([]string{"credentials"}, append(args, "--admin", "http://"+adminAddr)...)...)
		cmd.Env = append(os.Environ(), "MCP_PROXY_API_KEY="+opsKey)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	jwtAlice := "jwt:" + as.URL + "#alice"
	if out, err := cli("revoke", "--principal", "alice"); err == nil || !strings.Contains(out, "400 Bad Request") ||
		!strings.Contains(out, `principal "alice" is ambiguous: say which, api_key:alice or `+jwtAlice) {
		t.Errorf("revoke of a bare, ambiguous name: %v %s", err, out)
	}
	if out, err := cli("revoke", "--principal", "jwt:alice", "--upstream", "t"); err != nil || !strings.Contains(out, "principal "+jwtAlice+" had no stored grant; 1 upstream session(s) closed") {
		t.Errorf("revoking the token alice's session of t: %v %s", err, out)
	}
	// The API key alice keeps her process; the token alice gets a new one.
	if k, err := whoamiOf(t, byKey, "t__whoami"); err != nil || k["pid"] != pids["t__whoami key"] {
		t.Errorf("the API key alice after the token alice's revocation: %v %v (had pid %s)", k, err, pids["t__whoami key"])
	}
	if j, err := whoamiOf(t, byJWT, "t__whoami"); err != nil || j["pid"] == pids["t__whoami jwt"] || j["env"] != "jwt-alice-0002" {
		t.Errorf("the token alice after her revocation: %v %v (had pid %s)", j, err, pids["t__whoami jwt"])
	}
	if strings.Contains(stderr.String(), "alice-0001") || strings.Contains(stderr.String(), "alice-0002") {
		t.Error("a secret in the proxy's log")
	}
}

// TestPerPrincipalCapabilities: with a legacy upstream that asks a client only what it
// declared (npm's server-everything offers its sampling tool only to a session whose
// client declared sampling), a principal's client without sampling starts the
// principal's first session; its second client, declaring sampling, gets a session of
// its own initialized with it, whose server asks it; the first is never asked.
func TestPerPrincipalCapabilities(t *testing.T) {
	t.Parallel()
	const key = "alice-key-0123456789"
	url, stderr, _ := startHTTPProxyHCL(t, fmt.Sprintf(`auth {
  api_key "alice" {
    token = %q
  }
}
upstream "ev" {
  command         = ["node", %s, "stdio"]
  namespace       = "ev"
  startup_timeout = "60s"
  session         = "per-principal"
}
`, key, q(npmEverything)))
	var sampled atomic.Int32
	withSampling := &mcp.ClientOptions{CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		sampled.Add(1)
		return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled by the second client"}}, nil
	}}
	ctx := ctxT(t, 120*time.Second)
	// The client with sampling connects first: the catalogue session is started with its
	// capabilities, so the catalogue lists the sampling tool.
	second := connectAs(t, url, key, withSampling, stderr)
	first := connectAs(t, url, key, nil, stderr)
	// The client without sampling calls first: alice's first session, without sampling.
	if _, err := first.CallTool(ctx, &mcp.CallToolParams{Name: "ev__echo", Arguments: map[string]any{"message": "hi"}}); err != nil {
		t.Fatalf("alice's first client: %v\n%s", err, stderr)
	}
	res, err := second.CallTool(ctx, &mcp.CallToolParams{Name: "ev__trigger-sampling-request", Arguments: map[string]any{"prompt": "hi"}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), "sampled by the second client") || sampled.Load() != 1 {
		t.Errorf("alice's client with sampling: %v %q (sampled %d times)\n%s", err, textOf(res), sampled.Load(), stderr)
	}
	if n := strings.Count(stderr.String(), "per-principal upstream session started"); n != 2 {
		t.Errorf("%d per-principal sessions started, want 2 (one per class of alice's clients)", n)
	}
}
