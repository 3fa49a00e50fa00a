//go:build linux

package server

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipePage is the size of the pages a pipe holds its data in.
const pipePage = 4096

// pipeRoom returns, for a pipe, a check that a write of n more bytes cannot block now;
// nil when f is not a pipe or its size cannot be read. Only an empty pipe is known to
// have room: a pipe's capacity is a number of pages, and how many of them the unread
// bytes take depends on how the writes fell into pages (writes a little over half a
// page each take a page each, so a 64 KiB pipe can be full with 33 KiB unread), which
// no system call tells. An empty pipe holds no page, and the proxy is its only writer
// (what the client reads only makes more room), so n bytes up to the pipe's size less a
// page cannot block. A client that reads what it is sent finds the pipe empty when the
// next answer is ready; under load the outbox's goroutine writes what accumulated.
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
	}); err != nil || ferr != nil || size <= pipePage {
		return nil
	}
	return func(n int) bool {
		if n+pipePage > size {
			return false
		}
		unread := -1
		if err := raw.Control(func(fd uintptr) {
			// TIOCINQ is FIONREAD: the unread bytes, asked of either end of a pipe.
			if v, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
				unread = v
			}
		}); err != nil {
			return false
		}
		return unread == 0
	}
}
