package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Support is what this machine offers for sandboxing.
type Support struct {
	ABI      int   // Landlock ABI version; 0 without Landlock
	ABIErr   error // why there is no Landlock
	NetNS    bool  // a child may get a user and network namespace of its own
	NetNSErr error // why not
	// Thread: a child can be started from a restricted thread of the proxy (the fast
	// start); else every start goes through the launcher. ThreadNetNS: it can be given
	// its namespaces that way too. ThreadLoopback: and its lo brought up, for network
	// "loopback" (else such a child starts through the launcher).
	Thread            bool
	ThreadErr         error // why not
	ThreadNetNS       bool
	ThreadLoopback    bool
	ThreadLoopbackErr error // why not
}

var (
	supportOnce sync.Once
	support     Support
)

// Probe returns what this machine offers, found once per process: the Landlock ABI
// version, and whether a child can be started from a restricted thread and in new user
// and network namespaces. Both are tried with a real child (the launcher in probe mode,
// which exits at once), so that a sysctl, an LSM or a seccomp filter that forbids them is
// seen; in the usual case one child tries both.
func Probe() Support {
	supportOnce.Do(func() {
		// The os package checks once per process whether pidfds work, on the first
		// process it starts or finds; done first on a restricted thread, the check could
		// fail there (signals to itself) and turn pidfds off for the whole proxy.
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Release()
		}
		support.ABI, support.ABIErr = landlockABI()
		if support.ABI < 1 {
			support.ThreadErr = support.ABIErr
			support.NetNSErr = probeLauncherNetNS()
			support.NetNS = support.NetNSErr == nil
			return
		}
		if support.ThreadLoopbackErr = injectSupported(); support.ThreadLoopbackErr == nil {
			if support.ThreadLoopbackErr = probeThread(true, true); support.ThreadLoopbackErr == nil {
				support.Thread, support.ThreadNetNS, support.ThreadLoopback, support.NetNS = true, true, true, true
				return
			}
		}
		if probeThread(true, false) == nil {
			support.Thread, support.ThreadNetNS, support.NetNS = true, true, true
			return
		}
		support.ThreadErr = probeThread(false, false)
		support.Thread = support.ThreadErr == nil
		support.NetNSErr = probeLauncherNetNS()
		support.NetNS = support.NetNSErr == nil
	})
	return support
}

