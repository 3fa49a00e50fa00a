// Package topology starts what a cluster of proxies runs on, on loopback, for the tests
// and for a developer (make cluster): a redis-server without persistence, N replicas of
// mcp-proxy serving Streamable HTTP with a cluster block pointing at it, and HAProxy in
// front balancing round-robin across them without stickiness (so that consecutive
// requests of one client land on different replicas).
//
// It starts real processes from the Debian packages redis-server and haproxy and from a
// built mcp-proxy binary; it must not be imported by the proxy itself. Every process it
// starts is stopped by Close (SIGTERM, then SIGKILL), and each one's stderr is kept for
// the test's failure output.
package topology

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrMissing is returned (wrapped) when redis-server or haproxy is not installed.
var ErrMissing = errors.New("not installed")

// Need returns the path of the program name (redis-server, haproxy), or an error that
// wraps ErrMissing and says how to install it.
func Need(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		pkg := name
		if name == "redis-server" || name == "redis-cli" {
			pkg = "redis-server"
		}
		return "", fmt.Errorf("%s is %w (Debian: apt-get install -y %s)", name, ErrMissing, pkg)
	}
	return p, nil
}

// WaitListening waits until something accepts connections at addr, or timeout.
func WaitListening(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens at %s after %s: %w", addr, timeout, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Buffer collects a process's output safely across goroutines.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Process is one started program.
type Process struct {
	Name   string
	Cmd    *exec.Cmd
	Output *Buffer // its stderr (and stdout), or the caller's writer's copy
	done   chan struct{}
	err    error // Wait's, once done is closed
}

// start starts cmd as p, in its own process group, with its output to out (a Buffer
// when nil).
func start(name string, cmd *exec.Cmd, out *Buffer, tee *os.File) (*Process, error) {
	if out == nil {
		out = &Buffer{}
	}
	var w interface{ Write([]byte) (int, error) } = out
	if tee != nil {
		w = multiWriter{out, tee}
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, Cmd: cmd, Output: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

type multiWriter struct {
	a *Buffer
	b *os.File
}

func (m multiWriter) Write(p []byte) (int, error) {
	m.a.Write(p)
	return m.b.Write(p)
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL to the process (not its group: what kill -9 of a replica does) and
// waits for it to end.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to grace for the process to end, then SIGKILLs its
// process group. It is safe to call twice.
func (p *Process) Stop(grace time.Duration) error {
	if p == nil {
		return nil
	}
	if !p.Exited() {
		p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
			return fmt.Errorf("%s did not stop within %s after SIGTERM; killed", p.Name, grace)
		}
	}
	syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL) // anything it left in its group
	return nil
}

// writeFile writes data to dir/name and returns its path.
func writeFile(dir, name, data string) (string, error) {
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, []byte(data), 0o600)
}

// hclQuote quotes s for HCL.
func hclQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "${", "$${", "%{", "%%{").Replace(s) + `"`
}
