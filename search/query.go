package search

import "math/bits"

// A query is read as concepts: each word of the query (and each shape a token has,
// shapes.go) is one concept, which looks for the word's own term at weight 1 and for
// the terms related to it at lower weights: its related words (related.go), the words
// the lexicon relates to it (lexicon.go), the catalogue's longer words it begins. A
// concept is scored as one term whose frequency in a document is the weighted sum of
// its terms' (the "weighted synonym" reading of BM25, as INQUERY's #wsyn): a document
// that holds a rare related word does not outscore one that holds the query's own
// word, and a concept's idf is that of all its terms together, each document counted
// at the weight of the best term it holds.

// qterm is one term a concept looks for, with its weight: 1 for the query's own word,
// less for a related, lexicon or prefix term.
type qterm struct {
	id int32
	w  float64
}

// concept is one query word or shape: its terms are terms[start:end].
type concept struct {
	start, end int32
	own        int32   // the word's own term, -1 when the catalogue does not hold it
	w          float64 // the concept's weight: 1 for a word, Params.Shape for a shape…
}

// maxPrefixTerms caps the catalogue words one query word finds as a prefix.
const maxPrefixTerms = 8

// minPrefixLen is the shortest query word (in bytes, once stemmed) looked for as a
// prefix: shorter ones begin too many words to mean anything.
const minPrefixLen = 4

// Query limits beyond maxQueryBytes: concepts (distinct words) and terms in all.
const (
	maxConcepts     = 32
	maxConceptTerms = 96
)

// queryConcepts analyzes query into its concepts (sc.concepts, their terms in
// sc.terms). Terms no document mask admits are dropped before anything else (the caps
// included) sees them, so that a hidden document's words cannot change what a query
// looks for. A word whose own term an earlier concept already has is read once.
func (ix *index) queryConcepts(query string, sc *scratch, mask []bool) {
	terms := sc.terms[:0]
	concepts := sc.concepts[:0]
	start := int32(0)
	add := func(id int32, w float64) {
		if len(ix.post[id]) == 0 || mask != nil && !ix.anyVisible(id, mask) {
			return // a term no (visible) document holds any more
		}
		for i := start; i < int32(len(terms)); i++ {
			if terms[i].id == id {
				if w > terms[i].w {
					terms[i].w = w
				}
				return
			}
		}
		if len(terms) < maxConceptTerms {
			terms = append(terms, qterm{id: id, w: w})
		}
	}
	// seen returns the earlier concept that has id as its own term, or -1.
	seen := func(id int32) int {
		for i, c := range concepts {
			if c.own == id {
				return i
			}
		}
		return -1
	}
	// end closes the concept begun at start, keeping it when it found a term.
	end := func(own int32, w float64) {
		if int32(len(terms)) > start && len(concepts) < maxConcepts {
			concepts = append(concepts, concept{start: start, end: int32(len(terms)), own: own, w: w})
		} else {
			terms = terms[:start]
		}
		start = int32(len(terms))
	}
	sc.changing = false
	// word makes the concept of one word of the query, at weight cw.
	word := func(t, form []byte, cw float64) {
		if !sc.changing && isChanging(t) {
			sc.changing = true
		}
		own := int32(-1)
		if id, ok := ix.voc.dict[string(t)]; ok {
			if i := seen(id); i >= 0 {
				concepts[i].w = max(concepts[i].w, cw)
				return
			}
			add(id, 1)
			if int32(len(terms)) > start {
				own = id
			}
		}
		if form != nil {
			if id, ok := ix.voc.dict[string(form)]; ok {
				add(id, 1)
			}
		}
		if ix.related > 0 {
			for _, r := range relatedVerbs[string(t)] {
				if id, ok := ix.voc.dict[r]; ok {
					add(id, ix.related)
				}
			}
		}
		if ix.abbrev > 0 {
			for _, r := range relatedNouns[string(t)] {
				if id, ok := ix.voc.dict[r]; ok {
					add(id, ix.abbrev)
				}
			}
		}
		if ix.lexicon > 0 {
			ix.lex.lookup(t, func(r string, w float64) {
				if id, ok := ix.voc.dict[r]; ok {
					add(id, ix.lexicon*w)
				}
			})
		}
		if ix.prefix > 0 && len(t) >= minPrefixLen {
			ix.prefixTerms(t, mask, func(id int32) { add(id, ix.prefix) })
		}
		if ix.service > 0 && len(t) >= minPrefixLen {
			ns := ix.nsTerms // sorted by term: those t begins follow the first not less than t
			i, hi := 0, len(ns)
			for i < hi {
				if m := int(uint(i+hi) >> 1); ix.voc.terms[ns[m]] < string(t) {
					i = m + 1
				} else {
					hi = m
				}
			}
			for ; i < len(ns); i++ {
				s := ix.voc.terms[ns[i]]
				if len(s) < len(t) || s[:len(t)] != string(t) {
					break
				}
				if len(s) > len(t) {
					add(ns[i], ix.service)
				}
			}
		}
		end(own, cw)
	}
	full := func() bool { return len(concepts) >= maxConcepts || len(terms) >= maxConceptTerms }
	shapes := readQuery(query, func(text string, value bool) {
		cw := 1.0
		if value {
			cw = ix.value
		}
		if cw <= 0 || full() {
			return
		}
		sc.buf, sc.form = wordForms(text, sc.buf, sc.form, func(t, form []byte) bool {
			word(t, form, cw)
			return !full()
		})
	})
	if ix.shape > 0 {
		for s := shape(1); s < 1<<numShapes && !full(); s <<= 1 {
			if shapes&s == 0 {
				continue
			}
			for _, t := range shapeWords[bits.TrailingZeros32(uint32(s))] {
				word([]byte(t), nil, ix.shape)
			}
		}
	}
	// A related term that is another concept's own word is that concept's alone ("how
	// high above sea level": level is said, not only related to high): counted once. A
	// concept left with no term of its own weighs nothing (not even in coverage).
	for ci := range concepts {
		c := &concepts[ci]
		left := false
		for i := c.start; i < c.end; i++ {
			if terms[i].id != c.own && seen(terms[i].id) >= 0 {
				terms[i].w = 0
			}
			left = left || terms[i].w > 0
		}
		if !left {
			c.w = 0
		}
	}
	sc.terms, sc.concepts = terms, concepts
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
