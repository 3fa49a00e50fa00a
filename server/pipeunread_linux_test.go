package server

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeUnread is the bytes written to the pipe f (either end) and not yet read, or -1.
func pipeUnread(f *os.File) int {
	raw, err := f.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	_ = raw.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
			n = v
		}
	})
	return n
}
