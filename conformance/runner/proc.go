package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process started in its own process group, so that stopping it
// reaches everything it started in that group.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, set before done is closed
}

var (
	procsMu sync.Mutex
	procs   = map[*proc]bool{}
)

// startProc starts cmd in a new process group, with its output appended to logPath
// (or inherited when logPath is empty), and registers it for killAll.
func startProc(name string, cmd *exec.Cmd, logPath string) (*proc, error) {
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close() // the child has its own copy
		cmd.Stdout, cmd.Stderr = f, f
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	procsMu.Lock()
	procs[p] = true
	procsMu.Unlock()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
		procsMu.Lock()
		delete(procs, p)
		procsMu.Unlock()
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process (not its group: the proxy stops its own children
// gracefully and they live in groups of their own), waits up to grace, then SIGKILLs
// the whole group.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // ESRCH when the group is gone
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
}

// killAll SIGKILLs the process group of every registered process and then every
// process reparented to us (we are a child subreaper), so nothing outlives the harness.
func killAll() {
	procsMu.Lock()
	for p := range procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	procsMu.Unlock()
	killOrphans()
}

// becomeSubreaper makes orphaned descendants (such as an upstream whose proxy died)
// our children, so that killOrphans can find them.
func becomeSubreaper() {
	const prSetChildSubreaper = 36
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}

// killOrphans SIGKILLs every process whose parent is us and which is not one of the
// processes we started ourselves (those are stopped by their owners).
func killOrphans() {
	self := os.Getpid()
	own := map[int]bool{}
	procsMu.Lock()
	for p := range procs {
		own[p.cmd.Process.Pid] = true
	}
	procsMu.Unlock()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || own[pid] {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces, so parse after the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == self {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// freePort asks the kernel for a free TCP port on 127.0.0.1. Another process can take
// it before ours binds it; callers detect that (the child exits) and retry.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitListening waits until addr accepts TCP connections, the process ends, or the
// timeout passes.
func waitListening(ctx context.Context, p *proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited before listening on %s: %v", p.name, addr, p.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening on %s after %s", nameOf(p), addr, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func nameOf(p *proc) string {
	if p == nil {
		return "server"
	}
	return p.name
}
