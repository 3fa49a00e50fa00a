package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTypeScriptClient drives the proxy with the official TypeScript SDK client (npm
// @modelcontextprotocol/sdk, legacy era) over stdio: list, call, progress, sampling and
// elicitation relayed from a legacy upstream, read, get, and an unknown tool.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	upstreams := everythingUpstreamEra("everything", "ev", "legacy") + npmUpstream("npm", "npm")
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		runTSClient(t, proxyBin, writeConfig(t, upstreams))
	})
	t.Run("streamable-http", func(t *testing.T) {
		t.Parallel()
		url, _ := startHTTPProxy(t, upstreams)
		runTSClient(t, "--http", url)
	})
}

func runTSClient(t *testing.T, arg1, arg2 string) {
	cmd := exec.Command("node", filepath.Join("testdata", "ts-client.mjs"), arg1, arg2)
	cmd.Dir = "." // node resolves the SDK from the repository's node_modules
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TS client: %v\n%s\n%s", err, out, stderr.String())
	}
	var got struct {
		Server         struct{ Name string }
		Tools          []string
		Echo           string
		Progress       []float64
		ProgressDone   bool
		Sampling       string
		Elicitation    string
		Sampled        int
		Elicited       int
		Resource       string
		PromptMessages int
		UnknownTool    any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("TS client output %q: %v", out, err)
	}
	if got.Server.Name != "mcp-proxy" || !slices.Contains(got.Tools, "ev__test_simple_text") || !slices.Contains(got.Tools, "npm__echo") {
		t.Errorf("catalogue seen by the TS client: %+v", got)
	}
	if got.Echo != "Echo: from TS" || !got.ProgressDone || len(got.Progress) == 0 {
		t.Errorf("calls: echo %q, progress %v", got.Echo, got.Progress)
	}
	if got.Sampled == 0 || !strings.Contains(got.Sampling, "sampled by the TS client") {
		t.Errorf("sampling: %d calls, result %q", got.Sampled, got.Sampling)
	}
	if got.Elicited == 0 {
		t.Errorf("elicitation handler not reached: %q", got.Elicitation)
	}
	if got.Resource != "test://static-text" || got.PromptMessages == 0 {
		t.Errorf("read %q, prompt messages %d", got.Resource, got.PromptMessages)
	}
	if code, _ := got.UnknownTool.(float64); code != -32602 {
		t.Errorf("unknown tool: %v", got.UnknownTool)
	}
}
