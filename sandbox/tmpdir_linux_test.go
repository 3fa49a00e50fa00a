package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// Private TMPDIRs live in one locked directory per proxy, which goes with the last of
// them; a directory whose lock nobody holds (its proxy is gone) is removed when the next
// one is made, one that is held is not.
func TestPrivateTmpLifecycle(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	tmpdirs.swept = false

	stale := filepath.Join(tmp, tmpPrefix+"gone")
	held := filepath.Join(tmp, tmpPrefix+"live")
	for _, d := range []string{stale, held} {
		if err := os.MkdirAll(filepath.Join(d, "child-1"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, tmpLock), []byte("1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := os.OpenFile(filepath.Join(held, tmpLock), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	err = flock(lock)
	if err != nil {
		t.Fatal(err)
	}

	a, err := privateTmp("up/a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := privateTmp("b")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(a)
	if filepath.Dir(b) != root || filepath.Dir(root) != tmp {
		t.Fatalf("private TMPDIRs %s and %s, want both in one directory in %s", a, b, tmp)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the gone proxy's directory is still there (%v)", err)
	}
	if _, err := os.Stat(held); err != nil {
		t.Errorf("the live proxy's directory was removed: %v", err)
	}
	removePrivateTmp(a)
	if _, err := os.Stat(a); !os.IsNotExist(err) {
		t.Errorf("%s is still there after its removal (%v)", a, err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Errorf("the proxy's directory went while %s is in use: %v", b, err)
	}
	removePrivateTmp(b)
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the proxy's directory is still there after its last private TMPDIR (%v)", err)
	}
}
