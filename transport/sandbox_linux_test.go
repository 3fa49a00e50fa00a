package transport

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/sandbox"
)

// sandboxFixture is a directory tree for the sandbox tests: a readable directory, a
// writable one, and a secret one outside both, plus a loopback listener on the host.
type sandboxFixture struct {
	readable, writable, secret string
	listener                   net.Listener
}

func newSandboxFixture(t *testing.T) *sandboxFixture {
	t.Helper()
	root := t.TempDir()
	f := &sandboxFixture{
		readable: filepath.Join(root, "readable"),
		writable: filepath.Join(root, "writable"),
		secret:   filepath.Join(root, "secret"),
	}
	for _, d := range []string{f.readable, f.writable, f.secret} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "file.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.listener = listen(t)
	return f
}

// listen opens a loopback listener that accepts and closes connections until the test ends.
func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l
}

// runSandboxed starts the test binary as a sandboxed child doing ops, and returns each
// "who op" with its result, for the child and the grandchild it starts.
func runSandboxed(t *testing.T, policy *sandbox.Policy, ops []string) map[string]string {
	t.Helper()
	var stderr []string
	p, err := StartProcess(ProcessSpec{
		Command: []string{os.Args[0]},
		Env:     map[string]string{"TRANSPORT_TEST_CHILD": "sandboxed", "SANDBOX_OPS": strings.Join(ops, ";")},
		Sandbox: policy,
		Name:    "test",
		Stderr:  func(l string) { stderr = append(stderr, l) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	got := map[string]string{}
	for {
		line, err := p.ReadLine()
		if err != nil {
			t.Fatalf("reading the child's report: %v (so far %v; stderr %q)", err, got, stderr)
		}
		if string(line) == "done" {
			break
		}
		who, rest, _ := strings.Cut(string(line), " ")
		op, result, _ := strings.Cut(rest, " ")
		got[who+" "+op] = result
	}
	t.Logf("sandboxed under %+v: %v", *policy, got)
	if got["child spawn"] != "ok" {
		t.Fatalf("the child could not run the grandchild: %s", got["child spawn"])
	}
	return got
}

// expect checks each op's result, for both the child and the grandchild: want "ok", or
// a substring of the error ("" for any error).
func expect(t *testing.T, got map[string]string, op, want string) {
	t.Helper()
	for _, who := range []string{"child", "grandchild"} {
		res, ok := got[who+" "+op]
		switch {
		case !ok:
			t.Errorf("%s did not report %s", who, op)
		case want == "ok" && res != "ok":
			t.Errorf("%s %s: %s, want it allowed", who, op, res)
		case want != "ok" && (res == "ok" || !strings.Contains(res, want)):
			t.Errorf("%s %s: %s, want it denied (%q)", who, op, res, want)
		}
	}
}

func requireSandbox(t *testing.T, p *sandbox.Policy) {
	t.Helper()
	if err := sandbox.Check(p); err != nil {
		t.Skipf("this machine cannot sandbox: %v", err)
	}
}

// TestSandboxFilesystemAndNoNetwork runs each start the proxy can use: from a restricted
// thread of its own (the default where the probe found it possible) and through the
// launcher (this test binary: package sandbox's init).
func TestSandboxFilesystemAndNoNetwork(t *testing.T) {
	t.Run("thread", func(t *testing.T) {
		if s := sandbox.Probe(); !s.Thread {
			t.Skipf("no thread start here: %v", s.ThreadErr)
		}
		testSandboxFilesystemAndNoNetwork(t)
	})
	t.Run("launcher", func(t *testing.T) {
		t.Setenv(sandbox.LauncherEnv, "/proc/self/exe")
		testSandboxFilesystemAndNoNetwork(t)
	})
}

func testSandboxFilesystemAndNoNetwork(t *testing.T) {
	f := newSandboxFixture(t)
	policy := &sandbox.Policy{Read: []string{f.readable}, Write: []string{f.writable}, Network: sandbox.NetworkNone}
	requireSandbox(t, policy)
	ops := []string{
		"read:" + filepath.Join(f.readable, "file.txt"),
		"read:" + filepath.Join(f.writable, "file.txt"),
		"read:" + filepath.Join(f.secret, "file.txt"),
		"read:/etc/shadow",
		"write:" + filepath.Join(f.writable, "new.txt"),
		"write:" + filepath.Join(f.readable, "new.txt"),
		"write:" + filepath.Join(f.secret, "new.txt"),
		"tmp",
		"connect:" + f.listener.Addr().String(),
		"selfloop",
		fmt.Sprintf("signal:%d", os.Getpid()),
		fmt.Sprintf("ids:%d:%d", os.Getuid(), os.Getgid()),
	}

	// Unconfined, every file and network operation succeeds: the denials below are the
	// sandbox's. (Signals stay scoped.)
	if os.Getuid() == 0 {
		free := runSandboxed(t, &sandbox.Policy{Read: []string{"/"}, Write: []string{"/"}, Network: sandbox.NetworkAny}, ops)
		for _, op := range ops {
			if !strings.HasPrefix(op, "signal:") {
				expect(t, free, op, "ok")
			}
		}
		for _, d := range []string{f.readable, f.writable, f.secret} {
			os.Remove(filepath.Join(d, "new.txt"))
		}
	}

	got := runSandboxed(t, policy, ops)
	expect(t, got, ops[0], "ok")
	expect(t, got, ops[1], "ok")
	expect(t, got, ops[2], "permission denied")
	expect(t, got, ops[3], "permission denied")
	expect(t, got, ops[4], "ok")
	expect(t, got, ops[5], "permission denied")
	expect(t, got, ops[6], "permission denied")
	expect(t, got, "tmp", "ok")
	expect(t, got, ops[8], "")
	expect(t, got, "selfloop", "")
	// No thread of the proxy takes a signal from the sandbox: Landlock's scoping (ABI 6)
	// keeps signals inside it, and the thread that started the child, which is inside,
	// was gone before the child ran.
	if sandbox.Probe().ABI >= 6 {
		expect(t, got, ops[10], "operation not permitted")
	}
	// In its own user namespace the child keeps the proxy's uid and gid (mapped).
	expect(t, got, ops[11], "ok")
	if _, err := os.Stat(filepath.Join(f.secret, "new.txt")); err == nil {
		t.Error("a file was created in the secret directory")
	}
	if n := restrictedThreads(t); n > 0 {
		t.Errorf("%d threads of the proxy have no_new_privs after the start: the restricted thread outlived it", n)
	}
}

// restrictedThreads counts this process's threads with no_new_privs set (only a thread
// restricted for a sandboxed start has it).
func restrictedThreads(t *testing.T) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "status"))
		if err != nil {
			continue // ended meanwhile
		}
		if strings.Contains(string(b), "\nNoNewPrivs:\t1\n") {
			n++
		}
	}
	return n
}

func TestSandboxNetworkModes(t *testing.T) {
	f := newSandboxFixture(t)
	other := listen(t)
	port := uint16(f.listener.Addr().(*net.TCPAddr).Port)
	read := []string{f.readable}
	connect, connectOther := "connect:"+f.listener.Addr().String(), "connect:"+other.Addr().String()
	ops := []string{connect, connectOther, "selfloop"}

	t.Run("any", func(t *testing.T) {
		p := &sandbox.Policy{Read: read, Network: sandbox.NetworkAny}
		requireSandbox(t, p)
		got := runSandboxed(t, p, ops)
		expect(t, got, connect, "ok")
		expect(t, got, connectOther, "ok")
		expect(t, got, "selfloop", "ok")
	})
	t.Run("ports", func(t *testing.T) {
		p := &sandbox.Policy{Read: read, Network: sandbox.NetworkPorts, Ports: []uint16{port}}
		requireSandbox(t, p)
		got := runSandboxed(t, p, ops)
		expect(t, got, connect, "ok")
		expect(t, got, connectOther, "permission denied")
		expect(t, got, "selfloop", "permission denied") // its own ephemeral port is not in the list
	})
	// "loopback" from a restricted thread (which brings up the child's lo from outside
	// it) where the probe found that possible, and through the launcher (which brings it
	// up from inside).
	loopback := func(t *testing.T) {
		p := &sandbox.Policy{Read: read, Network: sandbox.NetworkLoopback}
		requireSandbox(t, p)
		got := runSandboxed(t, p, ops)
		expect(t, got, connect, "connection refused") // the host's listener is in another namespace
		expect(t, got, connectOther, "connection refused")
		expect(t, got, "selfloop", "ok")
	}
	t.Run("loopback", func(t *testing.T) {
		if s := sandbox.Probe(); !s.ThreadLoopback {
			t.Logf("through the launcher: no thread start for loopback here: %v", s.ThreadLoopbackErr)
		}
		loopback(t)
	})
	t.Run("loopback-launcher", func(t *testing.T) {
		t.Setenv(sandbox.LauncherEnv, "/proc/self/exe")
		loopback(t)
	})
}

// A policy that cannot be applied refuses the start, naming what is wrong; nothing runs.
func TestSandboxFailsClosed(t *testing.T) {
	requireSandbox(t, &sandbox.Policy{})
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		policy sandbox.Policy
		want   string
	}{
		{sandbox.Policy{Read: []string{missing}}, "opening sandbox path " + missing + " (read)"},
		{sandbox.Policy{Write: []string{"relative"}}, `sandbox path "relative" is not absolute`},
		{sandbox.Policy{Network: "some"}, `unknown sandbox network "some"`},
	} {
		_, err := StartProcess(ProcessSpec{
			Command: []string{os.Args[0]},
			Env:     map[string]string{"TRANSPORT_TEST_CHILD": "echo"},
			Sandbox: &tc.policy,
		})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("policy %+v: err = %v, want %q", tc.policy, err, tc.want)
		}
	}
}

// sandboxParent is a proxy of its own for TestSandboxedChildDiesWithProxy: it starts a
// sandboxed "stubborn" child (which ignores SIGTERM and stdin EOF and starts a grandchild
// in its process group), prints "CHILD GRANDCHILD" and waits to be killed.
func sandboxParent() {
	p, err := StartProcess(ProcessSpec{
		Command: []string{os.Args[0]},
		Env:     map[string]string{"TRANSPORT_TEST_CHILD": "stubborn"},
		Sandbox: &sandbox.Policy{Network: sandbox.NetworkAny},
		Name:    "parent-test",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	line, err := p.ReadLine()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d %s\n", p.Pid(), strings.TrimSpace(string(line)))
	time.Sleep(time.Hour)
}

// A sandboxed child and what it started in its process group die with the proxy, even
// when the proxy is killed with SIGKILL and the child ignores its stdin's end. The
// private TMPDIRs such a proxy leaves are removed by the next proxy's first sandboxed
// start.
func TestSandboxedChildDiesWithProxy(t *testing.T) {
	requireSandbox(t, &sandbox.Policy{Network: sandbox.NetworkAny})
	t.Run("thread", func(t *testing.T) {
		if s := sandbox.Probe(); !s.Thread {
			t.Skipf("no thread start here: %v", s.ThreadErr)
		}
		testSandboxedChildDiesWithProxy(t, nil)
	})
	t.Run("launcher", func(t *testing.T) {
		testSandboxedChildDiesWithProxy(t, []string{sandbox.LauncherEnv + "=/proc/self/exe"})
	})
}

func testSandboxedChildDiesWithProxy(t *testing.T, env []string) {
	tmp := t.TempDir()
	tmpdirs := func() []string {
		m, _ := filepath.Glob(filepath.Join(tmp, "mcp-proxy-sandboxed-*"))
		return m
	}
	first, pids := startSandboxParent(t, tmp, env)
	killed := tmpdirs()
	if len(killed) != 1 {
		t.Fatalf("private TMPDIRs while the proxy runs: %v, want 1", killed)
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("process %d (of %v) outlived the proxy", pid, pids)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	second, pids := startSandboxParent(t, tmp, env)
	defer func() {
		second.Process.Kill()
		second.Wait()
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	if left := tmpdirs(); len(left) != 1 || left[0] == killed[0] {
		t.Errorf("private TMPDIRs after the next proxy's start: %v; want its child's only, not %s", left, killed[0])
	}
}

// startSandboxParent starts the test binary as a proxy of its own (sandboxParent) with
// TMPDIR tmp and env, and returns it and the pids it reports: its sandboxed child's and
// grandchild's.
func startSandboxParent(t *testing.T, tmp string, env []string) (*exec.Cmd, []int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), "TRANSPORT_TEST_CHILD=sandbox-parent", "TMPDIR="+tmp), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the proxy's report: %q %v", line, err)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("the proxy's report: %q", line)
		}
		pids = append(pids, pid)
	}
	return cmd, pids
}

// alive reports whether pid runs (a zombie, or a process gone, does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i:], ") Z")
}

// signalThreads sends signal 0 to each thread of process pid (the thread ids from pid to
// this process's own: the threads it had when this process was made) and returns nil as
// soon as one takes it, else the last error other than ESRCH (no such thread).
func signalThreads(arg string) error {
	pid, err := strconv.Atoi(arg)
	if err != nil {
		return err
	}
	last := error(syscall.ESRCH)
	for tid := pid; tid < os.Getpid(); tid++ {
		switch err := syscall.Tgkill(pid, tid, 0); err {
		case nil:
			return nil
		case syscall.ESRCH:
		default:
			last = err
		}
	}
	return last
}

// Many sandboxed starts in a row each serve and stop cleanly, and leave nothing behind:
// no file descriptor, no restricted thread, no private TMPDIR. (A thread start makes the
// proxy take SIGCHLDs while its child lives: the child's reaper must not take the
// interrupted check of its pidfd for its exit, as it once did, about one start in a
// thousand here.)
func TestSandboxedStartsLeakNothing(t *testing.T) {
	p := &sandbox.Policy{Network: sandbox.NetworkAny}
	requireSandbox(t, p)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	for i := range 100 {
		// cat: the test binary built with -race takes a second to start.
		proc, err := StartProcess(ProcessSpec{Command: []string{"/bin/cat"}, Sandbox: p, Name: "row"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := proc.stdin.Write([]byte("{}\n")); err != nil {
			t.Fatal(err)
		}
		if line, err := proc.ReadLine(); err != nil || string(line) != "{}" {
			<-proc.Done()
			t.Fatalf("start %d: read %q, %v (exit %v)", i, line, err, proc.ExitErr())
		}
		if err := proc.Stop(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		if err := proc.ExitErr(); err != nil {
			t.Fatalf("start %d: exit %v", i, err)
		}
	}
	// A stopped child's stdout is closed for good 2 s after its exit (a descendant that
	// left its group could hold it open): wait for that, then count.
	for deadline := time.Now().Add(10 * time.Second); fds() > before && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if after := fds(); after > before {
		t.Errorf("%d file descriptors open after 100 sandboxed starts, %d before", after, before)
	}
	if n := restrictedThreads(t); n > 0 {
		t.Errorf("%d restricted threads left", n)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
}
