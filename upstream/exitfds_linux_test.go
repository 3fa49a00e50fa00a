package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/transport"
	"github.com/rs/zerolog"
)

// Two more modes of the test binary as a child (see coverServer), checked before
// supervise_cover_test.go's init (files initialize in name order): "escape" is "crash"
// that first starts a descendant in a session of its own, out of the child's process
// group (which the proxy kills when the child dies), holding the child's stdout open;
// that descendant is "hold".
func init() {
	switch os.Getenv("UPSTREAM_COVER_SERVER") {
	case "hold":
		os.Exit(holdStdout())
	case "escape":
		if err := startHolder(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		os.Exit(coverServer("crash"))
	}
}

// startHolder starts the "hold" descendant with the child's stdout, stdin and stderr
// elsewhere, in a new session.
func startHolder() error {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "UPSTREAM_COVER_SERVER=hold")
	cmd.Stdout = os.Stdout // the point: the child's stdout outlives the child
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the holder: %w", err)
	}
	return cmd.Process.Release()
}

// holdStdout writes its pid to $UPSTREAM_COVER_PIDFILE (for the test to end it) and
// keeps its stdout open until killed, or for a minute at most.
func holdStdout() int {
	if err := os.WriteFile(os.Getenv("UPSTREAM_COVER_PIDFILE"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return 1
	}
	time.Sleep(time.Minute)
	return 0
}

// TestKilledChildLeavesNoDescriptor: a child killed with SIGKILL while it serves (what
// mcp-bench's chaos mode does) leaves no descriptor of the proxy's behind once the
// supervisor has handled its death: not its stdin, stdout or stderr pipe, not its pidfd.
//
// The supervisor learns of a death two ways, the child's exit (its pidfd) and the end of
// its stdout, in either order; the exit first when nobody was reading stdout at that
// moment, which under load happens now and then. Here a descendant that escaped the
// child's process group holds stdout open, so the exit always comes first (stdout is
// closed by the proxy 2 s later). The garbage collector is off: an *os.File nobody
// closed is otherwise closed by its finalizer at some later collection, which made the
// chaos test's descriptor count differ only now and then.
func TestKilledChildLeavesNoDescriptor(t *testing.T) {
	noLeaks(t)
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	pidFile := filepath.Join(t.TempDir(), "holder.pid")
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(string(b)); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	spec := childSpec("escape")
	spec.Env["UPSTREAM_COVER_PIDFILE"] = pidFile
	events := make(eventLog, 256)
	spec.Observer = events
	u := New(spec, zerolog.Nop(), newRecEvents())
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitFor)
	defer cancel()
	u.Start(ctx)

	events.next(t, EventReady)
	if _, err := u.Call(ctx, &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)}); err != nil {
		t.Fatalf("the call before the kill: %v", err)
	}
	u.mu.Lock()
	p := u.cur.proc.(*transport.Process)
	u.mu.Unlock()
	pid := p.Pid()
	pipes := childPipes(t, pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if e := events.next(t, EventExited); !strings.Contains(fmt.Sprint(e.Err), "upstream \"child\" exited") {
		t.Fatalf("the end of the child's output was seen before its exit (%v): the test tests nothing", e.Err)
	}
	// The supervisor has handled the death. Its stdin, stderr and pidfd must be closed
	// now; its stdout may still be closing (the proxy's 2 s grace for a descendant's
	// output ends with a Close that the reader's error can overtake by a moment).
	for _, fd := range fdsOf(t, pid, pipes) {
		if !strings.Contains(fd, "its stdout") {
			t.Errorf("the proxy still holds %s of the dead child %d", fd, pid)
		}
	}
	for deadline := time.Now().Add(waitFor); ; time.Sleep(10 * time.Millisecond) {
		left := fdsOf(t, pid, pipes)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy still holds %s of the dead child %d after %s", strings.Join(left, ", "), pid, waitFor)
		}
	}
	events.next(t, EventReady) // the replacement serves
}

// childPipes returns the "pipe:[inode]" of the child's stdin, stdout and stderr, by
// target.
func childPipes(t *testing.T, pid int) map[string]string {
	t.Helper()
	pipes := map[string]string{}
	for fd, name := range []string{"stdin", "stdout", "stderr"} {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(target, "pipe:") {
			t.Fatalf("the child's %s is %s, not a pipe", name, target)
		}
		pipes[target] = name
	}
	return pipes
}

// fdsOf lists this process's descriptors that are one of the pipes or a pidfd of pid.
func fdsOf(t *testing.T, pid int, pipes map[string]string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the directory's own descriptor, closed by now
		}
		if name, ok := pipes[target]; ok {
			left = append(left, fmt.Sprintf("fd %s (its %s, %s)", e.Name(), name, target))
			continue
		}
		if target != "anon_inode:[pidfd]" {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err == nil && strings.Contains(string(info), fmt.Sprintf("\nPid:\t%d\n", pid)) {
			left = append(left, fmt.Sprintf("fd %s (its pidfd)", e.Name()))
		}
	}
	return left
}