// probeThread starts the launcher in probe mode from a restricted thread, in new user and
// network namespaces when ns is set, with its lo brought up when loopback is. The
// restriction is a real Landlock domain that denies only what no probe does (making a
// block device).
func probeThread(ns, loopback bool) error {
	cmd := probeCommand()
	life, err := newLifeline()
	if err != nil {
		return err
	}
	defer life.Close()
	cmd.ExtraFiles = []*os.File{life.r}
	if ns {
		threadNamespaces(cmd.SysProcAttr, loopback)
	}
	err = startOnThread(cmd, &launchSpec{HandledFS: unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK, Loopback: loopback}, life, ns)
	if cmd.Process != nil {
		if werr := cmd.Wait(); err == nil && werr != nil {
			err = fmt.Errorf("the probe child: %w", werr)
		}
	}
	if err != nil {
		what := "starting a child from a restricted thread"
		if loopback {
			what += " with its lo up"
		} else if ns {
			what += " in new user and network namespaces"
		} else if errors.Is(err, unix.EPERM) {
			err = fmt.Errorf("%w (PTRACE_TRACEME is refused: kernel.yama.ptrace_scope 2 or 3, or a seccomp or LSM rule)", err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// probeLauncherNetNS starts the launcher in probe mode in new user and network namespaces.
func probeLauncherNetNS() error {
	cmd := probeCommand()
	userNamespace(cmd.SysProcAttr, false)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("starting a child in new user and network namespaces: %v %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func probeCommand() *exec.Cmd {
	cmd := exec.Command(LauncherPath())
	cmd.Args = []string{"mcp-proxy-sandbox-probe"}
	cmd.Env = append(os.Environ(), envMarker+"="+probeMarker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// Check returns an error naming what this machine lacks to enforce p, or nil.
func Check(p *Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	s := Probe()
	if s.ABI < 1 {
		return fmt.Errorf("sandbox cannot be enforced: %v", s.ABIErr)
	}
	switch p.mode() {
	case NetworkNone, NetworkPorts:
		if s.ABI < 4 {
			return fmt.Errorf("sandbox network %q cannot be enforced: it needs Landlock ABI 4 (TCP rules, Linux 6.7), this kernel has ABI %d",
				p.mode(), s.ABI)
		}
	case NetworkLoopback:
		if !s.NetNS {
			return fmt.Errorf("sandbox network %q cannot be enforced: it needs a network namespace of its own: %v", p.mode(), s.NetNSErr)
		}
	}
	return nil
}

// netNS reports whether a start under p gets its own network namespace.
func netNS(p *Policy) bool {
	m := p.mode()
	return m == NetworkLoopback || (m == NetworkNone && Probe().NetNS)
}

// startsOnThread reports whether a start under p is a thread start, and if not, why.
func startsOnThread(p *Policy) (bool, string) {
	s := Probe()
	switch {
	case os.Getenv(LauncherEnv) != "":
		return false, LauncherEnv + " is set"
	case !s.Thread:
		return false, s.ThreadErr.Error()
	case netNS(p) && !s.ThreadNetNS:
		return false, "a thread start cannot make the namespaces here"
	case p.mode() == NetworkLoopback && !s.ThreadLoopback:
		return false, "network loopback: lo cannot be brought up in the child from a restricted thread here: " + s.ThreadLoopbackErr.Error()
	}
	return true, ""
}

// Explain returns, one item a line, what will be enforced on this machine when command
// starts under p with env (KEY=value) added to the proxy's environment: the Landlock ABI,
// how the child is started, the network mode and namespace, and the filesystem rules
// found for the runtime.
func Explain(p *Policy, command []string, env []string) ([]string, error) {
	if len(command) == 0 {
		return nil, errors.New("empty command")
	}
	env = append(os.Environ(), env...)
	path := lookPath(command[0], lookupEnv(env, "PATH"))
	spec, err := plan(p, path, command, env)
	if err != nil {
		return nil, err
	}
	s := Probe()
	start := "started from a restricted thread of the proxy"
	if p.mode() == NetworkLoopback {
		start += ", which brings up lo in the stopped child and empties its capabilities before it runs"
	}
	if ok, why := startsOnThread(p); !ok {
		start = fmt.Sprintf("launcher %s (%s)", LauncherPath(), why)
	}
	lines := []string{fmt.Sprintf("landlock ABI %d, no_new_privs, no capabilities; %s", s.ABI, start)}
	net := p.mode()
	switch net {
	case NetworkNone:
		net += ": Landlock denies TCP bind and connect"
	case NetworkPorts:
		net = fmt.Sprintf("TCP connect to ports %v on any host; no TCP bind; UDP not restricted", p.Ports)
	case NetworkAny:
		net += ": not restricted"
	}
	if netNS(p) {
		net += "; own network namespace (yes)"
	} else {
		net += "; own network namespace (no"
		if p.mode() == NetworkNone {
			net += fmt.Sprintf(": %v", s.NetNSErr)
		}
		net += ")"
	}
	lines = append(lines, "network "+net)
	if spec.Scoped != 0 {
		lines = append(lines, "scoped: abstract unix sockets and signals stay inside the sandbox")
	} else {
		lines = append(lines, fmt.Sprintf("scoped: no (needs Landlock ABI 6, this kernel has %d)", s.ABI))
	}
	if path == "" {
		lines = append(lines, fmt.Sprintf("executable %s: not found on PATH here, so the files of its runtime are not listed", command[0]))
	}
	lines = append(lines, "write <private temporary directory> (TMPDIR)")
	if offlineNpm(p, path, command, env) {
		lines = append(lines, "npm_config_offline=true (npm and npx use their cache only)")
	}
	return append(lines, describeRules(spec.Rules)...), nil
}
