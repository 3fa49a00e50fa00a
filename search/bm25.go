package search

import (
	"math"
	"math/bits"
	"slices"
)

// Field is one field's part in BM25F: its weight (how much one occurrence counts
// against one in the description) and its length normalisation B (0: a field's length
// does not matter; 1: fully normalised by its length against the average).
type Field struct {
	Weight float64
	B      float64
}

// Params are BM25F's parameters. The zero Params means DefaultParams.
type Params struct {
	K1 float64 // term frequency saturation

	Name      Field // the tool's own name, split into words
	Namespace Field // the namespace (upstream) part of the exposed name
	Title     Field
	Desc      Field // the description
	Param     Field // parameter names, nested ones included
	ParamDesc Field // parameter titles, descriptions and enum values

	// Related is the weight of a query word's related words (the table in related.go)
	// against the word itself; 0 looks for the word only.
	Related float64
	// Prefix is the weight of the catalogue's longer words that a query word of four
	// letters or more begins ("mongo" finds "mongodb", "config" "configuration"); 0
	// matches whole words only.
	Prefix float64
	// Asking scales down the score of a tool whose name changes something (create,
	// delete, send…) for a query that says no such verb (intent.go); 0 leaves it.
	Asking float64
	// Coverage favours documents that match more of the query's words: a score is
	// multiplied by (matched words / query words found in the catalogue)^Coverage.
	Coverage float64
}

// DefaultParams are the parameters the lexical ranker uses unless told otherwise,
// chosen on the development half of the labelled query set (search/testdata/queries)
// over the committed corpus of real servers' tools; docs/search.md says how.
func DefaultParams() Params {
	return Params{
		K1:        2,
		Name:      Field{Weight: 4, B: 0.3},
		Namespace: Field{Weight: 3, B: 0},
		Title:     Field{Weight: 2, B: 0.3},
		Desc:      Field{Weight: 1, B: 0.75},
		Param:     Field{Weight: 1, B: 0.5},
		ParamDesc: Field{Weight: 0.5, B: 0.75},
		Related:   0.5,
		Prefix:    0.3,
		Asking:    0.2,
		Coverage:  0.5,
	}
}

func (p Params) fields() [numFields]Field {
	return [numFields]Field{p.Name, p.Namespace, p.Title, p.Desc, p.Param, p.ParamDesc}
}

// BM25F is the default ranker: lexical (the analyzer's terms, see Terms), BM25F over
// the fields of each tool, deterministic. Its zero value uses DefaultParams.
type BM25F struct {
	Params Params
}

var _ Ranker = BM25F{}

// index is a BM25F index: immutable once built.
type index struct {
	k1       float64
	fields   [numFields]Field
	related  float64
	prefix   float64
	asking   float64
	coverage float64

	docs   []Doc       // sorted by name: a document's number orders ties
	an     []*analysis // per document
	lens   [][numFields]uint16
	voc    *vocab      // the terms, numbered (shared with the next index while it can be)
	ids    [][]int32   // per document: its analysis's terms' numbers, in order
	post   [][]posting // per term number, by document number
	dfMain []int32     // per term number: documents holding it in a main field
	stats  stats       // over all documents

	cache map[uint64][]*analysis // for the next Build
}

type posting struct {
	doc int32
	tf  [numFields]uint16
}

// stats are the collection statistics BM25 needs, over the documents a search may see.
type stats struct {
	n      int                // documents
	invAvg [numFields]float64 // 1 / average field length (0 for a field empty everywhere)
}

var _ Index = (*index)(nil)

// statsOf computes the statistics over the documents mask admits (all when nil).
func (ix *index) statsOf(mask []bool) stats {
	var s stats
	var sum [numFields]float64
	for d, l := range ix.lens {
		if mask != nil && !mask[d] {
			continue
		}
		s.n++
		for f := range l {
			sum[f] += float64(l[f])
		}
	}
	for f := range sum {
		if sum[f] > 0 {
			s.invAvg[f] = float64(s.n) / sum[f]
		}
	}
	return s
}

