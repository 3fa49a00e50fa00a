//go:build linux

package server

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeSlack is what the room check leaves free beyond a write's own bytes: a pipe
// holds data in pages, and the first and last of them may be partly used.
const pipeSlack = 2 * 4096

// pipeRoom returns, for a pipe, a check that n more bytes fit in it now (so that a
// write of them cannot block: the proxy is the pipe's only writer, and what the client
// reads only makes more room); nil when f is not a pipe or its size cannot be read.
func pipeRoom(f *os.File) func(n int) bool {
	raw, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	size := 0
	var ferr error
	if err := raw.Control(func(fd uintptr) {
		var st unix.Stat_t
		if ferr = unix.Fstat(int(fd), &st); ferr != nil {
			return
		}
		if st.Mode&unix.S_IFMT != unix.S_IFIFO {
			ferr = os.ErrInvalid
			return
		}
		size, ferr = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
	}); err != nil || ferr != nil || size <= pipeSlack {
		return nil
	}
	return func(n int) bool {
		unread := -1
		if err := raw.Control(func(fd uintptr) {
			// TIOCINQ is FIONREAD: the unread bytes, asked of either end of a pipe.
			if v, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
				unread = v
			}
		}); err != nil || unread < 0 {
			return false
		}
		return unread+n+pipeSlack <= size
	}
}
