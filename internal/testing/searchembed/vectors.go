package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/mcp-proxy/mcp-proxy/search"
)

// dim is the vectors' dimension (the package's "dimensions").
const dim = 100

type vec [dim]float32

// readVectors reads the package's JSON (words by frequency, then each word's vector
// followed by its L2 norm and its frequency rank) and returns the vectors of the n most
// frequent words, in frequency order. It streams: the 300 MB file is never held whole.
func readVectors(r io.Reader, n int) (words []string, vs []vec, err error) {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return nil, nil, err
	}
	var all []string
	found := 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		switch key {
		case "dimensions":
			var d int
			if err := dec.Decode(&d); err != nil {
				return nil, nil, err
			}
			if d != dim {
				return nil, nil, fmt.Errorf("vectors of %d dimensions, want %d", d, dim)
			}
		case "words":
			if err := dec.Decode(&all); err != nil {
				return nil, nil, err
			}
			n = min(n, len(all))
			words = all[:n]
			vs = make([]vec, n)
		case "vectors":
			if words == nil {
				return nil, nil, errors.New(`"vectors" before "words"`)
			}
			if err := expectDelim(dec, '{'); err != nil {
				return nil, nil, err
			}
			var vals []float64
			for dec.More() {
				if _, err := dec.Token(); err != nil { // the word; its rank says which
					return nil, nil, err
				}
				vals = vals[:0]
				if err := dec.Decode(&vals); err != nil {
					return nil, nil, err
				}
				if len(vals) != dim+2 {
					return nil, nil, fmt.Errorf("a vector of %d numbers, want %d", len(vals), dim+2)
				}
				if rank := int(vals[dim+1]); rank >= 0 && rank < n {
					for d := range dim {
						vs[rank][d] = float32(vals[d])
					}
					if found++; found == n {
						return words, vs, nil // the rest is rarer words
					}
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, nil, err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, err
			}
		}
	}
	if found != n {
		return nil, nil, fmt.Errorf("%d vectors found for the %d most frequent words", found, n)
	}
	return words, vs, nil
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != d {
		return fmt.Errorf("want %v, got %v", d, t)
	}
	return nil
}

// allButTheTop post-processes word vectors as Mu and Viswanath (2018) propose: subtract
// the mean and remove the top d principal components, which mostly carry word
// frequency and make frequent words everyone's neighbours. d < 0 leaves the vectors.
func allButTheTop(vs []vec, d int) {
	if d < 0 || len(vs) == 0 {
		return
	}
	var mean [dim]float64
	for i := range vs {
		for k := range mean {
			mean[k] += float64(vs[i][k])
		}
	}
	for k := range mean {
		mean[k] /= float64(len(vs))
	}
	for i := range vs {
		for k := range mean {
			vs[i][k] -= float32(mean[k])
		}
	}
	if d == 0 {
		return
	}
	var cov [dim][dim]float64
	for i := range vs {
		for a := range dim {
			va := float64(vs[i][a])
			for b := a; b < dim; b++ {
				cov[a][b] += va * float64(vs[i][b])
			}
		}
	}
	for a := range dim {
		for b := range a {
			cov[a][b] = cov[b][a]
		}
	}
	pcs := topComponents(&cov, d)
	for i := range vs {
		for _, p := range pcs {
			dp := 0.0
			for k := range p {
				dp += float64(vs[i][k]) * p[k]
			}
			for k := range p {
				vs[i][k] -= float32(dp * p[k])
			}
		}
	}
}

// topComponents returns the d leading eigenvectors of a symmetric matrix, by power
// iteration with deflation (deterministic: a fixed start).
func topComponents(m *[dim][dim]float64, d int) [][dim]float64 {
	var pcs [][dim]float64
	for range d {
		var x [dim]float64
		for k := range x {
			x[k] = 1 + float64(k%7)
		}
		for range 500 {
			var y [dim]float64
			for a := range dim {
				for b := range dim {
					y[a] += m[a][b] * x[b]
				}
			}
			for _, p := range pcs {
				dp := 0.0
				for k := range y {
					dp += y[k] * p[k]
				}
				for k := range y {
					y[k] -= dp * p[k]
				}
			}
			n := 0.0
			for k := range y {
				n += y[k] * y[k]
			}
			if n == 0 {
				break
			}
			n = math.Sqrt(n)
			for k := range y {
				x[k] = y[k] / n
			}
		}
		pcs = append(pcs, x)
	}
	return pcs
}

// table maps the analyzer's terms (search.Terms: lower-cased, stemmed) to unit vectors,
// and to the frequency rank of their most frequent word (for SIF weights).
type table struct {
	vec  map[string]*vec
	rank map[string]int
	keys int // bytes of the keys
}

// stemTable makes the table of words[:n]: each word of letters and digits that the
// analyzer makes one term of adds its unit vector to that term's, weighted by its
// estimated frequency (1/rank, Zipf); the sums are normalised. Stemming merges a
// word's forms (file, files, filed) as the index does.
func stemTable(words []string, vs []vec, n int) *table {
	t := &table{vec: map[string]*vec{}, rank: map[string]int{}}
	for i, w := range words[:n] {
		if !plainWord(w) {
			continue
		}
		ts := search.Terms(w)
		if len(ts) != 1 {
			continue
		}
		v := vs[i]
		nv := norm(&v)
		if nv == 0 {
			continue
		}
		acc := t.vec[ts[0]]
		if acc == nil {
			acc = new(vec)
			t.vec[ts[0]] = acc
			t.rank[ts[0]] = i + 1
			t.keys += len(ts[0])
		}
		wt := float32(1 / (float64(i+1) * nv))
		for d := range v {
			acc[d] += wt * v[d]
		}
	}
	for _, v := range t.vec {
		normalize(v)
	}
	return t
}

// plainWord: only letters a-z and digits (no "e-mail", "u.s.", punctuation).
func plainWord(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return w != ""
}

// quantize replaces each vector by its int8 quantization (one scale per dimension, the
// largest magnitude mapped to 127), renormalised: what a committed table would hold.
func (t *table) quantize() {
	var scale [dim]float64
	for _, v := range t.vec {
		for d, x := range v {
			scale[d] = max(scale[d], math.Abs(float64(x)))
		}
	}
	for _, v := range t.vec {
		for d, x := range v {
			if scale[d] > 0 {
				q := math.Round(float64(x) / scale[d] * 127)
				v[d] = float32(q * scale[d] / 127)
			}
		}
		normalize(v)
	}
}

func norm(v *vec) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func normalize(v *vec) {
	n := norm(v)
	if n == 0 {
		return
	}
	r := float32(1 / n)
	for d := range v {
		v[d] *= r
	}
}

func dot(a, b *vec) float64 {
	s := float32(0)
	for d := range a {
		s += a[d] * b[d]
	}
	return float64(s)
}
