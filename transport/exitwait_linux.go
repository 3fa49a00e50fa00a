package transport

import (
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// exitWatch lets the goroutine that reaps a child wait for its exit in the runtime's
// poller instead of in a blocking wait system call: a child waited for that way costs an
// OS thread for its whole life (58 threads for 50 idle upstreams). The child's pidfd turns
// readable when it exits; Wait then returns at once.
type exitWatch struct{ fd int }

// watchExit asks for the child's pidfd; call it before cmd.Start, with SysProcAttr set.
func watchExit(cmd *exec.Cmd) *exitWatch {
	w := &exitWatch{fd: -1}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.PidFD = &w.fd
	return w
}

// wait returns once the child has exited (at once if the kernel gave no pidfd or the
// poller cannot take it: Wait then blocks as usual). It closes the pidfd; call it once,
// after a successful Start.
//
// The pidfd's open file is shared with the duplicate os.Process waits on, so its
// non-blocking mode is too: were wait to return before the exit with the pidfd still
// non-blocking, Wait would fail at once (EAGAIN) and the reaper would kill the child's
// group. So a signal that interrupts the check (EINTR: the proxy gets SIGCHLD and the
// runtime's own signals) is retried, and on any other failure the pidfd is made blocking
// again before wait returns.
func (w *exitWatch) wait() {
	if w.fd < 0 {
		return
	}
	if err := syscall.SetNonblock(w.fd, true); err != nil {
		syscall.Close(w.fd)
		return
	}
	f := os.NewFile(uintptr(w.fd), "pidfd") // non-blocking: the poller takes it
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		_ = syscall.SetNonblock(w.fd, false)
		return
	}
	var failed bool
	_ = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 0)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				failed = true // let Wait block rather than spin
				_ = syscall.SetNonblock(int(fd), false)
			}
			return failed || n > 0
		}
	})
}
