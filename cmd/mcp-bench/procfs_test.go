package main

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cachedPages counts the pages of the file at path that are in the page cache
// (mincore over a read-only mapping of it).
func cachedPages(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

func TestEvictPageCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bin")
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // dirty pages are not dropped, only clean ones
		t.Fatal(err)
	}
	f.Close()
	if _, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	before := cachedPages(t, path)
	if err := evictPageCache(path); err != nil {
		t.Fatal(err)
	}
	after := cachedPages(t, path)
	if before == 0 || after >= before {
		t.Errorf("cached pages: %d before eviction, %d after; want fewer after", before, after)
	}
	if err := evictPageCache(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("no error for a missing file")
	}
}

func TestParseSwitches(t *testing.T) {
	status := "Name:\tmcp-proxy\nThreads:\t8\nvoluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t7\n"
	if got := parseSwitches(status); got != 157 {
		t.Fatalf("parseSwitches = %d, want 157", got)
	}
	if got := parseSwitches("Name:\tx\n"); got != 0 {
		t.Fatalf("parseSwitches without the lines = %d, want 0", got)
	}
	if n := readSwitches(os.Getpid()); n <= 0 {
		t.Fatalf("readSwitches(self) = %d, want > 0", n)
	}
}
