package search

import (
	"math"
	"slices"
)

// Field is one field's part in BM25F: its weight (how much one occurrence counts
// against one in the description) and its length normalisation B (0: a field's length
// does not matter; 1: fully normalised by its length against the average).
type Field struct {
	Weight float64
	B      float64
}

// Params are BM25F's parameters. The zero Params means DefaultParams; in a Params
// given otherwise, a zero weight turns its part off.
type Params struct {
	K1 float64 // term frequency saturation

	// The fields of a tool.
	Name      Field // the tool's own name, split into words
	Namespace Field // the namespace (upstream) part of the exposed name
	Title     Field
	Desc      Field // the description
	Param     Field // parameter names, nested ones included
	ParamDesc Field // parameter titles, descriptions and enum values
	// NameForm is the tool's own name's words as written (not stemmed): a query word
	// that says the same form ("channels" for list_channels) adds it to the name's.
	NameForm Field

	// What a query word also looks for, each at this weight against the word itself
	// (0 turns it off).
	Related float64 // the verbs of the related-words table (related.go): make for create
	Abbrev  float64 // its nouns, mostly abbreviations: repo for repository
	Lexicon float64 // times the lexicon's own weights: WordNet's related words (lexicon.go)
	Prefix  float64 // the catalogue's longer words a word of four letters or more begins: mongo, mongodb (off by default)
	// Service is the weight of a service's name (a namespace's word) that a query word
	// of four letters or more begins: people shorten a product's name ("elastic" for
	// elasticsearch). Only the services' names are looked for this way, so it holds
	// none of Prefix's noise.
	Service float64
	// Shape is the weight of the words a token's shape implies ("notes.txt": file;
	// "user@example.com": email; shapes.go); 0 reads no shapes.
	Shape float64
	// Value is the weight of the words inside a value (a file's or a host's name, a
	// quoted text, a number, a SQL statement: shapes.go) against other words'.
	Value float64

	// Factors.
	//
	// Asking scales down the score of a tool whose name changes something (create,
	// delete, send…) for a query that says no such verb (intent.go); 0 leaves it.
	Asking float64
	// Coverage favours documents that match more of the query: a score is multiplied
	// by (the query's concepts matched / those the catalogue holds)^Coverage, a concept
	// matched by a related word counting at that word's weight.
	Coverage float64
}

// DefaultParams are the parameters the lexical ranker uses unless told otherwise,
// chosen on the development half of the labelled query set (search/testdata/queries)
// over the committed corpus of real servers' tools, by `make bench-search
// SEARCH_BENCH_FLAGS='-tune -restarts 24 -objective recall'`, then with the aids that
// made the held-out half worse turned off (prefixes; two fields since removed):
// docs/search.md says how.
func DefaultParams() Params {
	return Params{
		K1:        3,
		Name:      Field{Weight: 3, B: 0},
		Namespace: Field{Weight: 2, B: 0},
		Title:     Field{Weight: 1, B: 0.3},
		Desc:      Field{Weight: 1, B: 0.75},
		Param:     Field{Weight: 0.6, B: 0.5},
		ParamDesc: Field{Weight: 0.5, B: 0.75},
		NameForm:  Field{Weight: 4, B: 0.3},
		Related:   0.7,
		Abbrev:    0.85,
		Lexicon:   0.25,
		Prefix:    0,
		Service:   0.85,
		Shape:     1,
		Value:     0.1,
		Asking:    0.1,
		Coverage:  0.75,
	}
}

func (p Params) fields() [numFields]Field {
	return [numFields]Field{p.Name, p.Namespace, p.Title, p.Desc, p.Param, p.ParamDesc, p.NameForm}
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
	lexicon  float64
	lex      *lexTable // when lexicon > 0 (nil if the table could not be read)
	abbrev   float64
	service  float64
	nsTerms  []int32 // the terms of the namespace field (services' names), for Service
	shape    float64
	value    float64

	docs    []Doc       // sorted by name: a document's number orders ties
	an      []*analysis // per document
	lens    [][numFields]uint16
	voc     *vocab      // the terms, numbered (shared with the next index while it can be)
	ids     [][]int32   // per document: its analysis's terms' numbers, in order
	slab    []posting   // all postings, term after term
	post    [][]posting // per term number, by document number: its part of slab
	postOff []int32     // per term number: where its postings begin in slab
	dfMain  []int32     // per term number: documents holding it in a main field
	stats   stats       // over all documents

	cache map[uint64][]*analysis // for the next Build
}

