package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A private TMPDIR is held locked while its child runs and goes with it; a directory
// whose lock nobody holds (its proxy is gone) is removed by the first one a proxy makes,
// one that is held is not.
func TestPrivateTmpLifecycle(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	sweepOnce = sync.Once{}

	stale := filepath.Join(tmp, tmpPrefix+"gone-1")
	held := filepath.Join(tmp, tmpPrefix+"live-1")
	for _, d := range []string{stale, held} {
		if err := os.MkdirAll(filepath.Join(d, "work"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := flock(lock); err != nil {
		t.Fatal(err)
	}

	d, err := makePrivateTmp("up/a")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(d.path) != tmp || !strings.HasPrefix(filepath.Base(d.path), tmpPrefix+"up_a-") {
		t.Errorf("private TMPDIR %s, want %s/%sup_a-…", d.path, tmp, tmpPrefix)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the gone proxy's directory is still there (%v)", err)
	}
	if _, err := os.Stat(held); err != nil {
		t.Errorf("the live proxy's directory was removed: %v", err)
	}
	other, err := os.Open(d.path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := flock(other); err == nil {
		t.Error("the private TMPDIR is not locked while in use")
	}
	d.remove()
	if _, err := os.Stat(d.path); !os.IsNotExist(err) {
		t.Errorf("%s is still there after its removal (%v)", d.path, err)
	}
}
