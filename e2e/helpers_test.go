package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// syncBuffer collects a process's stderr safely across goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// writeConfig writes an HCL config into a temp dir and returns its path; see
// withTestGrace for the one thing it adds.
func writeConfig(t *testing.T, hcl string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "proxy.hcl")
	if err := os.WriteFile(p, []byte(withTestGrace(hcl)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// testReadyGrace is the proxy.ready_grace of the tests' configs. The default (1s) lets
// initialize answer while slow upstreams still start; the tests that list right after
// connecting, and expect every upstream's items, would then depend on how fast npx or
// the Go SDK server starts on a loaded machine. Those tests are about other things, so
// their proxy waits for every upstream (readiness_test.go tests the grace itself, with
// configs that set ready_grace).
const testReadyGrace = "60s"

// withTestGrace returns hcl with proxy.ready_grace set to testReadyGrace, unless it
// sets ready_grace itself: in its proxy block when it has one (a one-line block is
// opened up), else in a block of its own at the end (so that the lines diagnostics
// name do not move).
func withTestGrace(hcl string) string {
	if strings.Contains(hcl, "ready_grace") {
		return hcl
	}
	attr := "  ready_grace = " + q(testReadyGrace) + "\n"
	loc := proxyBlock.FindStringSubmatchIndex(hcl)
	if loc == nil {
		if hcl != "" && !strings.HasSuffix(hcl, "\n") {
			hcl += "\n"
		}
		return hcl + "proxy {\n" + attr + "}\n"
	}
	rest := strings.TrimSpace(hcl[loc[2]:loc[3]]) // what follows "proxy {" on its line
	if one, ok := strings.CutSuffix(rest, "}"); ok {
		return hcl[:loc[0]] + "proxy {\n" + attr + "  " + strings.TrimSpace(one) + "\n}\n" + hcl[loc[1]:]
	}
	return hcl[:loc[1]] + attr + hcl[loc[1]:]
}

// proxyBlock matches the line that opens a config's proxy block, newline included;
// group 1 is what follows the brace on that line.
var proxyBlock = regexp.MustCompile(`(?m)^proxy\s*\{([^\n]*)\n`)

// q quotes a string for HCL.
func q(s string) string { return strconv.Quote(s) }

// everythingUpstream is an HCL block for the Go SDK everything-server, whose era the
// proxy detects (it is dual-era, so it comes out modern).
func everythingUpstream(label, namespace string) string {
	return everythingUpstreamEra(label, namespace, "auto")
}

// everythingUpstreamEra is everythingUpstream with the era fixed: "legacy" makes the proxy
// initialize it, so that it sends real server-to-client requests.
func everythingUpstreamEra(label, namespace, protocol string) string {
	return fmt.Sprintf("upstream %q {\n  command = [%s]\n  namespace = %q\n  protocol = %q\n}\n", label, q(everythingBin), namespace, protocol)
}

// npmUpstream is an HCL block for npm's server-everything.
func npmUpstream(label, namespace string) string {
	return fmt.Sprintf("upstream %q {\n  command = [\"node\", %s, \"stdio\"]\n  namespace = %q\n  startup_timeout = \"60s\"\n}\n", label, q(npmEverything), namespace)
}

// testUpstream is an HCL block for the misbehaving test server with flags and extra attributes.
func testUpstream(label, namespace string, flags []string, extra string) string {
	parts := []string{q(testserverBin)}
	for _, f := range flags {
		parts = append(parts, q(f))
	}
	return fmt.Sprintf("upstream %q {\n  command = [%s]\n  namespace = %q\n  %s\n}\n", label, strings.Join(parts, ", "), namespace, extra)
}

// proxyCmd returns the command that runs the proxy on cfg, with stderr captured.
func proxyCmd(cfg string) (*exec.Cmd, *syncBuffer) {
	cmd := exec.Command(proxyBin, "run", "--config", cfg, "--log-level", "debug")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	return cmd, stderr
}

// connectSDK starts the proxy on cfg and connects the Go SDK client to it over stdio.
func connectSDK(t *testing.T, cfg string, opts *mcp.ClientOptions, version string) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	cmd, stderr := proxyCmd(cfg)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-go-sdk", Version: "1.0.0"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var sopts *mcp.ClientSessionOptions
	if version != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, sopts)
	if err != nil {
		t.Fatalf("connecting to the proxy: %v\nproxy stderr:\n%s", err, stderr)
	}
	t.Cleanup(func() {
		children := childPIDs(cmd.Process.Pid)
		if err := cs.Close(); err != nil {
			t.Logf("closing session: %v", err)
		}
		checkStderr(t, stderr)
		assertGone(t, children)
	})
	return cs, stderr
}

// checkStderr fails the test when the proxy's stderr shows a data race or a panic.
func checkStderr(t *testing.T, stderr *syncBuffer) {
	t.Helper()
	s := stderr.String()
	for _, bad := range []string{"WARNING: DATA RACE", "panic:", "goroutine "} {
		if strings.Contains(s, bad) {
			t.Errorf("proxy stderr contains %q:\n%s", bad, s)
			return
		}
	}
}

// childPIDs lists the direct children of pid.
func childPIDs(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Field 4 (ppid) follows the parenthesised command name.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 2 {
			if pp, _ := strconv.Atoi(f[1]); pp == pid {
				out = append(out, p)
			}
		}
	}
	return out
}

// assertGone waits briefly for pids to exit and fails for any still alive (a leaked
// child process).
func assertGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, p := range pids {
		for {
			if err := syscall.Kill(p, 0); err != nil {
				break
			}
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); strings.Contains(string(b), ") Z ") {
				break // a zombie awaiting its parent's reaper is gone for our purposes
			}
			if time.Now().After(deadline) {
				t.Errorf("child process %d is still running after the proxy exited", p)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// rawClient speaks newline-delimited JSON to a proxy process, for byte-level checks.
type rawClient struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	stderr *syncBuffer

	waitOnce sync.Once
	waitDone chan struct{}
	waitErr  error
}

// wait waits for the proxy process to exit, once, however many times it is called.
func (rc *rawClient) wait(timeout time.Duration) (error, bool) {
	rc.waitOnce.Do(func() {
		rc.waitDone = make(chan struct{})
		go func() {
			rc.waitErr = rc.cmd.Wait()
			close(rc.waitDone)
		}()
	})
	select {
	case <-rc.waitDone:
		return rc.waitErr, true
	case <-time.After(timeout):
		return nil, false
	}
}

func startRaw(t *testing.T, cfg string) *rawClient {
	t.Helper()
	cmd, stderr := proxyCmd(cfg)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rc := &rawClient{t: t, cmd: cmd, stdin: stdin, lines: make(chan []byte, 1024), stderr: stderr}
	go func() {
		defer close(rc.lines)
		br := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				rc.lines <- bytes.TrimRight(line, "\n")
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		children := childPIDs(cmd.Process.Pid)
		stdin.Close()
		err, exited := rc.wait(20 * time.Second)
		switch {
		case !exited:
			cmd.Process.Kill()
			t.Errorf("proxy did not exit after its stdin closed\nstderr:\n%s", stderr)
		case err != nil:
			t.Errorf("proxy exited with %v\nstderr:\n%s", err, stderr)
		}
		checkStderr(t, stderr)
		assertGone(t, children)
	})
	return rc
}

func (rc *rawClient) send(line string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.stdin, line+"\n"); err != nil {
		rc.t.Fatalf("writing to proxy: %v", err)
	}
}

// next returns the next line from the proxy, failing after timeout.
func (rc *rawClient) next(timeout time.Duration) []byte {
	rc.t.Helper()
	select {
	case l, ok := <-rc.lines:
		if !ok {
			rc.t.Fatalf("proxy closed stdout\nstderr:\n%s", rc.stderr)
		}
		return l
	case <-time.After(timeout):
		rc.t.Fatalf("no message from the proxy within %s\nstderr:\n%s", timeout, rc.stderr)
	}
	return nil
}

// response reads lines until the response with the exact raw id, skipping notifications.
func (rc *rawClient) response(rawID string) map[string]json.RawMessage {
	rc.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		line := rc.next(time.Until(deadline))
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			rc.t.Fatalf("proxy wrote a line that is not JSON: %q", line)
		}
		if _, isReq := m["method"]; isReq {
			continue
		}
		if string(m["id"]) == rawID {
			return m
		}
		rc.t.Fatalf("expected response with id %s, got %s", rawID, line)
	}
	rc.t.Fatalf("no response with id %s", rawID)
	return nil
}

func (rc *rawClient) initialize() map[string]json.RawMessage {
	rc.t.Helper()
	rc.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	m := rc.response("0")
	if _, ok := m["result"]; !ok {
		rc.t.Fatalf("initialize failed: %s", m["error"])
	}
	rc.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m
}

// errorCode returns the error code of a response, or 0 when it succeeded.
func errorCode(t *testing.T, m map[string]json.RawMessage) int64 {
	t.Helper()
	raw, ok := m["error"]
	if !ok {
		return 0
	}
	var e struct {
		Code int64 `json:"code"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("bad error object %s", raw)
	}
	return e.Code
}

// textOf joins the text contents of a tool result.
func textOf(res *mcp.CallToolResult) string {
	if res == nil {
		return "<no result>"
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("listing tools: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// freeAddr returns a loopback address with a port that was free a moment ago, below the
// kernel's ephemeral range and never handed out before in this process
// (topology.FreeAddr says why).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// waitListening waits until something accepts connections at addr.
func waitListening(t *testing.T, addr string, logs fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens at %s:\n%s", addr, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
