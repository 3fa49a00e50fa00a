package transport

import (
	"net"
	"os"
	"path/filepath"
	"strings"
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

func TestSandboxFilesystemAndNoNetwork(t *testing.T) {
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
	}

	// Unconfined, every operation succeeds: the denials below are the sandbox's.
	if os.Getuid() == 0 {
		free := runSandboxed(t, &sandbox.Policy{Read: []string{"/"}, Write: []string{"/"}, Network: sandbox.NetworkAny}, ops)
		for _, op := range ops {
			expect(t, free, op, "ok")
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
	if _, err := os.Stat(filepath.Join(f.secret, "new.txt")); err == nil {
		t.Error("a file was created in the secret directory")
	}
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
	t.Run("loopback", func(t *testing.T) {
		p := &sandbox.Policy{Read: read, Network: sandbox.NetworkLoopback}
		requireSandbox(t, p)
		got := runSandboxed(t, p, ops)
		expect(t, got, connect, "connection refused") // the host's listener is in another namespace
		expect(t, got, connectOther, "connection refused")
		expect(t, got, "selfloop", "ok")
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
