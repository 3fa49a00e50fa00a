package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Each sandboxed child gets a private TMPDIR, removed when it exits. They live in one
// directory per proxy in the proxy's TMPDIR, mcp-proxy-sandboxes-XXXX, which exists while
// the proxy has sandboxed children and which it holds locked (flock on its file "lock",
// which also holds its pid for a person looking; the kernel lets go of the lock when the
// process ends, however it ends). A proxy killed with SIGKILL removes nothing, so the
// first directory a proxy makes is preceded by the removal of those whose lock can be
// taken: their proxy is gone. A child can write only in its own TMPDIR, not the lock.
const (
	tmpPrefix = "mcp-proxy-sandboxes-"
	tmpLock   = "lock"
)

// tmpdirs is this process's directory of private TMPDIRs.
var tmpdirs struct {
	mu    sync.Mutex // guards the fields
	users int        // private TMPDIRs made and not yet removed
	dir   string     // the directory, while users > 0
	lock  *os.File   // its lock file, held locked while users > 0
	swept bool       // the gone proxies' directories were removed
}

// privateTmp makes a private TMPDIR for one child of the upstream name.
func privateTmp(name string) (string, error) {
	tmpdirs.mu.Lock()
	defer tmpdirs.mu.Unlock()
	if tmpdirs.users == 0 {
		if !tmpdirs.swept {
			removeStaleTmp()
			tmpdirs.swept = true
		}
		dir, lock, err := makeTmpRoot()
		if err != nil {
			return "", fmt.Errorf("sandbox: creating the directory of private temporary directories in %s: %w", os.TempDir(), err)
		}
		tmpdirs.dir, tmpdirs.lock = dir, lock
	}
	d, err := os.MkdirTemp(tmpdirs.dir, strings.ReplaceAll(name, "/", "_")+"-")
	if err != nil {
		if tmpdirs.users == 0 {
			releaseTmpRoot()
		}
		return "", fmt.Errorf("sandbox: creating the private temporary directory: %w", err)
	}
	tmpdirs.users++
	return d, nil
}

// removePrivateTmp removes a directory privateTmp made, and the proxy's directory with
// the last one.
func removePrivateTmp(d string) {
	_ = os.RemoveAll(d)
	tmpdirs.mu.Lock()
	defer tmpdirs.mu.Unlock()
	if tmpdirs.users == 0 {
		return
	}
	tmpdirs.users--
	if tmpdirs.users == 0 {
		releaseTmpRoot()
	}
}

// releaseTmpRoot removes the proxy's directory and lets go of its lock; tmpdirs.mu held.
func releaseTmpRoot() {
	_ = os.RemoveAll(tmpdirs.dir)
	_ = tmpdirs.lock.Close() // unlocks
	tmpdirs.dir, tmpdirs.lock = "", nil
}

// makeTmpRoot makes and locks a new directory. It is made under another name and renamed
// once locked, so that another proxy removing gone ones never sees it unlocked.
func makeTmpRoot() (string, *os.File, error) {
	tmp := os.TempDir()
	partial, err := os.MkdirTemp(tmp, "."+tmpPrefix)
	if err != nil {
		return "", nil, err
	}
	lock, err := os.OpenFile(filepath.Join(partial, tmpLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		if err = flock(lock); err == nil {
			_, err = lock.WriteString(strconv.Itoa(os.Getpid()) + "\n")
		}
		if err != nil {
			lock.Close()
		}
	}
	if err != nil {
		_ = os.RemoveAll(partial)
		return "", nil, err
	}
	dir := filepath.Join(tmp, strings.TrimPrefix(filepath.Base(partial), "."))
	if err := os.Rename(partial, dir); err != nil {
		lock.Close()
		_ = os.RemoveAll(partial)
		return "", nil, err
	}
	return dir, lock, nil
}

// removeStaleTmp removes this user's directories of private TMPDIRs whose proxy is gone:
// those whose lock can be taken. A live proxy's stays: it holds its lock.
func removeStaleTmp() {
	tmp := os.TempDir()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), tmpPrefix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		lock, err := os.OpenFile(filepath.Join(dir, tmpLock), os.O_RDWR, 0)
		if err != nil {
			continue // not one of ours, or being removed
		}
		if flock(lock) == nil {
			_ = os.RemoveAll(dir)
		}
		lock.Close()
	}
}

// flock takes f's exclusive lock without waiting; an error when another holds it.
func flock(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }
