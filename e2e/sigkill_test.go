package e2e

import (
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/sandbox"
)

// TestSIGKILLLeavesNoChild: the proxy killed with SIGKILL runs no shutdown code, yet
// none of its children survives it: the kernel kills each direct child (parent-death
// signal), including one that ignores stdin and SIGTERM and is still starting; a
// wrapper's own child sees its stdin close and exits. Where the machine can sandbox, one
// more upstream is a sandboxed wrapper whose own child ignores stdin and SIGTERM too:
// both are killed by the lifeline of the wrapper's process group.
func TestSIGKILLLeavesNoChild(t *testing.T) {
	sandboxed, want := "", 6
	if sandbox.Check(&sandbox.Policy{Network: sandbox.NetworkAny}) == nil {
		sandboxed, want = "upstream \"stuck-sandboxed\" {\n  command = [\"sh\", \"-c\", \"trap '' TERM; sleep 1000 </dev/null & wait\"]\n"+
			"  startup_timeout = \"300s\"\n  sandbox {\n    network = \"any\"\n  }\n}\n", 8
	}
	cfg := writeConfig(t, sandboxed+testUpstream("a", "a", nil, "")+
		testUpstream("b", "b", nil, "")+
		everythingUpstream("everything", "ev")+
		// A server still starting that will never answer and ignores its stdin closing
		// and SIGTERM: only a kill ends it.
		"upstream \"stuck\" {\n  command = [\"sh\", \"-c\", \"trap '' TERM; exec sleep 1000 </dev/null\"]\n  startup_timeout = \"300s\"\n}\n"+
		// A wrapper that runs the server as its own child (a grandchild of the proxy).
		fmt.Sprintf("upstream \"wrapped\" {\n  command = [\"sh\", \"-c\", %s]\n  namespace = \"w\"\n}\n", q(testserverBin+"; exit $?")))
	cmd, stderr := proxyCmd(cfg)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	// The upstreams start with the first client.
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	// Five direct children and the wrapper's grandchild (and the sandboxed wrapper and
	// its child).
	var procs []int
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		procs = descendants(cmd.Process.Pid)
		if len(procs) >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes under the proxy, want %d\nstderr:\n%s", len(procs), want, stderr)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err == nil {
		t.Fatal("the proxy exited cleanly after SIGKILL")
	}
	assertGone(t, procs)
	checkStderr(t, stderr)
}
