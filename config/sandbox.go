package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Network modes of a sandbox block.
const (
	SandboxNetworkNone     = "none"
	SandboxNetworkLoopback = "loopback"
	SandboxNetworkAny      = "any"
	SandboxNetworkPorts    = "ports" // network given as a list of "*:port"
)

// Sandbox is a command upstream's sandbox block: what its child process (and whatever it
// starts) may read, write and reach on the network, enforced on Linux with Landlock
// (package sandbox). The runtime's own needs are added when the child starts.
type Sandbox struct {
	Read    []string // absolute (relative paths are resolved against the file's directory)
	Write   []string // likewise
	Network string   // SandboxNetworkNone (the default), …Loopback, …Any, or …Ports with Ports
	Ports   []uint16 // for SandboxNetworkPorts: TCP ports the child may connect to, on any host
	// DeclRange is where the block is.
	DeclRange hcl.Range
}

// rawSandbox is an upstream's sandbox block.
type rawSandbox struct {
	Read    *hcl.Attribute `hcl:"read,optional"`
	Write   *hcl.Attribute `hcl:"write,optional"`
	Network *hcl.Attribute `hcl:"network,optional"`

	DefRange hcl.Range `hcl:",def_range"`
}

// decodeSandbox evaluates and validates an upstream's sandbox block (at most one, and
// only for a command upstream).
func decodeSandbox(e *evaluator, raws []rawSandbox, isCommand bool, baseDir string) *Sandbox {
	if len(raws) == 0 {
		return nil
	}
	for _, r := range raws[1:] {
		e.blockErrorf(r.DefRange, "Duplicate sandbox block", "An upstream has at most one \"sandbox\" block; the first is at %s.",
			position(raws[0].DefRange))
	}
	raw := &raws[0]
	if !isCommand {
		e.blockErrorf(raw.DefRange, "Unexpected block",
			"A \"sandbox\" block applies to upstreams with a \"command\" (a child process the proxy starts), not to a \"url\".")
		return nil
	}
	s := &Sandbox{Network: SandboxNetworkNone, DeclRange: raw.DefRange}
	paths := func(attr *hcl.Attribute) []string {
		l, ok := e.stringList(attr)
		if !ok {
			return nil
		}
		out := make([]string, 0, len(l))
		for _, p := range l {
			if p == "" {
				e.errorf(attr, "Invalid sandbox path", "%q lists an empty path.", attr.Name)
				continue
			}
			out = append(out, resolvePath(baseDir, p))
		}
		return out
	}
	s.Read = paths(raw.Read)
	s.Write = paths(raw.Write)
	if raw.Network != nil {
		decodeSandboxNetwork(e, raw.Network, s)
	}
	return s
}

// decodeSandboxNetwork evaluates network: a mode, or a list of "*:port".
func decodeSandboxNetwork(e *evaluator, attr *hcl.Attribute, s *Sandbox) {
	if v, diags := attr.Expr.Value(e.ctx); !diags.HasErrors() && (v.Type().IsTupleType() || v.Type().IsListType()) {
		l, ok := e.stringList(attr)
		if !ok {
			return
		}
		if len(l) == 0 {
			e.errorf(attr, "Invalid sandbox network", "An empty list allows no port: write network = %q instead.", SandboxNetworkNone)
			return
		}
		for _, it := range l {
			port, msg := parseSandboxPort(it)
			if msg != "" {
				e.errorf(attr, "Invalid sandbox network", "%s", msg)
				continue
			}
			s.Ports = append(s.Ports, port)
		}
		s.Network = SandboxNetworkPorts
		return
	}
	m, ok := e.string(attr)
	if !ok {
		return
	}
	switch m {
	case SandboxNetworkNone, SandboxNetworkLoopback, SandboxNetworkAny:
		s.Network = m
	default:
		e.errorf(attr, "Invalid sandbox network",
			"\"network\" must be %q, %q, %q or a list of \"*:port\", got %q.",
			SandboxNetworkNone, SandboxNetworkLoopback, SandboxNetworkAny, m)
	}
}

// parseSandboxPort reads one "*:port" item, or says why it cannot be enforced.
func parseSandboxPort(it string) (uint16, string) {
	i := strings.LastIndexByte(it, ':')
	if i < 0 {
		return 0, fmt.Sprintf("%q is not host:port; write \"*:443\" for port 443 on any host.", it)
	}
	host, port := it[:i], it[i+1:]
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Sprintf("%q: the port must be a number from 1 to 65535.", it)
	}
	if host != "*" {
		return 0, fmt.Sprintf("%q names the host %q, which cannot be enforced: Landlock restricts TCP by port only, "+
			"so the child could reach port %d on every host. Write \"*:%d\" to allow that knowingly, or network = %q.",
			it, host, n, n, SandboxNetworkAny)
	}
	return uint16(n), ""
}