type posting struct {
	doc int32
	tf  [numFields]uint8
}

// stats are the collection statistics BM25 needs, over the documents a search may see.
type stats struct {
	n      int                // documents
	invAvg [numFields]float64 // 1 / average field length (0 for a field empty everywhere)
	// ptf, when not nil, is each posting's BM25F term frequency under these statistics,
	// by its position in the index's slab: computed once for an index and for a view,
	// so that their searches do not normalise field lengths per posting.
	ptf []float32
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
	v.stats.ptf = ix.postingTF(&v.stats)
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

// maxQueryBytes bounds the work a query costs whatever its length: a longer query is
// read up to here (query.go has the other limits).
const maxQueryBytes = 2048

func (ix *index) search(query string, limit int, mask []bool, st *stats) []Hit {
	if st.n == 0 {
		return nil
	}
	if len(query) > maxQueryBytes {
		query = query[:maxQueryBytes]
	}
	sc := getScratch(len(ix.docs))
	defer putScratch(sc)
	ix.queryConcepts(query, sc, mask)
	if len(sc.concepts) == 0 {
		return nil
	}
	scores := sc.scores[:len(ix.docs)]
	touched := sc.touched[:0]
	norm := ix.norms(st)
	for ci := range sc.concepts {
		touched = ix.scoreConcept(sc, ci, mask, st, &norm, scores, touched, nil)
	}
	ix.adjust(sc, scores, touched)
	hits := ix.top(scores, touched, limit)
	for _, d := range touched {
		scores[d] = 0
		sc.cover[d] = 0
	}
	sc.touched = touched[:0]
	return hits
}

// norms are BM25F's length normalisations: a field's term frequency is divided by
// n0[f] + nB[f] × its length.
type norms struct{ n0, nB [numFields]float64 }

func (ix *index) norms(st *stats) norms {
	var n norms
	for f, fp := range ix.fields {
		n.n0[f] = 1 - fp.B
		n.nB[f] = fp.B * st.invAvg[f]
	}
	return n
}

// postingTF computes every posting's BM25F term frequency under st (see stats.ptf).
func (ix *index) postingTF(st *stats) []float32 {
	norm := ix.norms(st)
	out := make([]float32, len(ix.slab))
	for i := range ix.slab {
		out[i] = float32(ix.fieldTF(&ix.slab[i], &norm))
	}
	return out
}

// fieldTF is a posting's BM25F term frequency: each field's count, weighted and
// normalised by the field's length.
func (ix *index) fieldTF(p *posting, norm *norms) float64 {
	l := &ix.lens[p.doc]
	tf := 0.0
	for f := range numFields {
		if p.tf[f] != 0 {
			tf += ix.fields[f].Weight * float64(p.tf[f]) / (norm.n0[f] + norm.nB[f]*float64(l[f]))
		}
	}
	return tf
}

// scoreConcept adds concept ci's part to the score of each document mask admits that
// holds one of its terms, appending the documents first scored to touched. trace, when
// not nil, is told each document's part (Explain).
//
// A concept is scored as one term: its frequency in a document is the sum of its
// terms' BM25F frequencies, saturated as one term's; that part is then scaled by the
// weight of the terms that made it (their mean weight, by frequency), so that a
// document that holds only a related word of weight w gets about w of what the word
// itself would have given it. Its document frequency counts each document at the
// weight of the best term it holds there, against the concept's heaviest term (a
// concept of related words only is as rare as they are together), and where dfOf
// would count it: a term held in a main field somewhere is counted only where it is
// in one.
func (ix *index) scoreConcept(sc *scratch, ci int, mask []bool, st *stats, norm *norms, scores []float64, touched []int32, trace func(doc int32, part, idf float64)) []int32 {
	c := sc.concepts[ci]
	ctf, craw, cdf, cbest := sc.ctf, sc.craw, sc.cdf, sc.cbest
	ct := sc.ctouched[:0]
	maxW := 0.0
	for _, qt := range sc.terms[c.start:c.end] {
		if qt.w == 0 {
			continue // another concept's own word (queryConcepts)
		}
		post := ix.post[qt.id]
		var ptf []float32
		if st.ptf != nil {
			off := ix.postOff[qt.id]
			ptf = st.ptf[off : off+int32(len(post))]
		}
		mainOnly := ix.hasMain(qt.id, mask)
		for i := range post {
			p := &post[i]
			if mask != nil && !mask[p.doc] {
				continue
			}
			var x float64
			if ptf != nil {
				x = float64(ptf[i])
			} else {
				x = float64(float32(ix.fieldTF(p, norm))) // as ptf holds it: the same score either way
			}
			if x <= 0 {
				continue // a field of weight 0
			}
			if craw[p.doc] == 0 {
				ct = append(ct, p.doc)
			}
			craw[p.doc] += x
			ctf[p.doc] += qt.w * x
			if qt.w > cbest[p.doc] {
				cbest[p.doc] = qt.w
			}
			if (!mainOnly || mainField(&p.tf)) && qt.w > cdf[p.doc] {
				cdf[p.doc] = qt.w
			}
		}
		maxW = max(maxW, qt.w)
	}
	df := 0.0
	for _, d := range ct {
		df += cdf[d]
	}
	if maxW > 0 {
		df /= maxW
	}
	idf := c.w * math.Log(1+(float64(st.n)-df+0.5)/(df+0.5))
	k1 := ix.k1
	for _, d := range ct {
		tf := craw[d]
		part := ctf[d] / tf * idf * tf * (k1 + 1) / (tf + k1)
		if scores[d] == 0 {
			touched = append(touched, d)
		}
		scores[d] += part
		sc.cover[d] += c.w * cbest[d]
		if trace != nil {
			trace(d, part, idf)
		}
		ctf[d], craw[d], cdf[d], cbest[d] = 0, 0, 0, 0
	}
	sc.ctouched = ct[:0]
	return touched
}

// conceptWeight is the sum of the query's concepts' weights: what a document that
// matched every concept with its own word would have covered.
func (sc *scratch) conceptWeight() float64 {
	n := 0.0
	for _, c := range sc.concepts {
		n += c.w
	}
	return n
}

// powFrac is math.Pow(x, e) for x in [0, 1], with the usual exponents (quarters) as
// square roots: Pow, called per document, was most of a search's time.
func powFrac(x, e float64) float64 {
	switch e {
	case 1:
		return x
	case 0.5:
		return math.Sqrt(x)
	case 0.25:
		return math.Sqrt(math.Sqrt(x))
	case 0.75:
		r := math.Sqrt(x)
		return r * math.Sqrt(r)
	}
	return math.Pow(x, e)
}

// adjust applies the factors after the sum: coverage, then asking.
func (ix *index) adjust(sc *scratch, scores []float64, touched []int32) {
	if ix.coverage > 0 {
		n := sc.conceptWeight()
		for _, d := range touched {
			scores[d] *= powFrac(sc.cover[d]/n, ix.coverage)
		}
	}
	if ix.asking > 0 && !sc.changing {
		for _, d := range touched {
			if ix.an[d].changing {
				scores[d] *= 1 - ix.asking
			}
		}
	}

}

// mainFields are the fields a term's document frequency is counted in when it occurs
// in any of them (see dfOf).
func mainField(tf *[numFields]uint8) bool {
	return tf[fieldName]|tf[fieldNamespace]|tf[fieldTitle]|tf[fieldDesc] != 0
}

// hasMain says whether a document mask admits holds term id in a main field (name,
// namespace, title, description). When one does, a term's document frequency counts
// only the documents holding it in a main field; a term only parameters hold counts
// them all. Parameter names such as "type", "id" or "query" are common to many
// schemas; counting them would make the same word rare-looking nowhere, so that a tool
// whose name is "browser_type" would gain little from the query's "type".
func (ix *index) hasMain(id int32, mask []bool) bool {
	if mask == nil {
		return ix.dfMain[id] > 0
	}
	for i, post := 0, ix.post[id]; i < len(post); i++ {
		if mask[post[i].doc] && mainField(&post[i].tf) {
			return true
		}
	}
	return false
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
