package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startHTTPProxy runs `mcp-proxy run` with a listen "http" block and returns its URL.
func startHTTPProxy(t *testing.T, upstreams string) (string, *syncBuffer) {
	t.Helper()
	url, stderr, _ := startHTTPProxyCmd(t, upstreams)
	return url, stderr
}

// startHTTPProxyCmd is startHTTPProxy that also returns the running command.
func startHTTPProxyCmd(t *testing.T, upstreams string) (string, *syncBuffer, *exec.Cmd) {
	t.Helper()
	addr := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("listen \"http\" {\n  address = %q\n  path = \"/mcp\"\n}\n", addr)+upstreams)
	stderr, cmd := startProxyAt(t, cfg, addr)
	return "http://" + addr + "/mcp", stderr, cmd
}

// startProxyAt starts the proxy on a config whose listen block serves addr, waits until
// it listens, and stops it (SIGINT) at the end of the test, checking that it stopped, its
// log, and that no process it started is left.
func startProxyAt(t *testing.T, cfg, addr string) (*syncBuffer, *exec.Cmd) {
	t.Helper()
	return startProxy(t, cfg, false, addr)
}

// startProxy runs the proxy on cfg and waits until it listens on every address in
// addrs. When the test ends it is stopped with SIGINT (killed after 20 s, an error), its
// stderr is checked and its children must be gone; strict also makes a non-zero exit
// an error.
func startProxy(t *testing.T, cfg string, strict bool, addrs ...string) (*syncBuffer, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(proxyBin, "run", "--config", cfg, "--log-level", "debug")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		children := childPIDs(cmd.Process.Pid)
		cmd.Process.Signal(interruptSignal())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil && strict {
				t.Errorf("the proxy exited with %v\n%s", err, stderr)
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Errorf("the proxy did not stop on SIGINT\n%s", stderr)
		}
		checkStderr(t, stderr)
		assertGone(t, children)
	})
	for _, a := range addrs {
		waitListening(t, a, stderr)
	}
	return stderr, cmd
}

// TestHTTPFrontEnd serves stdio upstreams over Streamable HTTP to the Go SDK client in
// both eras: list, call, progress and sampling on the request's event stream, and the
// security checks on Origin and Host.
func TestHTTPFrontEnd(t *testing.T) {
	t.Parallel()
	url, stderr := startHTTPProxy(t, everythingUpstreamEra("everything", "ev", "legacy")+testUpstream("t", "t", nil, ""))
	for _, version := range []string{"2025-11-25", ""} {
		t.Run(fmt.Sprintf("client=%q", version), func(t *testing.T) {
			var progress, sampled atomic.Int32
			client := mcp.NewClient(&mcp.Implementation{Name: "e2e-http", Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
				CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					sampled.Add(1)
					return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "via http front"}}, nil
				},
			})
			var sopts *mcp.ClientSessionOptions
			if version != "" {
				sopts = &mcp.ClientSessionOptions{ProtocolVersion: version}
			}
			cs, err := client.Connect(ctxT(t, 60*time.Second), &mcp.StreamableClientTransport{Endpoint: url}, sopts)
			if err != nil {
				t.Fatalf("connect over HTTP: %v\n%s", err, stderr)
			}
			defer cs.Close()
			ctx := ctxT(t, 60*time.Second)
			names := toolNames(t, cs)
			if !slices.Contains(names, "ev__test_simple_text") || !slices.Contains(names, "t__echo") {
				t.Fatalf("tools over the HTTP front end: %v", names)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"over": "http"}})
			if err != nil || !strings.Contains(textOf(res), "http") {
				t.Errorf("call: %v %q", err, textOf(res))
			}
			p := &mcp.CallToolParams{Name: "ev__test_tool_with_progress"}
			p.SetProgressToken("front-progress")
			if _, err := cs.CallTool(ctx, p); err != nil || progress.Load() == 0 {
				t.Errorf("progress over the HTTP front end: %v (%d)", err, progress.Load())
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_sampling", Arguments: map[string]any{"prompt": "hi"}})
			if err != nil || !strings.Contains(textOf(res), "via http front") || sampled.Load() == 0 {
				t.Errorf("sampling over the HTTP front end: %v %q\n%s", err, textOf(res), stderr)
			}
		})
	}

	t.Run("security and protocol checks", func(t *testing.T) {
		post := func(headers map[string]string, body string) int {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range headers {
				req.Header.Set(k, v)
			}
			if h, ok := headers["Host"]; ok {
				req.Host = h
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
		for _, c := range []struct {
			name    string
			headers map[string]string
			body    string
			want    int
		}{
			{"foreign Origin", map[string]string{"Origin": "http://evil.example"}, ping, 403},
			{"foreign Host", map[string]string{"Host": "evil.example:80"}, ping, 403},
			{"missing session", nil, ping, 400},
			{"unknown session", map[string]string{"Mcp-Session-Id": "nope"}, ping, 404},
			{"bad Accept", map[string]string{"Accept": "text/plain"}, ping, 406},
			{"malformed JSON", nil, `{"jsonrpc":`, 400},
		} {
			if got := post(c.headers, c.body); got != c.want {
				t.Errorf("%s: HTTP %d, want %d", c.name, got, c.want)
			}
		}
	})
}

func interruptSignal() os.Signal { return os.Interrupt }

// TestBridgeListen serves one stdio server over Streamable HTTP with
// `mcp-proxy bridge --listen ADDR -- CMD`, names unprefixed.
func TestBridgeListen(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	cmd := exec.Command(proxyBin, "bridge", "--listen", addr, "--", testserverBin, "-name", "bridged")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	waitListening(t, addr, stderr)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctxT(t, 30*time.Second), &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctxT(t, 30*time.Second), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"via": "bridge"}})
	if err != nil || !strings.Contains(textOf(res), "bridge") {
		t.Errorf("call through bridge --listen: %v %q\n%s", err, textOf(res), stderr)
	}
}

