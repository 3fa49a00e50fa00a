// Package sandbox confines an upstream's child process on Linux: Landlock limits what it
// may read, write and execute and which TCP ports it may bind or connect to, no_new_privs
// and an emptied capability set keep it from gaining privileges, and a network namespace
// of its own (in a user namespace of its own) takes the rest of the network away. The
// restriction is in place before the configured command's first instruction, so every
// process it starts (an npx wrapper and the server it runs) inherits it.
//
// Go cannot run code in a child between fork and exec, but a child inherits the Landlock
// domain, no_new_privs and capabilities of the thread that forked it: so the proxy
// restricts one of its own OS threads and starts the child from it (thread_linux.go).
// The child is held stopped at its exec until that thread, which is inside the sandbox,
// is gone, and a lifeline pipe kills its process group when the proxy ends. For network
// "loopback", whose new namespace's lo can only be brought up from inside, that thread
// makes the stopped child run the system calls that do it, by ptrace, before the command
// runs (inject_linux.go; x86-64). Where that cannot be done (a kernel or policy that
// refuses ptrace; "loopback" elsewhere than on x86-64, or where the probe found the
// injection refused), the child is started through a launcher: mcp-proxy-sandbox, or the proxy's own executable re-executed, with the
// policy in an environment variable. This package's init notices the variable, restricts
// its own thread and executes the real command, before main and before most of the
// program's packages are initialized; without the variable it does nothing. So any
// program that links this package (the proxy, a test binary) is its own launcher. The
// launcher reports a failure on a pipe before it exits, so that the start returns a clear
// error and nothing unconfined ever runs.
//
// The package fails closed: a policy this kernel cannot enforce is refused (Check) with
// an error naming what is missing, never run with less. It must not import the rest of
// the proxy: transport and the command use it.
package sandbox

import (
	"fmt"
	"strings"
)

// Network modes of a Policy.
const (
	// NetworkNone: no network at all. Landlock denies every TCP bind and connect, and the
	// child gets a network namespace of its own with no interface up (UDP, raw sockets
	// and the host's loopback listeners are gone too) where the kernel allows it.
	NetworkNone = "none"
	// NetworkLoopback: a network namespace of its own whose loopback interface is up,
	// so the child may talk to itself (and its own children) on 127.0.0.1; the host's
	// network, its loopback listeners included, is unreachable.
	NetworkLoopback = "loopback"
	// NetworkAny: no network restriction.
	NetworkAny = "any"
	// NetworkPorts: TCP connect only to Ports (on any host), no TCP bind. Landlock
	// restricts TCP by port only; UDP (DNS) is not restricted.
	NetworkPorts = "ports"
)

// Policy is what an upstream's sandbox block asks for. The runtime's own needs (the
// command's executable and interpreter, shared libraries, a private temporary directory,
// the npm cache for npx, and so on) are added when the child is started; see Plan.
type Policy struct {
	Read    []string // absolute paths the child may read, list and execute beneath
	Write   []string // absolute paths the child may also create, write, rename and remove beneath
	Network string   // NetworkNone (also ""), NetworkLoopback, NetworkAny or NetworkPorts
	Ports   []uint16 // for NetworkPorts: the TCP ports it may connect to
}

// mode returns the policy's network mode, NetworkNone for "".
func (p *Policy) mode() string {
	if p.Network == "" {
		return NetworkNone
	}
	return p.Network
}

// Validate checks the policy's own shape: absolute paths and a known network mode.
func (p *Policy) Validate() error {
	for _, l := range [][]string{p.Read, p.Write} {
		for _, s := range l {
			if !strings.HasPrefix(s, "/") {
				return fmt.Errorf("sandbox path %q is not absolute", s)
			}
		}
	}
	switch p.mode() {
	case NetworkNone, NetworkLoopback, NetworkAny:
		if len(p.Ports) > 0 {
			return fmt.Errorf("sandbox ports are given with network %q", p.mode())
		}
	case NetworkPorts:
		if len(p.Ports) == 0 {
			return fmt.Errorf("sandbox network lists no port")
		}
	default:
		return fmt.Errorf("unknown sandbox network %q", p.Network)
	}
	return nil
}
