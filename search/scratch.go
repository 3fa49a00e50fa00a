package search

import "sync"

// scratch is a search's working memory, pooled so that a warm search allocates only
// its result.
type scratch struct {
	scores  []float64 // per document; all zero between uses
	touched []int32   // documents with a score
	mask    []bool    // per document: visible
	terms   []qterm   // the query's terms
	buf     []byte    // the analyzer's word
	form    []byte    // and its form (wordForms)
	cover   []float64 // per document: the concepts it matched, each at its best term's weight
	// One concept's working sums, per document: its frequency and its document
	// frequency weight; ctouched lists the documents they are set for.
	ctf, craw, cdf, cbest []float64
	ctouched              []int32
	concepts              []concept // the query's concepts
	// changing: the query says a changing verb (intent.go).
	changing bool
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// getScratch returns a scratch sized for n documents.
func getScratch(n int) *scratch {
	sc := scratchPool.Get().(*scratch)
	if cap(sc.scores) < n {
		sc.scores = make([]float64, n)
		sc.mask = make([]bool, n)
		sc.touched = make([]int32, 0, n)
		sc.cover = make([]float64, n)
		sc.craw = make([]float64, n)
		sc.cbest = make([]float64, n)
		sc.ctf = make([]float64, n)
		sc.cdf = make([]float64, n)
		sc.ctouched = make([]int32, 0, n)
	}
	if sc.buf == nil {
		sc.buf = make([]byte, 0, maxWordBytes)
		sc.form = make([]byte, 0, maxWordBytes+1)
		sc.terms = make([]qterm, 0, maxConceptTerms)
		sc.concepts = make([]concept, 0, maxConcepts)
	}
	return sc
}

func putScratch(sc *scratch) { scratchPool.Put(sc) }
