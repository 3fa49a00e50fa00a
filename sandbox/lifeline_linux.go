package sandbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// A lifeline kills a child's process group when the proxy ends, however it ends (SIGKILL
// included): in place of the parent-death signal a child started from a thread cannot
// keep (that signal follows the thread that started the child, and the thread start ends
// that thread: see startOnThread), and beside it for a child started through the
// launcher, for what the child starts in its group. It is a pipe nobody writes to. The
// child holds the read end (its fd 3, inherited by what it starts); only the proxy holds
// the write end (close-on-exec, so no other child inherits it). The read end is set to
// signal the child's process group with SIGKILL on I/O (O_ASYNC, F_SETOWN, F_SETSIG): the
// one event it can see is the write end's last close, which the kernel does when the
// proxy exits, or which Close does once the child has exited. The owner is recorded by
// the proxy's unrestricted thread, so Landlock's signal scoping does not stop the signal.
type lifeline struct {
	r *os.File // the read end, until the child holds it
	w int      // the write end; -1 once closed
}

func newLifeline() (*lifeline, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("sandbox: creating the lifeline pipe: %w", err)
	}
	return &lifeline{r: os.NewFile(uintptr(p[0]), "sandbox-lifeline"), w: p[1]}, nil
}

// arm points the read end at the child's process group (pgid, the child's pid: it leads
// a group of its own) and drops the proxy's copy of it. Call it once the child holds its
// copy and before the child runs.
func (l *lifeline) arm(pgid int) error {
	fd := int(l.r.Fd())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETSIG, int(unix.SIGKILL)); err != nil {
		return fmt.Errorf("sandbox: setting the lifeline's signal: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETOWN, -pgid); err != nil {
		return fmt.Errorf("sandbox: setting the lifeline's owner: %w", err)
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_ASYNC)
	}
	if err != nil {
		return fmt.Errorf("sandbox: arming the lifeline: %w", err)
	}
	l.r.Close()
	l.r = nil
	return nil
}

// Close closes what the proxy still holds of the pipe. Once the child has exited, a
// process left in its group that still holds the read end is killed; safe twice.
func (l *lifeline) Close() {
	if l.r != nil {
		l.r.Close()
		l.r = nil
	}
	if l.w >= 0 {
		unix.Close(l.w)
		l.w = -1
	}
}
