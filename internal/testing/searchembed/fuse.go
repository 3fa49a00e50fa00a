package main

import (
	"fmt"
	"math"
	"sort"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/searcheval"
	"github.com/mcp-proxy/mcp-proxy/search"
)

// fusion combines a query's BM25F scores with its semantic scores.
type fusion struct {
	kind string  // bm25, semantic, linear, z, rrf
	lam  float64 // the semantic part's weight
	z0   float64 // z: the z-score above which the semantic part counts
	k    float64 // rrf: the rank constant
}

func (f fusion) String() string {
	switch f.kind {
	case "linear":
		return fmt.Sprintf("linear λ=%g", f.lam)
	case "z":
		return fmt.Sprintf("z-score λ=%g z0=%g", f.lam, f.z0)
	case "rrf":
		return fmt.Sprintf("RRF k=%g λ=%g", f.k, f.lam)
	}
	return f.kind
}

// grid is every fusion tried: linear interpolation of max-normalised BM25F and min-max
// normalised semantic scores; BM25F plus the semantic z-score above z0 (a tool the
// semantic scorer singles out gains, the others keep BM25F's order); reciprocal rank
// fusion (a tool BM25F did not match has only its semantic rank).
func grid() []fusion {
	var g []fusion
	for _, lam := range []float64{0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5} {
		g = append(g, fusion{kind: "linear", lam: lam})
		for _, z0 := range []float64{1, 2, 3} {
			g = append(g, fusion{kind: "z", lam: lam, z0: z0})
		}
	}
	for _, k := range []float64{5, 20, 60} {
		for _, lam := range []float64{0.1, 0.2, 0.3, 0.5} {
			g = append(g, fusion{kind: "rrf", k: k, lam: lam})
		}
	}
	return g
}

// fused is a search.Index over one catalogue that ranks by a fusion of BM25F and a
// semantic scorer, so that searcheval measures it as it measures the ranker. Both
// parts' scores are kept per query (the grid asks the same queries many times). It
// serves the benchmark only: no visibility function, not safe for concurrent use.
type fused struct {
	docs []search.Doc // in name order, as the semantic scorer's
	pos  map[string]int
	bm   search.Index
	sem  semantic
	f    fusion
	memo map[string][2][]float64
}

func newFused(docs []search.Doc, bm search.Index, sem semantic) *fused {
	x := &fused{docs: docs, pos: map[string]int{}, bm: bm, sem: sem, memo: map[string][2][]float64{}}
	for i, d := range docs {
		x.pos[d.Name] = i
	}
	return x
}

func (x *fused) Len() int { return len(x.docs) }

func (x *fused) parts(query string) (bm, sem []float64) {
	if p, ok := x.memo[query]; ok {
		return p[0], p[1]
	}
	bm = make([]float64, len(x.docs))
	for _, h := range x.bm.Search(query, len(x.docs), nil) {
		bm[x.pos[h.Doc.Name]] = h.Score
	}
	if x.sem != nil {
		sem = x.sem.scores(query)
	}
	x.memo[query] = [2][]float64{bm, sem}
	return bm, sem
}

func (x *fused) Search(query string, limit int, visible func(string) bool) []search.Hit {
	if visible != nil {
		panic("searchembed: the benchmark's index takes no visibility function")
	}
	bm, sem := x.parts(query)
	s := x.f.combine(bm, sem)
	order := make([]int, 0, len(s))
	for i, v := range s {
		if v > 0 || x.f.kind != "bm25" && v != 0 {
			order = append(order, i)
		}
	}
	// Best first, ties by name (the documents are in name order), as the index does.
	sort.SliceStable(order, func(a, b int) bool { return s[order[a]] > s[order[b]] })
	if len(order) > limit {
		order = order[:limit]
	}
	hits := make([]search.Hit, len(order))
	for i, d := range order {
		hits[i] = search.Hit{Doc: &x.docs[d], Score: s[d]}
	}
	return hits
}

func (f fusion) combine(bm, sem []float64) []float64 {
	out := make([]float64, len(bm))
	switch f.kind {
	case "bm25":
		copy(out, bm)
	case "semantic":
		copy(out, sem)
	case "linear":
		b, s := maxNorm(bm), minMax(sem)
		for i := range out {
			out[i] = (1-f.lam)*b[i] + f.lam*s[i]
		}
	case "z":
		b, z := maxNorm(bm), zScores(sem)
		for i := range out {
			out[i] = b[i] + f.lam*max(0, z[i]-f.z0)
		}
	case "rrf":
		rb, rs := ranks(bm), ranks(sem)
		for i := range out {
			if bm[i] > 0 {
				out[i] += (1 - f.lam) / (f.k + float64(rb[i]))
			}
			out[i] += f.lam / (f.k + float64(rs[i]))
		}
	}
	return out
}

func maxNorm(s []float64) []float64 {
	m := 0.0
	for _, x := range s {
		m = max(m, x)
	}
	out := make([]float64, len(s))
	if m > 0 {
		for i, x := range s {
			out[i] = x / m
		}
	}
	return out
}

func minMax(s []float64) []float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range s {
		lo, hi = min(lo, x), max(hi, x)
	}
	out := make([]float64, len(s))
	if hi > lo {
		for i, x := range s {
			out[i] = (x - lo) / (hi - lo)
		}
	}
	return out
}

func zScores(s []float64) []float64 {
	m, v := 0.0, 0.0
	for _, x := range s {
		m += x
	}
	m /= float64(len(s))
	for _, x := range s {
		v += (x - m) * (x - m)
	}
	sd := math.Sqrt(v / float64(len(s)))
	out := make([]float64, len(s))
	if sd > 0 {
		for i, x := range s {
			out[i] = (x - m) / sd
		}
	}
	return out
}

// ranks returns each position's rank (1 = best) by score, ties by position.
func ranks(s []float64) []int {
	order := make([]int, len(s))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return s[order[a]] > s[order[b]] })
	r := make([]int, len(s))
	for k, i := range order {
		r[i] = k + 1
	}
	return r
}

// figures are one ranker's results on the whole set and on each half.
type figures struct{ whole, dev, held searcheval.Result }

func measure(ix search.Index, qs, dev, held []searcheval.Query) figures {
	return figures{searcheval.Evaluate(ix, qs), searcheval.Evaluate(ix, dev), searcheval.Evaluate(ix, held)}
}

func cell(r searcheval.Result) string {
	return fmt.Sprintf("%.3f / %.3f / %.3f", r.Recall1(), r.Recall5(), r.MRR())
}

func (f figures) row(name string) string {
	return fmt.Sprintf("| %s | %s | %s | %s |", name, cell(f.whole), cell(f.dev), cell(f.held))
}

// better orders results as the tuner's recall objective does: recall@1 + recall@5,
// then MRR.
func better(a, b searcheval.Result) bool {
	if a.At1+a.At5 != b.At1+b.At5 {
		return a.At1+a.At5 > b.At1+b.At5
	}
	return a.MRR() > b.MRR()
}

// bestOnDev tries every fusion of the grid and returns the one best on the development
// half (the held-out half is only reported), with its figures; ties keep the earlier
// (lighter) fusion.
func bestOnDev(x *fused, qs, dev, held []searcheval.Query) (fusion, figures) {
	var best fusion
	var bestDev searcheval.Result
	for i, f := range grid() {
		x.f = f
		if r := searcheval.Evaluate(x, dev); i == 0 || better(r, bestDev) {
			best, bestDev = f, r
		}
	}
	x.f = best
	return best, measure(x, qs, dev, held)
}
