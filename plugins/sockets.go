package plugins

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/rs/zerolog"
)

// socketPrefix names the proxy's directories for its plugins' sockets in TMPDIR.
const socketPrefix = "mcp-proxy-plugins-"

// lockName is the file in such a directory that its proxy holds locked while it runs
// (flock: the kernel lets go of it when the process ends, however it ends) and that holds
// its pid, for a person looking.
const lockName = "lock"

// sockets is this process's directory for its plugins' go-plugin Unix sockets: one
// subdirectory per plugin process (go-plugin's PLUGIN_UNIX_SOCKET_DIR), removed once the
// process exited, however it exited. The directory exists while a Host runs (a reload
// starts the new Host before it closes the old one) and is removed when the last one
// closes; when it is made, the directories of proxies that are gone (killed with SIGKILL,
// so nothing removed theirs) are removed.
var sockets struct {
	mu    sync.Mutex
	users int
	dir   string
	lock  *os.File
}

// acquireSockets makes sure the directory exists, for one more Host.
func acquireSockets(log zerolog.Logger) error {
	sockets.mu.Lock()
	defer sockets.mu.Unlock()
	if sockets.users == 0 {
		removeStale(log)
		dir, lock, err := makeSocketDir()
		if err != nil {
			return fmt.Errorf("making the directory for plugin sockets in %s: %w", os.TempDir(), err)
		}
		sockets.dir, sockets.lock = dir, lock
	}
	sockets.users++
	return nil
}

// releaseSockets removes the directory when the last Host closed.
func releaseSockets() {
	sockets.mu.Lock()
	defer sockets.mu.Unlock()
	if sockets.users == 0 {
		return
	}
	sockets.users--
	if sockets.users > 0 {
		return
	}
	_ = os.RemoveAll(sockets.dir)
	_ = sockets.lock.Close() // unlocks
	sockets.dir, sockets.lock = "", nil
}

// socketDir makes a directory for one plugin process's socket.
func socketDir() (string, error) {
	sockets.mu.Lock()
	root := sockets.dir
	sockets.mu.Unlock()
	if root == "" {
		return "", errors.New("the plugin host is not running")
	}
	return os.MkdirTemp(root, "")
}

// makeSocketDir makes and locks a new directory. It is made under another name and
// renamed once locked, so that another proxy cleaning up never sees it unlocked.
func makeSocketDir() (string, *os.File, error) {
	tmp := os.TempDir()
	partial, err := os.MkdirTemp(tmp, "."+socketPrefix)
	if err != nil {
		return "", nil, err
	}
	lock, err := os.OpenFile(filepath.Join(partial, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		if err = lockFile(lock); err == nil {
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

// removeStale removes the socket directories in TMPDIR whose proxy is gone: those whose
// lock file can be locked. A live proxy's stays: it holds its lock.
func removeStale(log zerolog.Logger) {
	tmp := os.TempDir()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), socketPrefix) || !ownedByMe(e) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR, 0)
		if err != nil {
			continue // not one of ours, or being removed
		}
		if lockFile(lock) == nil {
			b, _ := os.ReadFile(lock.Name())
			if err := os.RemoveAll(dir); err == nil {
				log.Info().Str("dir", dir).Str("pid", strings.TrimSpace(string(b))).
					Msg("removed the plugin sockets of a proxy that is gone")
			}
		}
		lock.Close()
	}
}
