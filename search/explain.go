package search

import (
	"fmt"
	"strings"
)

// Explainer is implemented by indexes that can say why a document scored as it did.
type Explainer interface {
	// Explain describes, for the document named name, each query concept (a word of
	// the query, or a shape) it matched: the terms it matched with their weight in the
	// query (1 for the query's own word, less for a related, lexicon or prefix match)
	// and the fields they were found in, the concept's idf and its part of the score;
	// then the factors. For people (and `make bench-search`), not for programs.
	Explain(query, name string) string
}

var _ Explainer = (*index)(nil)

// Explain implements Explainer over all the index's documents.
func (ix *index) Explain(query, name string) string {
	doc := int32(-1)
	for i := range ix.docs {
		if ix.docs[i].Name == name {
			doc = int32(i)
			break
		}
	}
	if doc < 0 {
		return name + ": not indexed"
	}
	if len(query) > maxQueryBytes {
		query = query[:maxQueryBytes]
	}
	sc := getScratch(len(ix.docs))
	defer putScratch(sc)
	ix.queryConcepts(query, sc, nil)
	st := &ix.stats
	norm := ix.norms(st)
	scores := sc.scores[:len(ix.docs)]
	touched := sc.touched[:0]
	var b strings.Builder
	for ci, c := range sc.concepts {
		touched = ix.scoreConcept(sc, ci, nil, st, &norm, scores, touched, func(d int32, part, idf float64) {
			if d != doc {
				return
			}
			var matched []string
			for _, qt := range sc.terms[c.start:c.end] {
				if qt.w == 0 {
					continue
				}
				for _, p := range ix.post[qt.id] {
					if p.doc != doc {
						continue
					}
					var where []string
					for f := range numFields {
						if n := p.tf[f]; n != 0 {
							where = append(where, fmt.Sprintf("%s×%d", fieldNames[f], n))
						}
					}
					matched = append(matched, fmt.Sprintf("%s (w %.2f) in %s", ix.voc.terms[qt.id], qt.w, strings.Join(where, " ")))
				}
			}
			fmt.Fprintf(&b, "%s (idf %.2f): %.2f; ", strings.Join(matched, " + "), idf, part)
		})
	}
	total := scores[doc]
	if ix.coverage > 0 && total > 0 {
		got, asked := sc.cover[doc], sc.conceptWeight()
		c := powFrac(got/asked, ix.coverage)
		fmt.Fprintf(&b, "coverage %.2f/%.2f: ×%.2f; ", got, asked, c)
	}
	if ix.asking > 0 && !sc.changing && ix.an[doc].changing && total > 0 {
		fmt.Fprintf(&b, "changing tool for an asking query: ×%.2f; ", 1-ix.asking)
	}
	ix.adjust(sc, scores, touched)
	fmt.Fprintf(&b, "total %.2f", scores[doc])
	for _, d := range touched {
		scores[d] = 0
		sc.cover[d] = 0
	}
	sc.touched = touched[:0]
	return b.String()
}
