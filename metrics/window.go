package metrics

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// A window keeps the latencies of the last few minutes as a ring of per-minute
// histograms, for the status page's p50 and p99. A histogram's buckets are a quarter of
// an octave wide (each bound about 19% above the last), so a percentile read from it is
// within about 10% of the true value; observing is two atomic operations and no lock,
// except once a minute when a slot is recycled.
type window struct {
	slots []slot // one per minute of the window, plus the current one

	mu sync.Mutex // serialises recycling a slot
}

// slot is one minute's histogram.
type slot struct {
	minute atomic.Int64 // Unix minute the counts belong to
	counts [numBuckets]atomic.Uint64
}

// numBuckets covers 0 to 2^40 µs (about 12 days) in quarter octaves.
const numBuckets = 4 + 38*4

func newWindow(minutes int) *window {
	return &window{slots: make([]slot, minutes+1)}
}

// bucketOf is the histogram bucket of a latency: exact below 4 µs, then four buckets per
// power of two.
func bucketOf(d time.Duration) int {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < 4 {
		return int(us)
	}
	b := bits.Len64(us) // ≥ 3
	i := 4 + (b-3)*4 + int(us>>(b-3)&3)
	return min(i, numBuckets-1)
}

// bucketBounds returns the range of latencies bucket i holds, [lo, hi).
func bucketBounds(i int) (lo, hi time.Duration) {
	if i < 4 {
		return time.Duration(i) * time.Microsecond, time.Duration(i+1) * time.Microsecond
	}
	shift := uint((i - 4) / 4)
	sub := uint64((i-4)%4) + 4
	return time.Duration(sub<<shift) * time.Microsecond, time.Duration((sub+1)<<shift) * time.Microsecond
}

// observe records one latency d of a call that ended in the given Unix minute.
func (w *window) observe(minute int64, d time.Duration) {
	s := &w.slots[minute%int64(len(w.slots))]
	if s.minute.Load() != minute {
		w.recycle(s, minute)
	}
	s.counts[bucketOf(d)].Add(1)
}

// recycle empties s for minute, unless another call already did (or s holds a later
// minute: a call that ended just before the turn of the minute is then dropped).
func (w *window) recycle(s *slot, minute int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.minute.Load() >= minute {
		return
	}
	for i := range s.counts {
		s.counts[i].Store(0)
	}
	s.minute.Store(minute)
}

// Latency summarises a window.
type Latency struct {
	Count    uint64        // calls that ended in the window
	P50, P99 time.Duration // zero when Count is zero
}

// summary merges the slots of the minutes that make up the window ending at now (the
// current minute and the len(slots)-1 before it) and reads the percentiles.
func (w *window) summary(now time.Time) Latency {
	cur := now.Unix() / 60
	var total [numBuckets]uint64
	var n uint64
	for i := range w.slots {
		s := &w.slots[i]
		if m := s.minute.Load(); m > cur || m <= cur-int64(len(w.slots)) {
			continue
		}
		for j := range s.counts {
			c := s.counts[j].Load()
			total[j] += c
			n += c
		}
	}
	if n == 0 {
		return Latency{}
	}
	return Latency{Count: n, P50: quantile(&total, n, 0.50), P99: quantile(&total, n, 0.99)}
}

// quantile is the q-quantile of n latencies in buckets: the middle of the bucket that
// holds it.
func quantile(buckets *[numBuckets]uint64, n uint64, q float64) time.Duration {
	rank := uint64(q*float64(n-1)) + 1 // 1-based rank of the q-quantile
	var seen uint64
	for i, c := range buckets {
		seen += c
		if seen >= rank {
			lo, hi := bucketBounds(i)
			return (lo + hi) / 2
		}
	}
	lo, hi := bucketBounds(numBuckets - 1)
	return (lo + hi) / 2
}
