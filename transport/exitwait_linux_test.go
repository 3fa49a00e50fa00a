package transport

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func selfThreads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// TestChildrenCostNoThread: waiting for a child's exit takes no OS thread (the pidfd is
// in the runtime's poller), so many idle children do not mean as many threads; each
// child's exit is still seen, with its status.
func TestChildrenCostNoThread(t *testing.T) {
	const n = 24
	before := selfThreads(t)
	procs := make([]*Process, 0, n)
	for range n {
		p, err := StartProcess(ProcessSpec{Command: helper("echo")})
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	time.Sleep(200 * time.Millisecond) // let every reaper reach its wait
	if grown := selfThreads(t) - before; grown >= n/2 {
		t.Errorf("%d idle children added %d threads; waiting for them should take none", n, grown)
	}
	// One is killed; the others end at stdin EOF.
	if err := procs[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-procs[0].Done()
	if err := procs[0].ExitErr(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("killed child: exit error %v, want a signal", err)
	}
	for _, p := range procs[1:] {
		p.stdin.Close()
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("pid %d: exit not seen", p.Pid())
		}
		if err := p.ExitErr(); err != nil {
			t.Errorf("pid %d: exit error %v, want none", p.Pid(), err)
		}
	}
}
