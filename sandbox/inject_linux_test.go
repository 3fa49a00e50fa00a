package sandbox

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// requireThreadLoopback skips where a "loopback" child cannot start from a thread.
func requireThreadLoopback(t *testing.T) {
	t.Helper()
	if s := Probe(); !s.ThreadLoopback {
		t.Skipf("no thread start for network loopback here: %v", s.ThreadLoopbackErr)
	}
}

// catPipes starts nothing: it gives cmd (/bin/cat) pipes, and returns a function that
// writes a line and reads it back.
func catPipes(t *testing.T, cmd *exec.Cmd) func(string) string {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	return func(line string) string {
		if _, err := io.WriteString(in, line+"\n"); err != nil {
			t.Fatalf("writing to cat: %v", err)
		}
		got, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading from cat: %v", err)
		}
		return strings.TrimSuffix(got, "\n")
	}
}

// checkLoopbackChild checks, from outside, that the running child pid has lo up in its
// own network namespace (the kernel lists 127.0.0.1 as a local address only once lo is
// up) and no capabilities.
func checkLoopbackChild(t *testing.T, pid int) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	own, err1 := os.Readlink(dir + "ns/net")
	host, err2 := os.Readlink("/proc/self/ns/net")
	if err1 != nil || err2 != nil || own == host {
		t.Errorf("the child's network namespace %q (%v) is the proxy's %q (%v)", own, err1, host, err2)
	}
	trie, err := os.ReadFile(dir + "net/fib_trie")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(trie), "127.0.0.1") {
		t.Errorf("lo is not up in the child's namespace: fib_trie %q", trie)
	}
	status, err := os.ReadFile(dir + "status")
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
		if want := set + ":\t0000000000000000\n"; !strings.Contains(string(status), want) {
			t.Errorf("the child has capabilities: want %q in\n%s", want, status)
		}
	}
}

// startThreaded starts cmd under p from a restricted thread with namespaces of its own
// (failing the test when it would start otherwise); the test's end kills and reaps it.
func startThreaded(t *testing.T, p *Policy, cmd *exec.Cmd) {
	t.Helper()
	l, err := Prepare(p, cmd, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Cleanup)
	if !l.thread || !l.ns {
		t.Fatalf("not a thread start with namespaces: thread %v ns %v", l.thread, l.ns)
	}
	if err := l.Start(cmd); err != nil {
		if cmd.Process != nil {
			cmd.Wait()
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
}

// A "loopback" child started from a restricted thread runs its command (cat echoes),
// with lo up in a namespace of its own and no capabilities left.
func TestThreadStartLoopback(t *testing.T) {
	requireThreadLoopback(t)
	if os.Getenv(LauncherEnv) != "" {
		t.Skipf("%s is set", LauncherEnv)
	}
	cmd := exec.Command("/bin/cat")
	echo := catPipes(t, cmd)
	startThreaded(t, &Policy{Network: NetworkLoopback}, cmd)
	if got := echo("hello, sandbox"); got != "hello, sandbox" {
		t.Errorf("cat echoed %q", got)
	}
	checkLoopbackChild(t, cmd.Process.Pid)
}

// injectLoopback leaves the child exactly as the exec left it: its registers, the text
// at its entry and the stack below its stack pointer are what they were, and it then
// runs its command as usual. The child here is traced and namespaced as a thread start
// makes it, from an unrestricted thread.
func TestInjectLoopbackRestores(t *testing.T) {
	requireThreadLoopback(t)
	cmd := exec.Command("/bin/cat")
	echo := catPipes(t, cmd)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Ptrace: true}
	threadNamespaces(cmd.SysProcAttr, true)

	type snapshot struct {
		regs  archRegs
		text  [8]byte
		stack [512]byte // the red zone, the scratch memory and more
	}
	take := func(pid int) (s snapshot, err error) {
		if err = getRegs(pid, &s.regs); err != nil {
			return s, err
		}
		tr := &tracee{pid: pid}
		if err = tr.peek(uintptr(regsPC(&s.regs))&^7, s.text[:]); err != nil {
			return s, err
		}
		err = tr.peek(uintptr(regsSP(&s.regs))-uintptr(len(s.stack)), s.stack[:])
		return s, err
	}
	var before, after snapshot
	done := make(chan error, 1)
	go func() {
		// Every ptrace request comes from the tracer thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			done <- err
			return
		}
		pid := cmd.Process.Pid
		err := waitExecStop(pid)
		if err == nil {
			before, err = take(pid)
		}
		if err == nil {
			err = injectLoopback(pid)
		}
		if err == nil {
			after, err = take(pid)
		}
		if err == nil {
			err = unix.PtraceDetach(pid)
		}
		if err != nil {
			cmd.Process.Kill()
		}
		done <- err
	}()
	err := <-done
	if cmd.Process != nil {
		defer func() {
			cmd.Process.Kill()
			cmd.Wait()
		}()
	}
	if err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Errorf("the child's registers, text or stack changed:\nbefore %+v\nafter  %+v", before, after)
	}
	if got := echo("restored"); got != "restored" {
		t.Errorf("cat echoed %q", got)
	}
	checkLoopbackChild(t, cmd.Process.Pid)
}

// A failed injection fails the start, naming the step, and kills the child before it
// runs: here the child lacks CAP_NET_ADMIN (no ambient capability), so SIOCSIFFLAGS is
// refused.
func TestThreadStartLoopbackFailsClosed(t *testing.T) {
	requireThreadLoopback(t)
	cmd := exec.Command("/bin/cat")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	threadNamespaces(cmd.SysProcAttr, false)
	life, err := newLifeline()
	if err != nil {
		t.Fatal(err)
	}
	defer life.Close()
	cmd.ExtraFiles = []*os.File{life.r}
	err = startOnThread(cmd, &launchSpec{HandledFS: unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK, Loopback: true}, life, true)
	if err == nil || !strings.Contains(err.Error(), "bringing up the loopback interface") || !strings.Contains(err.Error(), "SIOCSIFFLAGS: operation not permitted") {
		t.Errorf("err = %v, want SIOCSIFFLAGS refused", err)
	}
	if cmd.Process == nil {
		t.Fatal("no child was made")
	}
	werr := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the child ended with %v, want killed", werr)
	}
}

// A child with namespaces of its own ("none") held every capability of its new user
// namespace up to its exec, so a command with file capabilities kept them through the
// exec (no_new_privs refuses only a gain): the thread start empties the child's sets
// before its first instruction, as the launcher empties its own before the exec.
func TestThreadStartNamespacesNoCapabilities(t *testing.T) {
	if s := Probe(); !s.ThreadNetNS {
		t.Skip("no thread start with namespaces here")
	}
	if os.Getenv(LauncherEnv) != "" {
		t.Skipf("%s is set", LauncherEnv)
	}
	if err := injectSupported(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	capcat := dir + "/cat"
	src, err := os.ReadFile("/bin/cat")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(capcat, src, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("setcap", "cap_net_raw,cap_dac_override+ep", capcat).CombinedOutput(); err != nil {
		t.Skipf("cannot give a file capabilities here: %v %s", err, out)
	}
	cmd := exec.Command(capcat)
	echo := catPipes(t, cmd)
	startThreaded(t, &Policy{Network: NetworkNone, Read: []string{dir}}, cmd)
	if got := echo("hello, sandbox"); got != "hello, sandbox" {
		t.Errorf("cat echoed %q", got)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
		if want := set + ":\t0000000000000000\n"; !strings.Contains(string(status), want) {
			t.Errorf("the child has capabilities: want %q in\n%s", want, status)
		}
	}
}
