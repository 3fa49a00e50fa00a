package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Each sandboxed child gets a private TMPDIR in the proxy's TMPDIR,
// mcp-proxy-sandboxed-NAME-XXXX, removed when it exits. The proxy holds the directory
// locked (flock on the directory itself; the kernel lets go of the lock when the process
// ends, however it ends) while the child runs. A proxy killed with SIGKILL removes
// nothing, so a proxy's first sandboxed start removes this user's directories whose lock
// can be taken: their proxy is gone. The child cannot give up the lock or replace the
// directory: it holds no descriptor of it and may not write where the directory is.
const tmpPrefix = "mcp-proxy-sandboxed-"

// sweepOnce removes the gone proxies' directories once per process.
var sweepOnce sync.Once

// privateTmp is one child's private TMPDIR.
type privateTmp struct {
	path string
	lock *os.File // the directory, open and locked
}

// makePrivateTmp makes and locks a private TMPDIR for a child of the upstream name. It is
// made under another name and renamed once locked, so that a proxy removing gone ones
// never sees it unlocked.
func makePrivateTmp(name string) (*privateTmp, error) {
	sweepOnce.Do(removeStaleTmp)
	tmp := os.TempDir()
	partial, err := os.MkdirTemp(tmp, "."+tmpPrefix+strings.ReplaceAll(name, "/", "_")+"-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: creating the private temporary directory: %w", err)
	}
	lock, err := os.Open(partial)
	if err == nil {
		if err = flock(lock); err != nil {
			lock.Close()
		}
	}
	d := &privateTmp{path: filepath.Join(tmp, strings.TrimPrefix(filepath.Base(partial), ".")), lock: lock}
	if err == nil {
		if err = os.Rename(partial, d.path); err != nil {
			lock.Close()
		}
	}
	if err != nil {
		_ = os.Remove(partial)
		return nil, fmt.Errorf("sandbox: creating the private temporary directory: %w", err)
	}
	return d, nil
}

// remove removes the directory and lets go of its lock; safe on nil.
func (d *privateTmp) remove() {
	if d == nil {
		return
	}
	_ = os.RemoveAll(d.path)
	_ = d.lock.Close()
}

// removeStaleTmp removes this user's private TMPDIRs whose proxy is gone: those whose
// lock can be taken. A live proxy's stay: it holds their locks.
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
		lock, err := os.Open(dir)
		if err != nil {
			continue
		}
		if flock(lock) == nil {
			_ = os.RemoveAll(dir)
		}
		lock.Close()
	}
}

// flock takes f's exclusive lock without waiting; an error when another holds it.
func flock(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }
