//go:build linux

package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/sandbox"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// BenchmarkSandboxedStart is what a sandbox adds to a child's start: each iteration
// starts /bin/cat, writes one message and reads it back (the child is up and serving),
// then stops it outside the timer. "plain" is the baseline. The others add no_new_privs,
// no capabilities and the Landlock ruleset of the runtime's files:
//
//   - thread-*: started from a restricted thread of the proxy (the default), with network
//     "any" (no namespaces), "none" (a user and a network namespace as well) and
//     "loopback" (those, and lo brought up by system calls the thread injects in the
//     stopped child);
//   - launcher-*: through mcp-proxy-sandbox (built here, as installed next to mcp-proxy),
//     as every start was before (it brings lo up from inside for "loopback");
//   - self-any: through this test binary itself (it links every package the proxy does,
//     so its initialization costs what the proxy's own would, the launcher's fallback).
//
// The figure is the difference between a sandboxed sub-benchmark's ns/op and plain's in
// the same run. kernel-netns is what the kernel's user and network namespaces cost alone:
// the same start and echo, unsandboxed, with exec.Cmd (uid and gid mapped by Go), against
// kernel-plain, the same without namespaces. cpu-ns/op is this process's CPU time per start and stop (the proxy's
// side: the fork, the restriction, the namespace's creation), child-cpu-ns/op the
// children's (the launcher's runtime, cat). The kernel tears a network namespace down
// in a worker thread of its own, which neither counts.
func BenchmarkSandboxedStart(b *testing.B) {
	launcher := filepath.Join(b.TempDir(), "mcp-proxy-sandbox")
	if out, err := exec.Command("go", "build", "-o", launcher, "../mcp-proxy-sandbox").CombinedOutput(); err != nil {
		b.Fatalf("building the launcher: %v\n%s", err, out)
	}
	for _, bc := range []struct {
		name     string
		policy   *sandbox.Policy
		launcher string // "" for the thread start
	}{
		{"plain", nil, ""},
		{"thread-any", &sandbox.Policy{Network: sandbox.NetworkAny}, ""},
		{"thread-none", &sandbox.Policy{Network: sandbox.NetworkNone}, ""},
		{"thread-loopback", &sandbox.Policy{Network: sandbox.NetworkLoopback}, ""},
		{"launcher-any", &sandbox.Policy{Network: sandbox.NetworkAny}, launcher},
		{"launcher-none", &sandbox.Policy{Network: sandbox.NetworkNone}, launcher},
		{"launcher-loopback", &sandbox.Policy{Network: sandbox.NetworkLoopback}, launcher},
		{"self-any", &sandbox.Policy{Network: sandbox.NetworkAny}, "/proc/self/exe"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.policy != nil {
				if err := sandbox.Check(bc.policy); err != nil {
					b.Skipf("this machine cannot sandbox: %v", err)
				}
				if s := sandbox.Probe(); bc.launcher == "" && (!s.Thread || (bc.policy.Network == sandbox.NetworkNone && !s.ThreadNetNS)) {
					b.Skipf("no thread start here: %v", s.ThreadErr)
				}
				if s := sandbox.Probe(); bc.launcher == "" && bc.policy.Network == sandbox.NetworkLoopback && !s.ThreadLoopback {
					b.Skipf("no thread start for loopback here: %v", s.ThreadLoopbackErr)
				}
				if bc.launcher != "" {
					b.Setenv(sandbox.LauncherEnv, bc.launcher)
				}
			}
			msg := jsonrpc.NewNotification("ping", nil)
			cpu0, child0 := cpuTimes()
			for b.Loop() {
				p, err := transport.StartProcess(transport.ProcessSpec{Command: []string{"/bin/cat"}, Sandbox: bc.policy, Name: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := p.ReadLine(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := p.Stop(5 * time.Second); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			cpu, child := cpuTimes()
			b.ReportMetric(float64(cpu-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(child-child0)/float64(b.N), "child-cpu-ns/op")
		})
	}
	for _, ns := range []bool{false, true} {
		name := "kernel-plain"
		if ns {
			name = "kernel-netns"
		}
		b.Run(name, func(b *testing.B) {
			if s := sandbox.Probe(); ns && !s.NetNS {
				b.Skipf("no namespaces here: %v", s.NetNSErr)
			}
			cpu0, child0 := cpuTimes()
			for b.Loop() {
				startEcho(b, ns)
			}
			cpu, child := cpuTimes()
			b.ReportMetric(float64(cpu-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(child-child0)/float64(b.N), "child-cpu-ns/op")
		})
	}
}

// startEcho starts /bin/cat with exec.Cmd, in new user and network namespaces when ns is
// set, writes a line and reads it back, then stops it outside the timer.
func startEcho(b *testing.B, ns bool) {
	cmd := exec.Command("/bin/cat")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if ns {
		uid, gid := os.Getuid(), os.Getgid()
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if _, err := in.Write([]byte("{}\n")); err != nil {
		b.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	in.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
}

// cpuTimes returns the CPU time (user and system) of this process and of its reaped
// children.
func cpuTimes() (self, children time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return self, time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
