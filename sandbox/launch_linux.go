package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// envMarker carries the launcher's instructions (launchSpec as JSON). The launcher
// removes it before it executes the command.
const envMarker = "MCP_PROXY_SANDBOX"

// probeMarker is envMarker's value for the probe that tries a network namespace.
const probeMarker = "probe"

// statusFd is the launcher's end of the pipe it reports a failure on; it is closed on exec.
const statusFd = 3

// launchSpec is what the launcher applies, computed by the proxy before the start.
type launchSpec struct {
	Path       string   `json:"path"` // the command's executable, resolved
	Args       []string `json:"args"` // its argv
	Rules      []Rule   `json:"rules"`
	HandledFS  uint64   `json:"handled_fs"`
	HandledNet uint64   `json:"handled_net"`
	Ports      []uint16 `json:"ports,omitempty"`
	Scoped     uint64   `json:"scoped"`
	Loopback   bool     `json:"loopback"` // bring lo up in the new network namespace
}

// init is the launcher's entry point. It runs while the program's packages are being
// initialized, before main and before the packages that sort after this one (the proxy's
// telemetry, gRPC, Prometheus…), whose initialization would otherwise add tens of
// milliseconds to every sandboxed start. Without the launcher's environment variable it
// does nothing. With it, it never returns: it restricts the calling thread and executes
// the command, or reports why it could not and exits with status 126 (the one place
// outside main that exits: there is no proxy to return to).
func init() {
	v, ok := os.LookupEnv(envMarker)
	if !ok {
		return
	}
	if v == probeMarker {
		os.Exit(0)
	}
	runtime.LockOSThread() // the restriction is per thread; exec keeps this one's
	err := launch(v)
	report(err)
	os.Exit(126)
}

// report writes the launcher's failure to its status pipe (fd 3, when it is a pipe), and
// to stderr for a launcher started by hand.
func report(err error) {
	var st unix.Stat_t
	if unix.Fstat(statusFd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
		_, _ = unix.Write(statusFd, []byte(err.Error()))
	}
	fmt.Fprintf(os.Stderr, "mcp-proxy sandbox launcher: %v\n", err)
}

// launch applies spec to the calling thread and executes the command; it returns only
// on failure.
func launch(v string) error {
	var s launchSpec
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return fmt.Errorf("reading the launcher's instructions: %w", err)
	}
	os.Unsetenv(envMarker)
	unix.CloseOnExec(statusFd) // the proxy reads EOF once the command runs
	if s.Loopback {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("bringing up the loopback interface of the new network namespace: %w", err)
		}
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	attr := rulesetAttr{handledFS: s.HandledFS, handledNet: s.HandledNet, scoped: s.Scoped}
	size := unsafeSizeofRuleset
	fd, err := createRuleset(&attr, size)
	if err != nil {
		return fmt.Errorf("creating the Landlock ruleset: %w", err)
	}
	defer unix.Close(fd)
	for _, r := range s.Rules {
		if err := addRule(fd, r, s.HandledFS); err != nil {
			return err
		}
	}
	for _, p := range s.Ports {
		if err := addPortRule(fd, &netPortAttr{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(p)}); err != nil {
			return fmt.Errorf("allowing TCP port %d: %w", p, err)
		}
	}
	if err := restrictSelf(fd); err != nil {
		return fmt.Errorf("enforcing the Landlock ruleset: %w", err)
	}
	unix.Close(fd)
	err = syscall.Exec(s.Path, s.Args, os.Environ())
	return fmt.Errorf("executing %s: %w", s.Path, err)
}

// unsafeSizeofRuleset is the size of the ruleset attribute passed to the kernel: the
// three fields up to ABI 6 (older kernels accept it while scoped is zero).
const unsafeSizeofRuleset uintptr = 24

// addRule adds one path rule; a missing optional path is skipped.
func addRule(ruleset int, r Rule, handled uint64) error {
	fd, err := unix.Open(r.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if r.Optional && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EACCES)) {
			return nil
		}
		return fmt.Errorf("opening sandbox path %s (%s): %w", r.Path, r.Why, err)
	}
	defer unix.Close(fd)
	access := r.Access & handled
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("sandbox path %s: %w", r.Path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= fileRights
	}
	if access == 0 {
		return nil
	}
	if err := addPathRule(ruleset, &pathBeneathAttr{allowed: access, parentFd: int32(fd)}); err != nil {
		return fmt.Errorf("adding the Landlock rule for %s: %w", r.Path, err)
	}
	return nil
}

