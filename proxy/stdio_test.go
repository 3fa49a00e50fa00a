package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/auth"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/proxy"
)

// stdioClient plays a client on the two pipes of ServeStdio.
type stdioClient struct {
	t   *testing.T
	in  *io.PipeWriter
	out *bufio.Scanner
}

// ask sends line and returns the answer whose id is id, past any notification.
func (c *stdioClient) ask(id int, line string) string {
	c.t.Helper()
	fmt.Fprintln(c.in, line)
	for c.out.Scan() {
		if strings.Contains(c.out.Text(), fmt.Sprintf(`"id":%d,`, id)) {
			return c.out.Text()
		}
	}
	c.t.Fatalf("no answer to %s", line)
	return ""
}

// TestServeStdioReloads serves an embedded proxy on stdio with a plugin (testplugin,
// tagging results), an admin listener behind the auth block, proxy.watch and
// ReloadOnSignal: the plugin's tag shows in the result; an edit of the file is reloaded
// by the watcher (the plugin replaced: the new tag shows); SIGHUP reloads it again
// (nothing to change); the admin listener takes the auth block's key; the client going
// ends ServeStdio.
func TestServeStdioReloads(t *testing.T) {
	dir := t.TempDir()
	plugin := filepath.Join(dir, "testplugin")
	if out, err := exec.Command("go", "build", "-o", plugin, "../internal/testing/testplugin").CombinedOutput(); err != nil {
		t.Fatalf("building the test plugin: %v\n%s", err, out)
	}
	const token = "stdio-token-0123456789abcdef"
	path := filepath.Join(dir, "proxy.hcl")
	file := func(tag string) string {
		return fmt.Sprintf(`proxy {
  watch = true
}
admin {
  address = "127.0.0.1:0"
}
auth {
  api_key "ops" {
    sha256 = %q
  }
}
plugin "tagger" {
  command = [%q]
  tools   = ["greeter__*"]
  config {
    tag = %q
  }
}
upstream "spare" {
  command  = ["/bin/true"]
  disabled = true
}
`, auth.HashToken(token), plugin, tag)
	}
	writeFile(t, path, file(" (v1)"))
	cfg, err := proxy.Load(path, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if diags := proxy.ValidatePlugins(ctx, cfg); diags.HasErrors() {
		t.Fatalf("ValidatePlugins: %s", config.FormatDiagnostics(diags))
	}
	logs := newLogLines()
	p, err := proxy.New(ctx, cfg, proxy.WithLogger(logs.logger()), proxy.WithUpstream("greeter", dialGreeter), proxy.ReloadOnSignal())
	if err != nil {
		t.Fatal(err)
	}
	stdin, toProxy := io.Pipe()
	fromProxy, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(ctx, stdin, stdout) }()
	c := &stdioClient{t: t, in: toProxy, out: bufio.NewScanner(fromProxy)}
	c.ask(1, initialize)
	fmt.Fprintln(toProxy, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if a := c.ask(2, greetCall(2, "Ada")); !strings.Contains(a, "Hello, Ada! (v1)") {
		t.Fatalf("tools/call through the plugin: %s\n%s", a, logs)
	}

	adminAt := logs.waitFor(t, 0, "admin listener serving /metrics, /healthz, /readyz, /status", nil)
	statusURL := "http://" + adminAt["address"].(string) + "/status?format=json"
	if code := getJSON(t, http.MethodGet, statusURL, token, nil); code != http.StatusOK {
		t.Errorf("/status with the key: %d", code)
	}
	if code := getJSON(t, http.MethodGet, statusURL, "not-the-key-0123456789", nil); code != http.StatusUnauthorized {
		t.Errorf("/status with another key: %d, want 401", code)
	}

	from := logs.len()
	writeFile(t, path, file(" (v2)"))
	logs.waitFor(t, from, "configuration reloaded", map[string]any{"trigger": "watch", "outcome": "applied"})
	if a := c.ask(3, greetCall(3, "Ada")); !strings.Contains(a, "Hello, Ada! (v2)") {
		t.Errorf("tools/call after the watcher's reload: %s", a)
	}

	from = logs.len()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, from, "configuration reloaded: nothing to change", map[string]any{"trigger": "signal"})

	go io.Copy(io.Discard, fromProxy)
	toProxy.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("ServeStdio did not return when the client went")
	}
	stdout.Close()
	logs.waitFor(t, 0, "upstreams stopped", nil)
}
