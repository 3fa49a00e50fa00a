package metrics

import (
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	prevHi := time.Duration(0)
	for i := range numBuckets {
		lo, hi := bucketBounds(i)
		if lo != prevHi || hi <= lo {
			t.Fatalf("bucket %d: [%v, %v) after %v", i, lo, hi, prevHi)
		}
		prevHi = hi
		for _, d := range []time.Duration{lo, hi - time.Microsecond, (lo + hi) / 2} {
			if got := bucketOf(d); got != i {
				t.Fatalf("bucketOf(%v) = %d, want %d ([%v, %v))", d, got, i, lo, hi)
			}
		}
		if i >= 8 && float64(hi)/float64(lo) > 1.26 {
			t.Errorf("bucket %d is too wide: [%v, %v)", i, lo, hi)
		}
	}
	if bucketOf(-time.Second) != 0 || bucketOf(1000*time.Hour*24) != numBuckets-1 {
		t.Error("out-of-range latencies are not clamped")
	}
}

// TestWindow: percentiles of the last minutes; older minutes drop out, and a slot is
// reused for a later minute.
func TestWindow(t *testing.T) {
	clk := newFakeClock()
	w := newWindow(5)
	if got := w.summary(clk.now()); got != (Latency{}) {
		t.Fatalf("empty window: %+v", got)
	}
	// Minute 0: 98 fast calls and 2 slow ones.
	for range 98 {
		w.observe(clk.now().Unix()/60, 10*time.Millisecond)
	}
	for range 2 {
		w.observe(clk.now().Unix()/60, 2*time.Second)
	}
	s := w.summary(clk.now())
	if s.Count != 100 || !near(s.P50, 10*time.Millisecond) || !near(s.P99, 2*time.Second) {
		t.Errorf("minute 0: %+v", s)
	}
	// Minute 3: 100 calls of 100 ms.
	clk.advance(3 * time.Minute)
	for range 100 {
		w.observe(clk.now().Unix()/60, 100*time.Millisecond)
	}
	s = w.summary(clk.now())
	if s.Count != 200 || !near(s.P50, 100*time.Millisecond) || !near(s.P99, 100*time.Millisecond) { // ranks 100 and 198 of 200
		t.Errorf("minutes 0-3: %+v", s)
	}
	// Minute 6: minute 0 is out of the window (5 minutes and the current one).
	clk.advance(3 * time.Minute)
	s = w.summary(clk.now())
	if s.Count != 100 || !near(s.P50, 100*time.Millisecond) || !near(s.P99, 100*time.Millisecond) {
		t.Errorf("minute 6: %+v", s)
	}
	// Minute 6 reuses minute 0's slot: its old counts are gone.
	w.observe(clk.now().Unix()/60, time.Millisecond)
	if s = w.summary(clk.now()); s.Count != 101 {
		t.Errorf("after reusing a slot: %+v", s)
	}
	clk.advance(10 * time.Minute)
	if s = w.summary(clk.now()); s.Count != 0 {
		t.Errorf("idle window: %+v", s)
	}
}

// near reports whether got is within the window's resolution (a quarter octave) of want.
func near(got, want time.Duration) bool {
	r := float64(got) / float64(want)
	return r > 0.85 && r < 1.2
}
