package transport

import (
	"io"
	"runtime"
	"strings"
	"testing"
)

// TestReadStderr: a child's stderr is logged line by line (CR LF and a last line without
// a newline too); a line longer than the buffer is logged truncated and the rest of it
// dropped as it comes, however long, and the lines after it are logged whole.
func TestReadStderr(t *testing.T) {
	var writes [][]byte
	for _, s := range []string{"first\n", "crlf\r\n", "\n", strings.Repeat("x", 5<<20), "\n", strings.Repeat("y", 9<<10) + "\n", "last"} {
		writes = append(writes, []byte(s)) // five megabytes without a newline among them
	}
	pr, pw := io.Pipe()
	go func() {
		for _, b := range writes {
			pw.Write(b)
		}
		pw.Close()
	}()
	got := make([]string, 0, 8)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	readStderr(pr, func(l string) { got = append(got, l) })
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("reading a 5 MiB line allocated %d bytes: it was buffered", n)
	}
	want := []string{"first", "crlf", "", strings.Repeat("x", maxStderrLine) + "…(truncated)",
		strings.Repeat("y", maxStderrLine) + "…(truncated)", "last"}
	if len(got) != len(want) {
		t.Fatalf("%d lines logged, want %d: %.80q", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %.80q, want %.80q", i, got[i], want[i])
		}
	}
}
