package plugins

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestSocketDirs: the directory exists while a host holds it and is removed with the
// last; a gone proxy's directory (its lock free) is removed when the next is made, a live
// one's (its lock held) never.
func TestSocketDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mkOther := func(name string, hold bool) (string, *os.File) {
		dir := filepath.Join(tmp, socketPrefix+name)
		if err := os.MkdirAll(filepath.Join(dir, "123"), 0o700); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, lockName))
		if err != nil {
			t.Fatal(err)
		}
		if hold {
			if err := lockFile(f); err != nil {
				t.Fatal(err)
			}
			return dir, f
		}
		f.Close()
		return dir, nil
	}
	gone, _ := mkOther("gone", false)
	live, held := mkOther("live", true)
	defer held.Close()
	notOurs := filepath.Join(tmp, socketPrefix+"nolock")
	if err := os.Mkdir(notOurs, 0o700); err != nil {
		t.Fatal(err)
	}

	if err := acquireSockets(zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if err := acquireSockets(zerolog.Nop()); err != nil { // a reload's second host
		t.Fatal(err)
	}
	sockets.mu.Lock()
	mine := sockets.dir
	sockets.mu.Unlock()
	if !strings.HasPrefix(filepath.Base(mine), socketPrefix) {
		t.Fatalf("the directory is %s", mine)
	}
	for dir, want := range map[string]bool{gone: false, live: true, notOurs: true, mine: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", dir, err == nil, want)
		}
	}
	sub, err := socketDir()
	if err != nil || filepath.Dir(sub) != mine {
		t.Fatalf("a plugin's directory %s (%v), want one in %s", sub, err, mine)
	}
	releaseSockets()
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("removed while a host still holds it: %v", err)
	}
	releaseSockets()
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Errorf("not removed with the last host: %v", err)
	}
	if _, err := socketDir(); err == nil {
		t.Error("a plugin's directory with no host running")
	}
}

// TestInflightDrained: a retiring host's drained channel closes when its last call
// leaves, or at once when none is in.
func TestInflightDrained(t *testing.T) {
	f := newInflight()
	f.enter()
	f.enter()
	f.leave() // not retiring yet: nothing to tell
	idle := f.drained()
	select {
	case <-idle:
		t.Fatal("drained with a call in")
	default:
	}
	f.leave()
	<-idle // closed by the last leave
	g := newInflight()
	<-g.drained() // none in: at once
}
