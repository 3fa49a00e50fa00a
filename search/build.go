package search

import (
	"slices"
	"strings"
)

// Build indexes docs. Documents whose content (name, namespace, title, description,
// inputSchema) is byte-for-byte the same as one prev indexed keep prev's analysis and
// their terms' numbers, so that a change of one upstream re-reads only that upstream's
// tools and looks up only their words; what remains per document is laying out the
// postings (see BenchmarkBuild). The Raw of each doc is kept as given: a hit hands back
// the current definition. prev is only read: it stays valid and searchable.
func (r BM25F) Build(docs []Doc, prev Index) Index {
	p := r.Params
	if p == (Params{}) {
		p = DefaultParams()
	}
	var pix *index
	switch v := prev.(type) {
	case *index:
		pix = v
	case *view:
		pix = v.ix
	}
	ix := &index{
		k1:       p.K1,
		fields:   p.fields(),
		related:  p.Related,
		prefix:   p.Prefix,
		asking:   p.Asking,
		coverage: p.Coverage,
		lexicon:  p.Lexicon,
		abbrev:   p.Abbrev,
		service:  p.Service,
		shape:    p.Shape,
		value:    p.Value,
		cache:    make(map[uint64][]*analysis, len(docs)),
	}
	// Documents in name order (equal names in the given order): sort their positions,
	// not the documents (large structs, slow to move).
	order := make([]int32, len(docs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := strings.Compare(docs[a].Name, docs[b].Name); c != 0 {
			return c
		}
		return int(a - b)
	})
	if ix.lexicon > 0 {
		ix.lex, _ = loadLexicon() // a table that cannot be read leaves it out (TestLexiconTerms reads it)
	}
	ix.docs = make([]Doc, len(docs))
	for i, o := range order {
		ix.docs[i] = docs[o]
	}
	ix.analyze(pix)
	ix.number(pix)
	ix.layOut()
	ix.stats = ix.statsOf(nil)
	ix.stats.ptf = ix.postingTF(&ix.stats)
	return ix
}

// analyze gives each document its analysis: prev's when the content is the same.
func (ix *index) analyze(prev *index) {
	var old map[uint64][]*analysis
	if prev != nil {
		old = prev.cache
	}
	ix.an = make([]*analysis, len(ix.docs))
	ix.lens = make([][numFields]uint16, len(ix.docs))
	for i := range ix.docs {
		d := &ix.docs[i]
		key := docKey(d)
		var a *analysis
		for _, c := range old[key] {
			if sameContent(&c.doc, d) {
				a = c
				break
			}
		}
		if a == nil {
			a = analyze(*d, key)
			a.doc.Raw = nil // the cache keeps what it compares, not the definition
		}
		ix.an[i] = a
		ix.lens[i] = a.lens
		if !slices.Contains(ix.cache[key], a) {
			ix.cache[key] = append(ix.cache[key], a)
		}
	}
}

// vocab numbers the terms. It is immutable once built; a build that meets new terms
// extends a copy, so term numbers stay the same from one index to the next and a
// reused analysis keeps its numbers.
type vocab struct {
	dict  map[string]int32 // term → number
	terms []string         // by number
	byStr []int32          // numbers in the order of their terms (prefix search)
}

// number gives each document's terms their numbers: a reused analysis keeps those it
// had in prev; new terms extend prev's vocabulary. When the vocabulary holds more than
// twice the terms in use (tools removed over many builds), it is rebuilt from the
// terms in use.
func (ix *index) number(prev *index) {
	var pv *vocab
	prevIDs := map[*analysis][]int32{}
	if prev != nil {
		pv = prev.voc
		for i, a := range prev.an {
			prevIDs[a] = prev.ids[i]
		}
	}
	base := int32(0)
	if pv != nil {
		base = int32(len(pv.terms))
	}
	var added []string
	addedIDs := map[string]int32{}
	ix.ids = make([][]int32, len(ix.an))
	for i, a := range ix.an {
		if ids, ok := prevIDs[a]; ok {
			ix.ids[i] = ids
			continue
		}
		ids := make([]int32, len(a.terms))
		for j, t := range a.terms {
			if pv != nil {
				if id, ok := pv.dict[t.term]; ok {
					ids[j] = id
					continue
				}
			}
			id, ok := addedIDs[t.term]
			if !ok {
				id = base + int32(len(added))
				addedIDs[t.term] = id
				added = append(added, t.term)
			}
			ids[j] = id
		}
		ix.ids[i] = ids
	}
	ix.voc = pv.extend(added, base)
	// Compact a vocabulary that is mostly terms no document holds any more.
	used := make([]bool, len(ix.voc.terms))
	live := 0
	for _, ids := range ix.ids {
		for _, id := range ids {
			if !used[id] {
				used[id] = true
				live++
			}
		}
	}
	if len(ix.voc.terms) > 2*live+64 {
		ix.compact(used)
	}
}

