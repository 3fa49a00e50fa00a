//go:build unix

package h1client

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// alive reports whether a pooled connection is still open and silent: one non-blocking
// peek sees neither the server's close nor bytes nobody asked for. The connection's raw
// handle is kept for its next probe.
func alive(c *conn) bool {
	if c.raw == nil {
		sc, ok := c.nc.(syscall.Conn)
		if !ok {
			return true
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return false
		}
		c.raw = raw
	}
	raw := c.raw
	var buf [1]byte
	var n int
	var rerr error
	if err := raw.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return true // never wait: the answer is now
	}); err != nil {
		return false
	}
	_ = n // 0 with no error: the server closed it; more than 0: unasked-for bytes
	return rerr == unix.EAGAIN || rerr == unix.EWOULDBLOCK
}