// dropCapabilities empties the thread's capability sets before the exec: the bounding
// set (so that an exec as root gains none), the ambient and inheritable sets, and the
// permitted and effective ones. A proxy run as root would otherwise hand its children
// every capability (loading a kernel module from memory needs no file Landlock could
// deny); in a user namespace of its own, the child would keep that namespace's.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	for c := 0; c <= 63; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			break // past the last capability this kernel knows
		}
		if errors.Is(err, unix.EPERM) {
			// Without CAP_SETPCAP the set cannot shrink; such a process has no
			// capabilities to pass on but by file capabilities, which no_new_privs voids.
			break
		}
		if err != nil {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clearing capabilities: %w", err)
	}
	return nil
}

// loopbackUp sets the up flag on lo.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// Support is what this machine offers for sandboxing.
type Support struct {
	ABI      int   // Landlock ABI version; 0 without Landlock
	ABIErr   error // why there is no Landlock
	NetNS    bool  // a child may get a user and network namespace of its own
	NetNSErr error // why not
}

var (
	supportOnce sync.Once
	support     Support
)

// Probe returns what this machine offers, found once per process: the Landlock ABI
// version, and whether a child can be started in new user and network namespaces (tried
// with the launcher in probe mode, so a sysctl or an LSM that forbids them is seen).
func Probe() Support {
	supportOnce.Do(func() {
		support.ABI, support.ABIErr = landlockABI()
		support.NetNSErr = probeNetNS()
		support.NetNS = support.NetNSErr == nil
	})
	return support
}

