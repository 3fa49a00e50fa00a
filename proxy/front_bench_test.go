//go:build unix

package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/benchwire"
)

// BenchmarkHTTPFrontCall is one whole tools/call through the proxy serving HTTP, run
// in-process exactly as `mcp-proxy run` runs it (New and ListenAndServe) (the config parsed from HCL, the h1
// server, sessions, the router and its chain, logging at info to a discarding stderr),
// in front of a real upstream process: the test server with -fast over its pipes
// (child), or serving Streamable HTTP (http-upstream). The client is benchwire (one
// legacy session per connection, allocating nothing once warm), so allocs/op and B/op
// are the proxy's own; the upstream's work is in another process, so cpu-ns/op (this
// process's CPU time per call) is the proxy's plus the client's. c64 runs 64 sessions
// at once, each on its own connection, as the load tool's c=64 does. The floor
// forwarder's BenchmarkFloorCall (cmd/mcp-bench) is the same with no logic.
func BenchmarkHTTPFrontCall(b *testing.B) {
	bin := benchwire.TestServer(b)
	params := []byte(`{"name":"echo","arguments":{"text":"hello"}}`)
	for _, up := range []string{"child", "http-upstream"} {
		for _, c := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/c%d", up, c), func(b *testing.B) {
				addr := startBenchProxy(b, bin, up, "")
				benchwire.Calls(b, addr, "/mcp", c, "tools/call", params)
			})
		}
	}
}

// BenchmarkHTTPEndpointCall is BenchmarkHTTPFrontCall's call through an endpoint: the
// same proxy and upstream, with two endpoint blocks (a filtered view, and one in search
// mode, whose tool is called by name), against the listen path of a proxy without
// endpoints, in one run so that the ratio holds on a noisy machine. An endpoint must
// cost nothing measurable on a call: its view is a map lookup.
func BenchmarkHTTPEndpointCall(b *testing.B) {
	bin := benchwire.TestServer(b)
	params := []byte(`{"name":"echo","arguments":{"text":"hello"}}`)
	endpoints := "endpoint \"view\" {\n  tools {\n    include = [\"e*\"]\n  }\n}\nendpoint \"find\" {\n  mode = \"search\"\n}\n"
	for _, c := range []struct{ name, extra, path string }{
		{"no-endpoints", "", "/mcp"},
		{"listen-path", endpoints, "/mcp"},
		{"endpoint", endpoints, "/mcp/view"},
		{"search-endpoint", endpoints, "/mcp/find"},
	} {
		b.Run(c.name, func(b *testing.B) {
			addr := startBenchProxy(b, bin, "child", c.extra)
			benchwire.Calls(b, addr, c.path, 1, "tools/call", params)
		})
	}
}

// startBenchProxy runs the proxy in-process serving HTTP on a free loopback port, with
// the test server as its one upstream (a child over its pipes, or a child serving HTTP
// when up is "http-upstream"), and returns the address it listens on. It stops when the
// benchmark ends.
func startBenchProxy(b *testing.B, bin, up, extra string) string {
	dir := b.TempDir()
	upstream := fmt.Sprintf("  command   = [%q, \"-fast\"]\n", bin)
	if up == "http-upstream" {
		upstream = fmt.Sprintf("  url       = %q\n", "http://"+benchwire.HTTPTestServer(b, bin)+"/mcp")
	}
	cfg := "listen \"http\" {\n  address = \"127.0.0.1:0\"\n  path    = \"/mcp\"\n}\n\n" +
		"upstream \"bench\" {\n" + upstream + "  namespace = \"\"\n}\n" + extra
	path := filepath.Join(dir, "proxy.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &addrWatcher{found: make(chan string, 1)}
	done := make(chan error, 1)
	cfgFile, err := Load(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	log := zerolog.New(stderr).Level(zerolog.InfoLevel).With().Timestamp().Logger() // as run logs
	p, err := New(ctx, cfgFile, WithLogger(log))
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		done <- p.ListenAndServe(ctx)
	}()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("the proxy: %v", err)
		}
	})
	select {
	case addr := <-stderr.found:
		return addr
	case err := <-done:
		b.Fatalf("the proxy ended before serving: %v", err)
	case <-time.After(30 * time.Second):
		b.Fatal("the proxy did not report its address in 30s")
	}
	return ""
}

// addrWatcher is the in-process proxy's stderr: it reads the address off the
// "mcp-proxy serving on HTTP" line and discards everything else.
type addrWatcher struct {
	mu    sync.Mutex
	found chan string
	done  bool
}

func (w *addrWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || !bytes.Contains(p, []byte("mcp-proxy serving on HTTP")) {
		return len(p), nil
	}
	var line struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal(p, &line); err != nil || line.Address == "" {
		return 0, errors.New("the serving line has no address")
	}
	w.done = true
	w.found <- line.Address
	return len(p), nil
}
