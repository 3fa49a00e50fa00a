package proxy

import (
	"bytes"
	"crypto/sha256"
	"os"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// lockWatch follows the lock file of a pinning configuration for the reload watcher
// (proxy { watch = true }): a lock file written by `mcp-proxy lock --update`, or copied
// in by a deployment, is read again and served as a reload would, without a signal.
//
// The file is looked at on every tick of the watcher but read only when its stat
// changed (another file, size or modification time: a rename onto it, as lock --update
// and most deployments write it, or a write in place), and a change is acted on once
// the content has stayed the same a moment (watchSettle) and differs from what was last
// seen. A lock file that matches the lock in force (an approval through the admin
// listener writes the file and serves it already) does not reload.
type lockWatch struct {
	path string      // "" when pinning is off: nothing is watched
	info os.FileInfo // the last stat; nil when the file was missing
	sum  [32]byte    // the SHA-256 of the content last seen; zero when missing
	read int         // how many times poll read the file (for tests)
}

// lockFileToWatch is the running configuration's lock file, "" when it pins nothing.
func (e *engine) lockFileToWatch() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cfg.Proxy.Pin == config.PinOff {
		return ""
	}
	return e.cfg.Proxy.LockFile
}

// reset takes the lock file at path as it is now as seen (after a reload, or when the
// watch starts).
func (w *lockWatch) reset(path string) {
	*w = lockWatch{path: path}
	if path == "" {
		return
	}
	w.info, _ = os.Stat(path)
	if b, err := os.ReadFile(path); err == nil {
		w.sum = sha256.Sum256(b)
	}
}

// forget makes the next poll read the file and report it.
func (w *lockWatch) forget() { w.info, w.sum = nil, [32]byte{} }

// poll reports the lock file's content when it changed since it was last seen, nil
// otherwise. It reads the file only when its stat changed.
func (w *lockWatch) poll() []byte {
	if w.path == "" {
		return nil
	}
	info, err := os.Stat(w.path)
	if err != nil || sameStat(w.info, info) {
		return nil // missing (a reload would keep the lock in force), or not touched
	}
	b, err := os.ReadFile(w.path)
	w.read++
	if err != nil {
		return nil
	}
	w.info = info
	if sum := sha256.Sum256(b); sum != w.sum {
		w.sum = sum
		return b
	}
	return nil
}

func sameStat(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// lockInForce reports whether b is the lock file the vetter already serves (as
// trust.WriteLock writes it).
func (e *engine) lockInForce(b []byte) bool {
	v := e.trust.Load()
	if v == nil || v.Lock() == nil {
		return false
	}
	enc, err := v.Lock().Encode()
	return err == nil && bytes.Equal(enc, b)
}