// Len is the number of documents indexed.
func (ix *index) Len() int { return len(ix.docs) }

// Search ranks the documents visible admits against query. Hidden documents are
// excluded before anything is counted: the collection statistics (number of documents,
// how many hold each term, average field lengths) are those of the visible documents
// only, so a result, and each score in it, is exactly what an index of the visible
// documents alone would give. Nothing about a hidden tool can be read from it.
func (ix *index) Search(query string, limit int, visible func(name string) bool) []Hit {
	if limit <= 0 || len(ix.docs) == 0 {
		return nil
	}
	if visible == nil {
		return ix.search(query, limit, nil, &ix.stats)
	}
	sc := getScratch(len(ix.docs))
	defer putScratch(sc)
	mask := sc.mask[:len(ix.docs)]
	for i := range ix.docs {
		mask[i] = visible(ix.docs[i].Name)
	}
	st := ix.statsOf(mask)
	return ix.search(query, limit, mask, &st)
}

// Restrict returns an Index of the documents visible admits, computed once: a caller
// that serves many searches to one principal over one catalogue (a session's view)
// keeps it instead of passing visible to every Search. Its results are those of Search
// with the same visible function.
func (ix *index) Restrict(visible func(name string) bool) Index {
	v := &view{ix: ix, mask: make([]bool, len(ix.docs))}
	for i := range ix.docs {
		if v.mask[i] = visible(ix.docs[i].Name); v.mask[i] {
			v.n++
		}
	}
	v.stats = ix.statsOf(v.mask)
	return v
}

// Restricter is implemented by indexes that can precompute a principal's view.
type Restricter interface {
	Restrict(visible func(name string) bool) Index
}

var _ Restricter = (*index)(nil)

// view is an index seen through a visibility mask.
type view struct {
	ix    *index
	mask  []bool
	n     int
	stats stats
}

var _ Index = (*view)(nil)

func (v *view) Len() int { return v.n }

// Search on a view with a further visible function narrows the view again.
func (v *view) Search(query string, limit int, visible func(name string) bool) []Hit {
	if limit <= 0 || v.n == 0 {
		return nil
	}
	if visible == nil {
		return v.ix.search(query, limit, v.mask, &v.stats)
	}
	sc := getScratch(len(v.ix.docs))
	defer putScratch(sc)
	mask := sc.mask[:len(v.ix.docs)]
	for i := range v.ix.docs {
		mask[i] = v.mask[i] && visible(v.ix.docs[i].Name)
	}
	st := v.ix.statsOf(mask)
	return v.ix.search(query, limit, mask, &st)
}

// Query limits: the work a query costs is bounded whatever its length.
const (
	maxQueryBytes = 2048 // a longer query is read up to here
	maxQueryTerms = 32   // distinct known terms used
)

func (ix *index) search(query string, limit int, mask []bool, st *stats) []Hit {
	if st.n == 0 {
		return nil
	}
	if len(query) > maxQueryBytes {
		query = query[:maxQueryBytes]
	}
	sc := getScratch(len(ix.docs))
	defer putScratch(sc)
	terms := ix.queryTerms(query, sc, mask)
	if len(terms) == 0 {
		return nil
	}
	scores := sc.scores[:len(ix.docs)]
	touched := sc.touched[:0]
	k1 := ix.k1
	var norm0, normB [numFields]float64 // norm = norm0 + normB * length
	for f, fp := range ix.fields {
		norm0[f] = 1 - fp.B
		normB[f] = fp.B * st.invAvg[f]
	}
	for _, qt := range terms {
		post := ix.post[qt.id]
		df := ix.dfOf(qt.id, mask)
		if df == 0 {
			continue
		}
		idf := qt.w * math.Log(1+(float64(st.n)-float64(df)+0.5)/(float64(df)+0.5))
		for i := range post {
			p := &post[i]
			if mask != nil && !mask[p.doc] {
				continue
			}
			l := &ix.lens[p.doc]
			tf := 0.0
			for f := range numFields {
				if p.tf[f] != 0 {
					tf += ix.fields[f].Weight * float64(p.tf[f]) / (norm0[f] + normB[f]*float64(l[f]))
				}
			}
			if scores[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			scores[p.doc] += idf * tf * (k1 + 1) / (tf + k1)
			sc.cover[p.doc] |= qt.src
		}
	}
	if ix.coverage > 0 {
		n := float64(bits.OnesCount32(sc.words))
		for _, d := range touched {
			scores[d] *= math.Pow(float64(bits.OnesCount32(sc.cover[d]))/n, ix.coverage)
		}
	}
	if ix.asking > 0 && !sc.changing {
		for _, d := range touched {
			if ix.an[d].changing {
				scores[d] *= 1 - ix.asking
			}
		}
	}
	hits := ix.top(scores, touched, limit)
	for _, d := range touched {
		scores[d] = 0
		sc.cover[d] = 0
	}
	sc.touched = touched[:0]
	return hits
}

// mainFields are the fields a term's document frequency is counted in when it occurs
// in any of them (see dfOf).
func mainField(tf *[numFields]uint16) bool {
	return tf[fieldName]|tf[fieldNamespace]|tf[fieldTitle]|tf[fieldDesc] != 0
}

var idfMainOnly = true

// dfOf is the number of documents mask admits that hold term id in a main field (name,
// namespace, title, description), or, for a term that only parameters hold, in any.
// Parameter names such as "type", "id" or "query" are common to many schemas; counting
// them would make the same word rare-looking nowhere, so that a tool whose name is
// "browser_type" would gain little from the query's "type".
func (ix *index) dfOf(id int32, mask []bool) int {
	post := ix.post[id]
	if mask == nil && !idfMainOnly {
		return len(post)
	}
	if mask == nil {
		if n := ix.dfMain[id]; n > 0 {
			return int(n)
		}
		return len(post)
	}
	all, main := 0, 0
	for i := range post {
		if mask[post[i].doc] {
			all++
			if idfMainOnly && mainField(&post[i].tf) {
				main++
			}
		}
	}
	if main > 0 {
		return main
	}
	return all
}

// top returns the limit best of touched, best first, ties by name (document numbers
// follow names).
func (ix *index) top(scores []float64, touched []int32, limit int) []Hit {
	better := func(a, b int32) bool {
		if scores[a] != scores[b] {
			return scores[a] > scores[b]
		}
		return a < b
	}
	if limit > len(touched) {
		limit = len(touched)
	}
	if limit > 64 {
		// A large limit: sort them all (touched is scratch, its order is free).
		slices.SortFunc(touched, func(a, b int32) int {
			if better(a, b) {
				return -1
			}
			if better(b, a) {
				return 1
			}
			return 0
		})
		hits := make([]Hit, limit)
		for i, d := range touched[:limit] {
			hits[i] = Hit{Doc: &ix.docs[d], Score: scores[d]}
		}
		return hits
	}
	// A bounded insertion list: limits are small (a model asks for a handful).
	best := make([]int32, 0, limit)
	for _, d := range touched {
		if scores[d] <= 0 {
			continue
		}
		if len(best) == limit && !better(d, best[len(best)-1]) {
			continue
		}
		if len(best) < limit {
			best = append(best, d)
		} else {
			best[len(best)-1] = d
		}
		for i := len(best) - 1; i > 0 && better(best[i], best[i-1]); i-- {
			best[i], best[i-1] = best[i-1], best[i]
		}
	}
	hits := make([]Hit, len(best))
	for i, d := range best {
		hits[i] = Hit{Doc: &ix.docs[d], Score: scores[d]}
	}
	return hits
}
