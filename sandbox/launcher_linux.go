package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The launcher start: the child is a small program that restricts itself and then
// executes the command. It is used wherever the thread start is not possible
// (Support.Thread), for network "loopback" where the thread start cannot bring up the
// child's lo (Support.ThreadLoopback: only a process inside the new namespace can, and
// the launcher is), and when MCP_PROXY_SANDBOX_LAUNCHER names a launcher.

// envMarker carries the launcher's instructions (launchSpec as JSON). The launcher
// removes it before it executes the command.
const envMarker = "MCP_PROXY_SANDBOX"

// probeMarker is envMarker's value for a probe: the launcher exits at once with status 0.
const probeMarker = "probe"

// statusFd is the launcher's end of the pipe it reports a failure on; it is closed on
// exec. (3 is the child's lifeline.)
const statusFd = 4

// launchSpec is what a start applies, computed by the proxy before the start.
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
// milliseconds to every start through it. Without the launcher's environment variable it
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
	if err := restrictThread(&s); err != nil {
		return err
	}
	err := syscall.Exec(s.Path, s.Args, os.Environ())
	return fmt.Errorf("executing %s: %w", s.Path, err)
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

// LauncherEnv names a launcher to use instead of the one found next to the executable;
// when it is set, every sandboxed child is started through it (no thread start).
const LauncherEnv = "MCP_PROXY_SANDBOX_LAUNCHER"

// launcherName is the small launcher program, cmd/mcp-proxy-sandbox.
const launcherName = "mcp-proxy-sandbox"

// LauncherPath returns the program a sandboxed child is started through when it is
// started through a launcher: $LauncherEnv when set; else mcp-proxy-sandbox in the
// directory of this program's executable, when it is there; else this program itself
// (/proc/self/exe), which works the same but initializes all of the proxy's packages
// before its launcher takes over (tens of milliseconds against about one).
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

// throughLauncher rewrites cmd to run the launcher, which applies spec and executes the
// original command, and returns the proxy's end of the launcher's status pipe and the
// launcher's end (statusFd in the launcher: the next of cmd.ExtraFiles).
func throughLauncher(cmd *exec.Cmd, spec *launchSpec, ns bool) (status, child *os.File, err error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: creating the status pipe: %w", err)
	}
	cmd.Path = LauncherPath()
	cmd.Args = append([]string{launcherName}, cmd.Args...)
	cmd.Env = append(cmd.Env, envMarker+"="+string(js))
	cmd.ExtraFiles = append(cmd.ExtraFiles, w)
	if len(cmd.ExtraFiles) != statusFd-2 {
		r.Close()
		w.Close()
		return nil, nil, fmt.Errorf("sandbox: the launcher's status pipe would be fd %d, not %d", len(cmd.ExtraFiles)+2, statusFd)
	}
	if ns {
		userNamespace(cmd.SysProcAttr, spec.Loopback)
	}
	return r, w, nil
}

// launcherVerdict waits for the launcher's verdict after cmd.Start succeeded: nil once it
// has executed the command, or the error it reported (it has then exited with status
// 126). It closes both ends of the status pipe.
func launcherVerdict(status, child *os.File) error {
	child.Close()
	defer status.Close()
	_ = status.SetReadDeadline(time.Now().Add(30 * time.Second))
	msg, err := io.ReadAll(status)
	if err != nil {
		return fmt.Errorf("sandbox: reading the launcher's report: %w", err)
	}
	if len(msg) > 0 {
		return fmt.Errorf("sandbox: %s", msg)
	}
	return nil
}
