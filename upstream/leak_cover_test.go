package upstream

import (
	"runtime"
	"testing"
	"time"
)

// noLeaks fails the test when, once everything the test set up afterwards has been
// cleaned up, more goroutines run than before it (they get a moment to finish).
func noLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
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
