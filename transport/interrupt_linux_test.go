//go:build linux

package transport

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stdoutUnread is how many bytes of the child's stdout nobody has read yet.
func stdoutUnread(t *testing.T, p *Process) int {
	t.Helper()
	raw, err := p.out.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ierr error
	if err := raw.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil || ierr != nil {
		t.Fatal(err, ierr)
	}
	return n
}

// TestProcessInterruptRead: a ReadLine waiting for the child in the middle of a line
// returns os.ErrDeadlineExceeded when interrupted, so does the next one until ResumeRead,
// and after ResumeRead the line comes whole: the part read before the interruption is
// not lost.
func TestProcessInterruptRead(t *testing.T) {
	p, err := StartProcess(ProcessSpec{Command: helper("echo")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	if !p.ReadInterruptible() {
		t.Fatal("a child's stdout is not interruptible")
	}
	type read struct {
		line string
		err  error
	}
	reads := make(chan read, 1)
	readLine := func() {
		line, err := p.ReadLine()
		reads <- read{string(line), err}
	}
	go readLine()
	if _, err := p.stdin.Write([]byte(`{"jsonrpc":"2.0",`)); err != nil {
		t.Fatal(err)
	}
	// Wait until the child echoed the half line and the reader took it from the pipe.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, ok := p.Unread()
		if ok && n == 0 && stdoutUnread(t, p) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the half line was not read")
		}
		time.Sleep(time.Millisecond)
	}
	p.InterruptRead()
	if r := <-reads; !errors.Is(r.err, os.ErrDeadlineExceeded) {
		t.Fatalf("interrupted read: %q %v", r.line, r.err)
	}
	go readLine()
	if r := <-reads; !errors.Is(r.err, os.ErrDeadlineExceeded) {
		t.Fatalf("read while interrupted: %q %v", r.line, r.err)
	}
	p.ResumeRead()
	go readLine()
	if _, err := p.stdin.Write([]byte(`"method":"ping"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if r := <-reads; r.err != nil || r.line != `{"jsonrpc":"2.0","method":"ping"}` {
		t.Fatalf("after ResumeRead: %q %v", r.line, r.err)
	}
}
