// Package leaktest is for tests only: it fails a test that leaves goroutines behind.
package leaktest

import (
	"runtime"
	"testing"
	"time"
)

// Check fails t when, once everything t set up afterwards has been cleaned up, more
// goroutines run than when Check was called. They get up to wait to finish (Cleanup
// functions run last-registered first, so this one runs after the test's own).
func Check(t testing.TB, wait time.Duration) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(wait)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines left behind (started with %d):\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
