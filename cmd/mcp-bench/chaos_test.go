package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// buildChaosBinaries builds the proxy (with the race detector, so that a race under
// faults fails the run) and the testserver.
func buildChaosBinaries(t *testing.T) (proxy, server string) {
	t.Helper()
	dir := t.TempDir()
	proxy, server = filepath.Join(dir, "mcp-proxy"), filepath.Join(dir, "testserver")
	for _, b := range []struct{ out, pkg string }{{proxy, "../mcp-proxy"}, {server, "../../internal/testing/testserver"}} {
		args := []string{"build", "-o", b.out, b.pkg}
		if b.out == proxy {
			args = []string{"build", "-race", "-o", b.out, b.pkg}
		}
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", b.pkg, err, out)
		}
	}
	return proxy, server
}

// runChaos runs mcp-bench with args and returns its report; run's own checks (every call
// answered, no misroute, no leak) make it fail otherwise.
func runChaos(t *testing.T, args ...string) chaosReport {
	t.Helper()
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), append(args, "-json", jsonPath), nil, &stdout, &lockedWriter{w: &stderr})
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("report:\n%s", stdout.String())
	var rep chaosReport
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stderr.Bytes(), []byte("WARNING: DATA RACE")) || bytes.Contains(stderr.Bytes(), []byte("panic:")) {
		t.Errorf("the proxy raced or panicked:\n%s", stderr.String())
	}
	return rep
}

// TestChaos: 64 calls in flight over three child-process and two HTTP upstreams while,
// every second or so, a child is killed with SIGKILL or an HTTP upstream's connections
// are reset. Every call gets exactly one answer: its own result (its token, from its
// upstream) or an error; none gets another call's; every upstream serves again; the
// proxy ends with no more goroutines, descriptors or processes than it started with.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the proxy under faults for 12 s")
	}
	proxy, server := buildChaosBinaries(t)
	rep := runChaos(t, "-proxy", proxy, "-upstream", server, "-chaos-every", "1s", "-duration", "12s", "-concurrency", "64")
	if rep.Calls == 0 || rep.Calls != rep.Answers+rep.NoAnswer || rep.NoAnswer != 0 || rep.Misroutes != 0 {
		t.Errorf("calls %d, answers %d, no answer %d, misroutes %d", rep.Calls, rep.Answers, rep.NoAnswer, rep.Misroutes)
	}
	if rep.Results == 0 || len(rep.Faults) == 0 {
		t.Errorf("results %d, faults %d: nothing was exercised", rep.Results, len(rep.Faults))
	}
	if rep.Start.Goroutines <= 0 || rep.GoroutineLeak != 0 || rep.FDLeak != 0 || rep.ProcLeak != 0 || rep.Zombies != 0 || rep.ProcsEnd != chaosChildren {
		t.Errorf("start %+v (%d processes), end %+v (%d processes, %d zombies)", rep.Start, rep.ProcsStart, rep.End, rep.ProcsEnd, rep.Zombies)
	}
}

// TestSoakShort: the soak mode's load without faults: every call gets its own result
// and the proxy ends where it started.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the proxy for 3 s")
	}
	proxy, server := buildChaosBinaries(t)
	rep := runChaos(t, "-proxy", proxy, "-upstream", server, "-soak", "3s", "-concurrency", "16")
	if rep.Mode != "soak" || rep.Calls == 0 || rep.Results != rep.Calls || len(rep.Faults) != 0 {
		t.Errorf("mode %s, calls %d, results %d, faults %d", rep.Mode, rep.Calls, rep.Results, len(rep.Faults))
	}
	if rep.GoroutineLeak != 0 || rep.FDLeak != 0 || rep.ProcLeak != 0 {
		t.Errorf("start %+v, end %+v", rep.Start, rep.End)
	}
}