// TestLegacySSEFrontEnd serves old (2024-11-05 HTTP+SSE) clients: the Go SDK's SSE
// client transport opens /sse, gets the endpoint event and POSTs to it.
func TestLegacySSEFrontEnd(t *testing.T) {
	t.Parallel()
	url, stderr := startHTTPProxy(t, testUpstream("t", "t", nil, ""))
	base := strings.TrimSuffix(url, "/mcp")
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-sse", Version: "1"}, nil)
	cs, err := client.Connect(ctxT(t, 30*time.Second), &mcp.SSEClientTransport{Endpoint: base + "/sse"}, nil)
	if err != nil {
		t.Fatalf("connect over HTTP+SSE: %v\n%s", err, stderr)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctxT(t, 30*time.Second), &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"old": "sse"}})
	if err != nil || !strings.Contains(textOf(res), "sse") {
		t.Errorf("call over HTTP+SSE: %v %q\n%s", err, textOf(res), stderr)
	}
}

// TestInspectorCLI lists and calls tools with the MCP Inspector CLI (npm) over the
// legacy HTTP+SSE transport.
func TestInspectorCLI(t *testing.T) {
	t.Parallel()
	url, stderr := startHTTPProxy(t, testUpstream("t", "t", nil, ""))
	sse := strings.TrimSuffix(url, "/mcp") + "/sse"
	cli := filepath.Join(repoRoot, "node_modules", ".bin", "mcp-inspector-cli")
	run := func(args ...string) string {
		cmd := exec.Command(cli, append([]string{"--cli", sse, "--transport", "sse"}, args...)...)
		cmd.Dir = "." // the CLI looks for a package.json in the parent directory
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("inspector %v: %v\n%s\nproxy:\n%s", args, err, out, stderr)
		}
		return string(out)
	}
	if out := run("--method", "tools/list"); !strings.Contains(out, `"t__echo"`) {
		t.Errorf("inspector tools/list: %s", out)
	}
	if out := run("--method", "tools/call", "--tool-name", "t__echo", "--tool-arg", "a=1"); !strings.Contains(out, `"structuredContent"`) {
		t.Errorf("inspector tools/call: %s", out)
	}
}
