package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// tableBytes is the size a committed table of t would have, laid out as the lexicon is
// (search/lexicon.go: read in place): a header, the terms' offsets (u32 each) and bytes,
// each term's vector as 100 int8, and the 100 per-dimension scales (float32).
func tableBytes(t *table) int {
	const header = 16
	return header + 4*(len(t.vec)+1) + t.keys + dim*len(t.vec) + 4*dim
}

// speed measures what the semantic part would cost per search at 1,000 tools: the
// cosine of a query's vector against every tool's (int8 and float32 kernels), a whole
// SIF-average query (analysis, lookups, scoring), and soft matching.
func speed(w io.Writer, terms []docTerms, t *table, o options) {
	const n = 1000
	var cat []docTerms
	for len(cat) < n {
		cat = append(cat, terms[:min(len(terms), n-len(cat))]...)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var q8 [dim]int8
	var q32 vec
	d8 := make([][dim]int8, n)
	d32 := make([]vec, n)
	for i := range d8 {
		for k := range dim {
			d8[i][k] = int8(rng.IntN(255) - 127)
			d32[i][k] = float32(d8[i][k]) / 127
		}
	}
	for k := range dim {
		q8[k] = int8(rng.IntN(255) - 127)
		q32[k] = float32(q8[k]) / 127
	}
	out := make([]float32, n)
	int8Kernel := median(func(b *testing.B) {
		for b.Loop() {
			for d := range d8 {
				out[d] = float32(dot8(&q8, &d8[d]))
			}
		}
	})
	f32Kernel := median(func(b *testing.B) {
		for b.Loop() {
			for d := range d32 {
				out[d] = float32(dot(&q32, &d32[d]))
			}
		}
	})
	queries := []string{"remember that Alice is the team lead", "take a screenshot of the login page", "how many rows are in the orders table", "post a message to slack"}
	avg := newAverage(t, cat, o.r0, o.pc)
	soft := newMaxSim(t, cat, o.r0, o.theta)
	whole := func(s semantic) time.Duration {
		return median(func(b *testing.B) {
			i := 0
			for b.Loop() {
				s.scores(queries[i%len(queries)])
				i++
			}
		})
	}
	avgQ, softQ := whole(avg), whole(soft)
	fmt.Fprintf(w, "speed at %d tools (one query, median of 5 runs on this machine): cosine against every tool: int8 %v, float32 %v; a whole query, SIF average (float32, map lookups) %v; soft matching %v (BM25F: about 21 µs p50)\n",
		n, int8Kernel, f32Kernel, avgQ, softQ)
}

// median runs a benchmark five times and returns the median time per op (the
// machine is shared: single runs are noisy).
func median(f func(b *testing.B)) time.Duration {
	var ds []time.Duration
	for range 5 {
		ds = append(ds, time.Duration(testing.Benchmark(f).NsPerOp()))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// dot8 is the int8 kernel: four sums, so that the loop's additions do not wait on
// each other (the compiler does not vectorise it).
func dot8(a, b *[dim]int8) int32 {
	var s0, s1, s2, s3 int32
	for k := 0; k < dim; k += 4 {
		s0 += int32(a[k]) * int32(b[k])
		s1 += int32(a[k+1]) * int32(b[k+1])
		s2 += int32(a[k+2]) * int32(b[k+2])
		s3 += int32(a[k+3]) * int32(b[k+3])
	}
	return s0 + s1 + s2 + s3
}
