package search

// qterm is one term a query looks for, with its weight: 1 for the query's own words,
// Params.Related for a related word, Params.Prefix for a longer word one of the query's
// begins.
type qterm struct {
	id  int32
	w   float64
	src uint32 // bit of the query word it comes from (for Params.Coverage)
}

// maxPrefixTerms caps the catalogue words one query word finds as a prefix.
const maxPrefixTerms = 8

// minPrefixLen is the shortest query word (in bytes, once stemmed) looked for as a
// prefix: shorter ones begin too many words to mean anything.
const minPrefixLen = 4

// queryTerms analyzes query into the terms to look for, each once (at its greatest
// weight), at most maxQueryTerms. Terms no document mask admits are dropped before
// anything else (the caps included) sees them, so that a hidden document's words
// cannot change what a query looks for.
func (ix *index) queryTerms(query string, sc *scratch, mask []bool) []qterm {
	terms := sc.terms[:0]
	word := 0 // the query word's number, for its bit
	add := func(id int32, w float64) {
		if len(ix.post[id]) == 0 || mask != nil && !ix.anyVisible(id, mask) {
			return // a term no (visible) document holds any more
		}
		bit := uint32(1) << (word % 32)
		sc.words |= bit
		for i := range terms {
			if terms[i].id == id {
				terms[i].src |= bit
				if w > terms[i].w {
					terms[i].w = w
				}
				return
			}
		}
		if len(terms) < maxQueryTerms {
			terms = append(terms, qterm{id: id, w: w, src: bit})
		}
	}
	sc.words = 0
	sc.changing = false
	sc.buf = words(query, sc.buf, func(t []byte) bool {
		if !sc.changing && isChanging(t) {
			sc.changing = true
		}
		if id, ok := ix.voc.dict[string(t)]; ok {
			add(id, 1)
		}
		if ix.related > 0 {
			for _, r := range related[string(t)] {
				if id, ok := ix.voc.dict[r]; ok {
					add(id, ix.related)
				}
			}
		}
		if ix.prefix > 0 && len(t) >= minPrefixLen {
			ix.prefixTerms(t, mask, func(id int32) { add(id, ix.prefix) })
		}
		word++
		return len(terms) < maxQueryTerms
	})
	if ix.related > 0 && len(terms) < maxQueryTerms {
		shapeWords(query, func(term string) {
			if id, ok := ix.voc.dict[term]; ok {
				add(id, ix.related)
			}
		})
	}
	sc.terms = terms
	return terms
}

// anyVisible says whether a document mask admits holds term id.
func (ix *index) anyVisible(id int32, mask []bool) bool {
	for _, p := range ix.post[id] {
		if mask[p.doc] {
			return true
		}
	}
	return false
}

// prefixTerms calls f with the catalogue's terms that are longer than p and begin
// with it and that a document mask admits holds, at most maxPrefixTerms, in term order.
func (ix *index) prefixTerms(p []byte, mask []bool, f func(id int32)) {
	// The first term not less than p.
	lo, hi := 0, len(ix.voc.byStr)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ix.voc.terms[ix.voc.byStr[m]] < string(p) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	n := 0
	for i := lo; i < len(ix.voc.byStr) && n < maxPrefixTerms; i++ {
		t := ix.voc.terms[ix.voc.byStr[i]]
		if len(t) < len(p) || t[:len(p)] != string(p) {
			break
		}
		if id := ix.voc.byStr[i]; len(t) > len(p) && len(ix.post[id]) > 0 && (mask == nil || ix.anyVisible(id, mask)) {
			f(id)
			n++
		}
	}
}
