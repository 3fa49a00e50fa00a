package main

import (
	"encoding/json"
	"math"
	"sort"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/search"
)

// A tool's fields as the semantic scorers read them, with their weights: the tool's own
// name, title and description count fully, parameter names and descriptions less. The
// namespace is left out (measured: counting it made every variant worse on the
// development half).
const (
	fName = iota
	fTitle
	fDesc
	fParam
	fParamDesc
	nFields
)

var fieldWeight = [nFields]float64{1, 1, 1, 0.3, 0.3}

// docTerms are one tool's terms per field.
type docTerms [nFields][]string

func termsOf(d *search.Doc) docTerms {
	own := strings.TrimPrefix(d.Name, d.Namespace)
	names, texts := schemaText(d.InputSchema)
	return docTerms{search.Terms(own), search.Terms(d.Title), search.Terms(d.Description), search.Terms(names), search.Terms(texts)}
}

// schemaText returns an inputSchema's top-level property names and their
// descriptions (the index reads nested ones too; the semantic scorers need less).
func schemaText(raw json.RawMessage) (names, texts string) {
	var s struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return "", ""
	}
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var nb, tb strings.Builder
	for _, k := range keys {
		nb.WriteString(k + " ")
		tb.WriteString(s.Properties[k].Description + " ")
	}
	return nb.String(), tb.String()
}

// sifWeight is SIF's a/(a + p(w)) with p(w) estimated from the word's frequency rank r
// (Zipf: p ≈ 0.1/r), so that a/(a+p) = r/(r + r0) with r0 = 0.1/a: frequent words
// weigh little. A word the table lacks weighs 1 (it has no vector anyway).
func (t *table) sifWeight(term string, r0 float64) float64 {
	if r, ok := t.rank[term]; ok {
		return float64(r) / (float64(r) + r0)
	}
	return 1
}

// semantic scores a query against every tool of a catalogue.
type semantic interface {
	scores(query string) []float64
}

// average is the sentence-embedding baseline of Arora et al. (SIF): a text's vector is
// the SIF-weighted average of its words' vectors (a tool's fields weighted as above,
// each term by √tf/√(field length)), with the catalogue's first principal component
// removed from every tool's vector and the query's; the score is the cosine.
type average struct {
	t    *table
	r0   float64
	docs []vec
	pc   *vec // nil: nothing removed
}

func newAverage(t *table, docs []docTerms, r0 float64, removePC bool) *average {
	a := &average{t: t, r0: r0, docs: make([]vec, len(docs))}
	for i, dt := range docs {
		var acc [dim]float64
		for f, terms := range dt {
			if len(terms) == 0 {
				continue
			}
			tf := map[string]int{}
			for _, term := range terms {
				tf[term]++
			}
			for term, n := range tf {
				v := t.vec[term]
				if v == nil {
					continue
				}
				w := fieldWeight[f] * math.Sqrt(float64(n)) / math.Sqrt(float64(len(terms))) * t.sifWeight(term, r0)
				for d := range acc {
					acc[d] += w * float64(v[d])
				}
			}
		}
		for d := range acc {
			a.docs[i][d] = float32(acc[d])
		}
		normalize(&a.docs[i])
	}
	if removePC {
		var m [dim][dim]float64
		for i := range a.docs {
			for x := range dim {
				for y := range dim {
					m[x][y] += float64(a.docs[i][x]) * float64(a.docs[i][y])
				}
			}
		}
		pc := vec{}
		for d, x := range topComponents(&m, 1)[0] {
			pc[d] = float32(x)
		}
		a.pc = &pc
		for i := range a.docs {
			a.removePC(&a.docs[i])
		}
	}
	return a
}

func (a *average) removePC(v *vec) {
	if a.pc == nil {
		return
	}
	p := float32(dot(v, a.pc))
	for d := range v {
		v[d] -= p * a.pc[d]
	}
	normalize(v)
}

func (a *average) scores(query string) []float64 {
	var acc [dim]float64
	for _, term := range search.Terms(query) {
		v := a.t.vec[term]
		if v == nil {
			continue
		}
		w := a.t.sifWeight(term, a.r0)
		for d := range acc {
			acc[d] += w * float64(v[d])
		}
	}
	var q vec
	for d := range q {
		q[d] = float32(acc[d])
	}
	normalize(&q)
	a.removePC(&q)
	out := make([]float64, len(a.docs))
	for i := range a.docs {
		out[i] = dot(&q, &a.docs[i])
	}
	return out
}

// maxSim is per-word soft matching: each query word's best cosine among the tool's
// name, title and description words, counted above theta (rescaled to 0..1), the
// words SIF-weighted; the score is their weighted mean.
type maxSim struct {
	t     *table
	r0    float64
	theta float64
	docs  [][]*vec
}

func newMaxSim(t *table, docs []docTerms, r0, theta float64) *maxSim {
	m := &maxSim{t: t, r0: r0, theta: theta, docs: make([][]*vec, len(docs))}
	for i, dt := range docs {
		seen := map[string]bool{}
		for _, f := range []int{fName, fTitle, fDesc} {
			for _, term := range dt[f] {
				if v := t.vec[term]; v != nil && !seen[term] {
					seen[term] = true
					m.docs[i] = append(m.docs[i], v)
				}
			}
		}
	}
	return m
}

func (m *maxSim) scores(query string) []float64 {
	out := make([]float64, len(m.docs))
	wsum := 0.0
	for _, term := range search.Terms(query) {
		q := m.t.vec[term]
		if q == nil {
			continue
		}
		w := m.t.sifWeight(term, m.r0)
		wsum += w
		for i, dv := range m.docs {
			best := 0.0
			for _, v := range dv {
				best = max(best, dot(q, v))
			}
			if best > m.theta {
				out[i] += w * (best - m.theta) / (1 - m.theta)
			}
		}
	}
	if wsum > 0 {
		for i := range out {
			out[i] /= wsum
		}
	}
	return out
}
