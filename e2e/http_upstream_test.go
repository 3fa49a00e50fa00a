package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startHTTPEverything runs the Go SDK everything-server over Streamable HTTP on a free
// loopback port and returns its URL.
func startHTTPEverything(t *testing.T, stateless bool) string {
	t.Helper()
	for attempt := 0; ; attempt++ {
		addr := freeAddr(t)
		stop, err := tryServeEverythingAt(t, addr, stateless)
		if err == nil {
			t.Cleanup(stop)
			return "http://" + addr + "/mcp"
		}
		if attempt == 2 {
			t.Fatal(err)
		}
		t.Logf("%v; trying another port", err) // the port was taken before the server bound it
	}
}

// serveEverythingAt runs the everything-server over HTTP at addr until stop is called.
func serveEverythingAt(t *testing.T, addr string, stateless bool) (stop func()) {
	t.Helper()
	stop, err := tryServeEverythingAt(t, addr, stateless)
	if err != nil {
		t.Fatal(err)
	}
	return stop
}

// tryServeEverythingAt starts the everything-server at addr and makes sure that what
// answers there is that server: a free port can be taken by another process between the
// moment it is chosen and the moment the server binds it, and a readiness check that
// only connects would then talk to that other process.
func tryServeEverythingAt(t *testing.T, addr string, stateless bool) (stop func(), err error) {
	t.Helper()
	cmd := exec.Command(everythingBin, "-http="+addr, fmt.Sprintf("-stateless=%v", stateless))
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Kill()
			<-exited
		})
	}
	waitListening(t, addr, stderr)
	const init = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e-probe","version":"1"}}}`
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			return nil, fmt.Errorf("the everything-server at %s exited: %s", addr, stderr)
		default:
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			del, _ := http.NewRequest(http.MethodDelete, "http://"+addr+"/mcp", nil)
			del.Header.Set("Mcp-Session-Id", sid)
			if r, err := http.DefaultClient.Do(del); err == nil {
				r.Body.Close()
			}
		}
		if strings.Contains(string(body), "mcp-conformance-test-server") {
			return stop, nil
		}
		stop()
		return nil, fmt.Errorf("something else answers at %s: %d %.200s", addr, resp.StatusCode, body)
	}
	stop()
	return nil, fmt.Errorf("the everything-server at %s did not answer initialize: %s", addr, stderr)
}

// TestHTTPUpstream reaches the Go SDK everything-server over Streamable HTTP, stateless
// (2026-07-28) and with legacy sessions, from stdio clients of both eras: listing,
// calling, progress over SSE, resources, and for the legacy session a server-to-client
// request carried on the POST's SSE stream.
func TestHTTPUpstream(t *testing.T) {
	t.Parallel()
	for _, stateless := range []bool{true, false} {
		url := startHTTPEverything(t, stateless)
		cfg := writeConfig(t, fmt.Sprintf("upstream \"remote\" {\n  url = %q\n  namespace = \"ev\"\n  headers = { X-Test = \"e2e\" }\n}\n", url))
		for _, version := range []string{"2025-11-25", ""} {
			t.Run(fmt.Sprintf("stateless=%v client=%q", stateless, version), func(t *testing.T) {
				var progress, sampled atomic.Int32
				cs, stderr := connectSDK(t, cfg, &mcp.ClientOptions{
					ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
					CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
						sampled.Add(1)
						return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "over http"}}, nil
					},
				}, version)
				ctx := ctxT(t, 60*time.Second)
				names := toolNames(t, cs)
				if !slices.Contains(names, "ev__test_simple_text") {
					t.Fatalf("tools over HTTP: %v\n%s", names, stderr)
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_simple_text"})
				if err != nil || !strings.Contains(textOf(res), "simple text") {
					t.Errorf("call over HTTP: %v %q", err, textOf(res))
				}
				p := &mcp.CallToolParams{Name: "ev__test_tool_with_progress"}
				p.SetProgressToken("http-progress")
				if _, err := cs.CallTool(ctx, p); err != nil || progress.Load() == 0 {
					t.Errorf("progress over HTTP: %v (%d)", err, progress.Load())
				}
				if rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static-text"}); err != nil || len(rr.Contents) == 0 {
					t.Errorf("read over HTTP: %v", err)
				}
				tool := "ev__test_input_required_result_sampling"
				if !stateless {
					tool = "ev__test_sampling"
				}
				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"prompt": "hi"}})
				if err != nil || !strings.Contains(textOf(res), "over http") || sampled.Load() == 0 {
					t.Errorf("sampling over HTTP (%s): %v %q", tool, err, textOf(res))
				}
			})
		}
	}
}