func probeNetNS() error {
	cmd := exec.Command(LauncherPath())
	cmd.Args = []string{"mcp-proxy-sandbox-probe"}
	cmd.Env = append(os.Environ(), envMarker+"="+probeMarker)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	userNamespace(cmd.SysProcAttr, false)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("starting a child in new user and network namespaces: %v %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// userNamespace asks for new user and network namespaces, mapping the proxy's uid and
// gid to themselves, and (for loopback) CAP_NET_ADMIN in them for the launcher.
func userNamespace(a *syscall.SysProcAttr, netAdmin bool) {
	a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	uid, gid := os.Getuid(), os.Getgid()
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	a.GidMappingsEnableSetgroups = false
	if netAdmin {
		a.AmbientCaps = []uintptr{unix.CAP_NET_ADMIN}
	}
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

// plan computes what the launcher applies for one start.
func plan(p *Policy, path string, args, env []string) (*launchSpec, error) {
	if err := Check(p); err != nil {
		return nil, err
	}
	s := Probe()
	spec := &launchSpec{Path: path, Args: args, HandledFS: fsRights(s.ABI)}
	for _, r := range p.Read {
		spec.Rules = append(spec.Rules, Rule{Path: r, Access: accessRead, Why: "read"})
	}
	for _, w := range p.Write {
		spec.Rules = append(spec.Rules, Rule{Path: w, Access: fsRights(s.ABI), Why: "write"})
	}
	spec.Rules = dedupe(append(spec.Rules, runtimeRules(path, args, env, p.mode())...))
	switch p.mode() {
	case NetworkNone:
		spec.HandledNet = netTCPV4
	case NetworkPorts:
		spec.HandledNet = netTCPV4
		spec.Ports = p.Ports
	case NetworkLoopback:
		spec.Loopback = true
	}
	if s.ABI >= 6 {
		spec.Scoped = scopeV6
	}
	return spec, nil
}

// offlineNpm reports whether npm (npx) runs without a network and without the user's
// say on npm_config_offline: it is then told to use its cache only, since it would
// otherwise retry the registry for minutes before it runs anything.
func offlineNpm(p *Policy, path string, args, env []string) bool {
	if m := p.mode(); m != NetworkNone && m != NetworkLoopback {
		return false
	}
	if lookupEnv(env, "npm_config_offline") != "" || lookupEnv(env, "NPM_CONFIG_OFFLINE") != "" {
		return false
	}
	return usesNpm(programChain(path, args, env))
}

// netNS reports whether a start under p gets its own network namespace.
func netNS(p *Policy) bool {
	m := p.mode()
	return m == NetworkLoopback || (m == NetworkNone && Probe().NetNS)
}

// Explain returns, one item a line, what will be enforced on this machine when command
// starts under p with env (KEY=value) added to the proxy's environment: the Landlock ABI,
// the network mode and namespace, and the filesystem rules found for the runtime.
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
	lines := []string{fmt.Sprintf("landlock ABI %d, no_new_privs, no capabilities; launcher %s", s.ABI, LauncherPath())}
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

// LauncherEnv names a launcher to use instead of the one found next to the executable.
const LauncherEnv = "MCP_PROXY_SANDBOX_LAUNCHER"

// launcherName is the small launcher program, cmd/mcp-proxy-sandbox.
const launcherName = "mcp-proxy-sandbox"

// LauncherPath returns the program a sandboxed child is started through: $LauncherEnv
// when set; else mcp-proxy-sandbox in the directory of this program's executable, when
// it is there; else this program itself (/proc/self/exe), which works the same but
// initializes all of the proxy's packages before its launcher takes over (tens of
// milliseconds against about one).
func LauncherPath() string {
	if p := os.Getenv(LauncherEnv); p != "" {
		return p
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), launcherName)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return "/proc/self/exe"
}

// Launch is one sandboxed start in progress: Prepare rewrote the command, Started
// collects the launcher's verdict, Cleanup removes what Prepare made.
type Launch struct {
	status *os.File // the proxy's end of the launcher's status pipe
	child  *os.File // the launcher's end, closed once the launcher holds it
	tmp    string
}

// Prepare rewrites cmd (made by exec.Command, with Env and SysProcAttr set) to start
// through the launcher under p: cmd runs this program again, which restricts itself and
// executes the original command. name (the upstream's) names the private TMPDIR.
func Prepare(p *Policy, cmd *exec.Cmd, name string) (*Launch, error) {
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	tmp, err := os.MkdirTemp("", "mcp-proxy-sandbox-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: creating the private temporary directory: %w", err)
	}
	env = setEnv(env, "TMPDIR", tmp)
	if offlineNpm(p, cmd.Path, cmd.Args, env) {
		env = setEnv(env, "npm_config_offline", "true")
	}
	spec, err := plan(p, cmd.Path, cmd.Args, env)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	spec.Rules = append(spec.Rules, Rule{Path: tmp, Access: spec.HandledFS, Why: "TMPDIR"})
	js, err := json.Marshal(spec)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("sandbox: creating the status pipe: %w", err)
	}
	cmd.Path = LauncherPath()
	cmd.Args = append([]string{"mcp-proxy-sandbox"}, cmd.Args...)
	cmd.Env = append(env, envMarker+"="+string(js))
	cmd.ExtraFiles = []*os.File{w} // fd 3
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if netNS(p) {
		userNamespace(cmd.SysProcAttr, spec.Loopback)
	}
	return &Launch{status: r, child: w, tmp: tmp}, nil
}

// Started waits for the launcher's verdict after cmd.Start succeeded: nil once it has
// executed the command, or the error it reported (it has then exited with status 126).
func (l *Launch) Started() error {
	l.child.Close()
	defer l.status.Close()
	_ = l.status.SetReadDeadline(time.Now().Add(30 * time.Second))
	msg, err := io.ReadAll(l.status)
	if err != nil {
		return fmt.Errorf("sandbox: reading the launcher's report: %w", err)
	}
	if len(msg) > 0 {
		return fmt.Errorf("sandbox: %s", msg)
	}
	return nil
}

// Abort releases what Prepare made when cmd.Start failed; it is safe on a nil Launch.
func (l *Launch) Abort() {
	if l == nil {
		return
	}
	l.child.Close()
	l.status.Close()
	l.Cleanup()
}

// Cleanup removes the private TMPDIR; call it once the child has exited.
func (l *Launch) Cleanup() { os.RemoveAll(l.tmp) }
