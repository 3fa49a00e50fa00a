package search

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// Explainer is implemented by indexes that can say why a document scored as it did.
type Explainer interface {
	// Explain describes, for the document named name, each query term it matched:
	// the term, its weight in the query (1 for the query's own word, less for a related
	// or prefix match), its idf, the fields it was found in with their counts, and its
	// part of the score. For people (and `make bench-search`), not for programs.
	Explain(query, name string) string
}

var _ Explainer = (*index)(nil)

// Explain implements Explainer over all the index's documents.
func (ix *index) Explain(query, name string) string {
	doc := -1
	for i := range ix.docs {
		if ix.docs[i].Name == name {
			doc = i
			break
		}
	}
	if doc < 0 {
		return name + ": not indexed"
	}
	sc := getScratch(len(ix.docs))
	defer putScratch(sc)
	terms := ix.queryTerms(query, sc, nil)
	st := &ix.stats
	var b strings.Builder
	total := 0.0
	var matched uint32
	for _, qt := range terms {
		post := ix.post[qt.id]
		df := ix.dfOf(qt.id, nil)
		idf := qt.w * math.Log(1+(float64(st.n)-float64(df)+0.5)/(float64(df)+0.5))
		for i := range post {
			if int(post[i].doc) != doc {
				continue
			}
			tf := 0.0
			var where []string
			for f := range numFields {
				if c := post[i].tf[f]; c != 0 {
					fp := ix.fields[f]
					tf += fp.Weight * float64(c) / (1 - fp.B + fp.B*st.invAvg[f]*float64(ix.lens[doc][f]))
					where = append(where, fmt.Sprintf("%s×%d", fieldNames[f], c))
				}
			}
			part := idf * tf * (ix.k1 + 1) / (tf + ix.k1)
			total += part
			matched |= qt.src
			fmt.Fprintf(&b, "%s (w %.2f, idf %.2f) in %s: %.2f; ", ix.voc.terms[qt.id], qt.w, idf/qt.w, strings.Join(where, " "), part)
		}
	}
	if ix.coverage > 0 && total > 0 {
		got, asked := bits.OnesCount32(matched), bits.OnesCount32(sc.words)
		c := math.Pow(float64(got)/float64(asked), ix.coverage)
		fmt.Fprintf(&b, "coverage %d/%d: ×%.2f; ", got, asked, c)
		total *= c
	}
	if ix.asking > 0 && !sc.changing && ix.an[doc].changing {
		fmt.Fprintf(&b, "changing tool for an asking query: ×%.2f; ", 1-ix.asking)
		total *= 1 - ix.asking
	}
	fmt.Fprintf(&b, "total %.2f", total)
	return b.String()
}
