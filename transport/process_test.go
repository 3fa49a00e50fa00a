package transport

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// The test binary doubles as the child process, selected by TRANSPORT_TEST_CHILD (and, by
// package sandbox's init, as the sandbox's launcher).
func TestMain(m *testing.M) {
	switch os.Getenv("TRANSPORT_TEST_CHILD") {
	case "":
		os.Exit(m.Run())
	case "echo":
		// Echo each line back, log to stderr, exit at EOF.
		fmt.Fprintln(os.Stderr, "child started")
		buf := make([]byte, 1<<16)
		for {
			n, err := os.Stdin.Read(buf)
			if n > 0 {
				os.Stdout.Write(buf[:n])
			}
			if err != nil {
				os.Exit(0)
			}
		}
	case "stubborn":
		// Ignore SIGTERM and stdin EOF; start a grandchild in the same group; print its pid.
		signal.Ignore(syscall.SIGTERM)
		gc := exec.Command(os.Args[0])
		gc.Env = append(os.Environ(), "TRANSPORT_TEST_CHILD=sleep")
		if err := gc.Start(); err != nil {
			os.Exit(3)
		}
		fmt.Printf("%d\n", gc.Process.Pid)
		time.Sleep(time.Hour)
	case "sandboxed", "sandboxed-grandchild":
		sandboxedChild()
		os.Exit(0)
	case "sandbox-parent":
		sandboxParent()
	case "sleep":
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
	}
}

func helper(mode string) []string {
	return []string{"/usr/bin/env", "TRANSPORT_TEST_CHILD=" + mode, os.Args[0]}
}

func TestProcessEchoAndStderr(t *testing.T) {
	var mu sync.Mutex
	var stderr []string
	p, err := StartProcess(ProcessSpec{
		Command: helper("echo"),
		Env:     map[string]string{"EXTRA": "1"},
		Stderr: func(l string) {
			mu.Lock()
			stderr = append(stderr, l)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(jsonrpc.NewNotification("ping", nil)); err != nil {
		t.Fatal(err)
	}
	line, err := p.ReadLine()
	if err != nil || string(line) != `{"jsonrpc":"2.0","method":"ping"}` {
		t.Fatalf("echo: %q %v", line, err)
	}
	start := time.Now()
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("a child that exits on stdin EOF took %s to stop", time.Since(start))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stderr) == 0 || stderr[0] != "child started" {
		t.Errorf("stderr lines: %q", stderr)
	}
}

// TestProcessStopEscalates stops a child that ignores stdin EOF and SIGTERM and has a
// grandchild: Stop must escalate to SIGKILL of the whole process group.
func TestProcessStopEscalates(t *testing.T) {
	p, err := StartProcess(ProcessSpec{Command: helper("stubborn")})
	if err != nil {
		t.Fatal(err)
	}
	line, err := p.ReadLine()
	if err != nil {
		t.Fatal(err)
	}
	gc, err := strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil {
		t.Fatalf("grandchild pid %q", line)
	}
	start := time.Now()
	if err := p.Stop(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 5*time.Second {
		t.Errorf("Stop took %s; want the two grace periods, then SIGKILL", d)
	}
	if p.ExitErr() == nil {
		t.Errorf("a killed child reports success")
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(gc, 0) == nil {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", gc)); strings.Contains(string(b), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(gc, syscall.SIGKILL)
			t.Fatalf("grandchild %d survived Stop", gc)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Stop is safe to call again.
	if err := p.Stop(time.Millisecond); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"A=1", "B=2", "PATH=/bin"}, map[string]string{"B": "3", "C": "4"})
	want := "A=1 PATH=/bin B=3 C=4"
	if strings.Join(got, " ") != want {
		t.Errorf("mergeEnv = %v, want %s", got, want)
	}
}
