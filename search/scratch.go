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
	cover   []uint32  // per document: the query words it matched (bits)
	words   uint32    // the query words found in the catalogue (bits)
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
		sc.cover = make([]uint32, n)
	}
	if sc.buf == nil {
		sc.buf = make([]byte, 0, maxWordBytes)
		sc.terms = make([]qterm, 0, maxQueryTerms)
	}
	return sc
}

func putScratch(sc *scratch) { scratchPool.Put(sc) }
