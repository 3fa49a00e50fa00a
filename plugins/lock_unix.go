//go:build unix

package plugins

import (
	"io/fs"
	"os"
	"syscall"
)

// lockFile takes f's exclusive lock without waiting; an error when another holds it.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// ownedByMe reports whether a directory entry belongs to this process's user.
func ownedByMe(e fs.DirEntry) bool {
	info, err := e.Info()
	if err != nil {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
