package main

import (
	"math"
	"slices"
	"time"
)

// latencySummary describes a set of round-trip times.
type latencySummary struct {
	N    int
	P50  time.Duration
	P90  time.Duration
	P99  time.Duration
	Max  time.Duration
	Mean time.Duration
}

// summarize sorts d in place and reads its percentiles. An empty d gives the zero summary.
func summarize(d []time.Duration) latencySummary {
	if len(d) == 0 {
		return latencySummary{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	return latencySummary{
		N:    len(d),
		P50:  percentile(d, 50),
		P90:  percentile(d, 90),
		P99:  percentile(d, 99),
		Max:  d[len(d)-1],
		Mean: sum / time.Duration(len(d)),
	}
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the nearest-rank
// method: the smallest value with at least p% of the values at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// median returns the median of v (the mean of the middle two for an even count); it does
// not modify v. An empty v gives 0.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ratio returns a/b, or 0 when b is 0 (JSON has no NaN).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// us converts a duration to microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
