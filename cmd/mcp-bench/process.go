package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Grace periods of the stop sequence: close stdin, then SIGTERM, then SIGKILL.
const (
	stopGrace = 2 * time.Second
	waitDelay = 3 * time.Second // bounds Wait when a grandchild keeps our stderr pipe open
)

// child is one spawned MCP server (the upstream itself or the proxy): over stdio with the
// pipelined client speaking to it (startChild), or serving HTTP with its stdin and stdout
// unused (startServerChild). It is stopped by Close, which is safe to call twice.
type child struct {
	name string
	cmd  *exec.Cmd
	conn *conn // nil for an HTTP server

	stdin  io.WriteCloser
	stdout *os.File // read end of the child's stdout; closed by Close after the child exited

	done    chan struct{} // closed when cmd.Wait returned
	waitErr error         // set before done is closed

	closeOnce sync.Once
	closeErr  error
}

// startChild spawns argv in its own process group with its stdout connected to a
// pipelined JSON-RPC client. The child's stderr is copied to stderr (which should be a
// lockedWriter when shared), each line prefixed with the child's name.
func startChild(name string, argv []string, dir string, env []string, stderr io.Writer) (*child, error) {
	cmd, err := newCommand(name, argv, dir, env, stderr)
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		stdin.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		stdin.Close()
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, argv[0], err)
	}
	pw.Close() // the child holds its own copy
	c := &child{name: name, cmd: cmd, stdin: stdin, stdout: pr, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	c.conn = newConn(stdin, pr)
	return c, nil
}

// newCommand prepares argv in its own process group with its stderr copied to stderr,
// each line prefixed with the child's name; env entries are added to ours.
func newCommand(name string, argv []string, dir string, env []string, stderr io.Writer) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("starting child: empty command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches only us; we stop the group
	cmd.Stderr = newPrefixWriter(stderr, "["+name+"] ")
	cmd.WaitDelay = waitDelay
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	return cmd, nil
}

// startServerChild spawns argv as a network server: stdin is /dev/null and stdout is
// copied to stderr like its stderr. Close stops it with SIGTERM.
func startServerChild(name string, argv []string, dir string, env []string, stderr io.Writer) (*child, error) {
	cmd, err := newCommand(name, argv, dir, env, stderr)
	if err != nil {
		return nil, err
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, argv[0], err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// pid returns the process id of the child (not of its children).
func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the child process has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Close stops the child: it closes its stdin (an HTTP server: sends it SIGTERM) and
// waits, then sends SIGTERM and then SIGKILL to its process group, waiting stopGrace
// between steps. It then stops the client. Close is safe to call more than once.
func (c *child) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.stop() })
	return c.closeErr
}

func (c *child) stop() error {
	var errs []error
	if c.stdin != nil {
		if err := c.stdin.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			errs = append(errs, fmt.Errorf("closing stdin of %s: %w", c.name, err))
		}
	} else {
		_ = c.cmd.Process.Signal(syscall.SIGTERM) // the process alone: it stops its own children
	}
	pgid := c.pid()
	exited := c.waitFor(stopGrace)
	if !exited {
		_ = syscall.Kill(-pgid, syscall.SIGTERM) // ESRCH only if the group is already gone
		exited = c.waitFor(stopGrace)
	}
	// SIGKILL the group in every case: it also takes any grandchild the child left
	// behind in its group. The pgid cannot be reused while the group has members.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if !exited && !c.waitFor(stopGrace) {
		errs = append(errs, fmt.Errorf("%s (pid %d) did not exit after SIGKILL", c.name, pgid))
	}
	if c.conn == nil {
		return errors.Join(errs...)
	}
	// Closing our read end ends the reader even if a grandchild still holds the write end.
	if err := c.stdout.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		errs = append(errs, fmt.Errorf("closing stdout of %s: %w", c.name, err))
	}
	c.conn.wait()
	return errors.Join(errs...)
}

func (c *child) waitFor(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// lockedWriter serialises writes to one destination shared by several goroutines (the
// stderr copiers of all children and our own progress lines), one Write per line.
type lockedWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// prefixWriter copies complete lines to w, each prefixed, in one Write per line.
type prefixWriter struct {
	mu     sync.Mutex // guards buf
	w      io.Writer
	prefix string
	buf    []byte
}

func newPrefixWriter(w io.Writer, prefix string) *prefixWriter {
	return &prefixWriter{w: w, prefix: prefix}
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		_, err := p.w.Write(append([]byte(p.prefix), p.buf[:i+1]...))
		p.buf = p.buf[i+1:]
		if err != nil {
			return len(b), err
		}
	}
	if len(p.buf) > 64<<10 { // an endless line: flush it rather than grow without bound
		_, err := p.w.Write(append(append([]byte(p.prefix), p.buf...), '\n'))
		p.buf = p.buf[:0]
		if err != nil {
			return len(b), err
		}
	}
	return len(b), nil
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
