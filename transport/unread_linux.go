//go:build linux

package transport

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Unread returns how many of the bytes written to the child's stdin it has not read yet
// (FIONREAD, named TIOCINQ on Linux, which answers it on either end of a pipe). ok is
// false when that cannot be known, for instance once stdin is closed.
func (p *Process) Unread() (n int, ok bool) {
	sc, isConn := p.stdin.(syscall.Conn)
	if !isConn {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var ierr error
	if err := raw.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}