// connectBridge runs `mcp-proxy bridge --url url` with extra flags and connects the Go
// SDK client to it over stdio.
func connectBridge(t *testing.T, url string, flags ...string) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	args := append([]string{"bridge", "--url", url, "--log-level", "debug"}, flags...)
	cmd := exec.Command(proxyBin, args...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctxT(t, 60*time.Second), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect through bridge: %v\n%s", err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, stderr
}

// TestBridgeURL exposes a remote server on stdin/stdout with `mcp-proxy bridge --url`,
// without a config file, its names unprefixed.
func TestBridgeURL(t *testing.T) {
	t.Parallel()
	cs, stderr := connectBridge(t, startHTTPEverything(t, false), "--header", "X-Test=bridge")
	res, err := cs.CallTool(ctxT(t, 30*time.Second), &mcp.CallToolParams{Name: "test_simple_text"})
	if err != nil || !strings.Contains(textOf(res), "simple text") {
		t.Errorf("call through bridge: %v %q\n%s", err, textOf(res), stderr)
	}
}

// TestHTTPUpstreamParamHeaders calls a tool whose schema mirrors an argument into an
// Mcp-Param-* header on a modern HTTP upstream: the proxy derives the header from the
// upstream's own schema (the server rejects a mismatch with -32020).
func TestHTTPUpstreamParamHeaders(t *testing.T) {
	t.Parallel()
	url := startHTTPEverything(t, true)
	cfg := writeConfig(t, fmt.Sprintf("upstream \"remote\" {\n  url = %q\n  namespace = \"ev\"\n}\n", url))
	cs, stderr := connectSDK(t, cfg, nil, "2025-11-25")
	ctx := ctxT(t, 30*time.Second)
	for _, args := range []map[string]any{
		{"region": "eu-west", "level": 3},
		{"region": "zürich (ü)", "level": 1}, // not plain ASCII: base64-encoded in the header
		{"level": 2},                         // absent: no header
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_x_mcp_header", Arguments: args})
		if err != nil || res.IsError {
			t.Errorf("%v: %v %q\n%s", args, err, textOf(res), stderr)
		}
	}
}

// TestHTTPUpstreamSessionLost restarts a stateful HTTP upstream under the proxy: its
// sessions are gone (404), and the proxy re-initializes and serves again.
func TestHTTPUpstreamSessionLost(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	stop := serveEverythingAt(t, addr, false)
	cfg := writeConfig(t, fmt.Sprintf("upstream \"remote\" {\n  url = %q\n  namespace = \"ev\"\n  protocol = \"legacy\"\n}\n", "http://"+addr+"/mcp"))
	cs, stderr := connectSDK(t, cfg, nil, "2025-11-25")
	ctx := ctxT(t, 60*time.Second)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_simple_text"}); err != nil {
		t.Fatal(err)
	}
	stop()
	t.Cleanup(serveEverythingAt(t, addr, false)) // same address, no sessions
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_simple_text"})
		if err == nil && !res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not re-initialize the upstream: %v\n%s", err, stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(stderr.String(), "404") && !strings.Contains(stderr.String(), "restarting") {
		t.Errorf("the lost session was not logged:\n%s", stderr)
	}
}

// TestSSEUpstream reaches npm's server-everything over the legacy HTTP+SSE transport
// (2024-11-05), found by transport = "auto" after Streamable HTTP fails, and configured
// explicitly.
func TestSSEUpstream(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("node", npmEverything, "sse")
	cmd.Env = append(cmd.Environ(), "PORT="+port)
	srvErr := &syncBuffer{}
	cmd.Stderr = srvErr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitListening(t, addr, srvErr)
	for _, transport := range []string{"auto", "sse"} {
		t.Run(transport, func(t *testing.T) {
			cfg := writeConfig(t, fmt.Sprintf("upstream \"old\" {\n  url = %q\n  transport = %q\n  namespace = \"old\"\n}\n", "http://"+addr+"/sse", transport))
			cs, stderr := connectSDK(t, cfg, nil, "2025-11-25")
			res, err := cs.CallTool(ctxT(t, 30*time.Second), &mcp.CallToolParams{Name: "old__echo", Arguments: map[string]any{"message": "over sse"}})
			if err != nil || textOf(res) != "Echo: over sse" {
				t.Errorf("call over HTTP+SSE: %v %q\n%s", err, textOf(res), stderr)
			}
		})
	}
}