// extend returns v with the terms added (numbered from base on): v itself when there
// are none, else a new vocabulary (v is shared with an index in use).
func (v *vocab) extend(added []string, base int32) *vocab {
	if len(added) == 0 && v != nil {
		return v
	}
	nv := &vocab{dict: make(map[string]int32, int(base)+len(added))}
	if v != nil {
		for t, id := range v.dict {
			nv.dict[t] = id
		}
		nv.terms = append(make([]string, 0, int(base)+len(added)), v.terms...)
	}
	for i, t := range added {
		nv.dict[t] = base + int32(i)
	}
	nv.terms = append(nv.terms, added...)
	// The new terms, sorted, merged into the old order.
	fresh := make([]int32, len(added))
	for i := range fresh {
		fresh[i] = base + int32(i)
	}
	slices.SortFunc(fresh, func(a, b int32) int { return strings.Compare(nv.terms[a], nv.terms[b]) })
	var old []int32
	if v != nil {
		old = v.byStr
	}
	nv.byStr = make([]int32, 0, len(nv.terms))
	i, j := 0, 0
	for i < len(old) || j < len(fresh) {
		if j == len(fresh) || i < len(old) && nv.terms[old[i]] < nv.terms[fresh[j]] {
			nv.byStr = append(nv.byStr, old[i])
			i++
		} else {
			nv.byStr = append(nv.byStr, fresh[j])
			j++
		}
	}
	return nv
}

// compact renumbers the terms in use from 0, in a new vocabulary, and the documents'
// numbers with them (in new slices: the old ones may be prev's).
func (ix *index) compact(used []bool) {
	renum := make([]int32, len(used))
	var terms []string
	for id, u := range used {
		renum[id] = -1
		if u {
			renum[id] = int32(len(terms))
			terms = append(terms, ix.voc.terms[id])
		}
	}
	for i, ids := range ix.ids {
		n := make([]int32, len(ids))
		for j, id := range ids {
			n[j] = renum[id]
		}
		ix.ids[i] = n
	}
	ix.voc = (*vocab)(nil).extend(terms, 0)
}

// layOut builds the postings: one slab, each term's list by document number.
func (ix *index) layOut() {
	counts := make([]int32, len(ix.voc.terms))
	total := 0
	for _, ids := range ix.ids {
		for _, id := range ids {
			counts[id]++
		}
		total += len(ids)
	}
	all := make([]posting, total)
	ix.slab = all
	ix.post = make([][]posting, len(counts))
	ix.postOff = make([]int32, len(counts))
	off := 0
	for id, c := range counts {
		ix.post[id] = all[off : off : off+int(c)]
		ix.postOff[id] = int32(off)
		off += int(c)
	}
	ix.dfMain = make([]int32, len(counts))
	ix.nsTerms = ix.nsTerms[:0]
	for d, a := range ix.an {
		for j, id := range ix.ids[d] {
			tf := a.terms[j].tf
			ix.post[id] = append(ix.post[id], posting{doc: int32(d), tf: tf})
			if mainField(&tf) {
				ix.dfMain[id]++
			}
			if tf[fieldNamespace] != 0 && !slices.Contains(ix.nsTerms, id) {
				ix.nsTerms = append(ix.nsTerms, id)
			}
		}
	}
	slices.SortFunc(ix.nsTerms, func(a, b int32) int { return strings.Compare(ix.voc.terms[a], ix.voc.terms[b]) })
}
