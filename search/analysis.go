package search

import (
	"bytes"
	"hash/maphash"
	"slices"
	"strings"
)

// The fields of a document, each with its own weight and length normalisation.
const (
	fieldName      = iota // the tool's own name, split into words
	fieldNamespace        // the namespace (upstream) part of the exposed name
	fieldTitle            // title or annotations.title
	fieldDesc             // description
	fieldParam            // parameter names, nested ones included
	fieldParamDesc        // parameter titles, descriptions and enum values
	fieldNameForm         // the own name's words as written (formMark terms)
	numFields
)

var fieldNames = [numFields]string{"name", "namespace", "title", "description", "param", "param_description", "name_form"}

// analysis is what the index learns of one document: its distinct terms with their
// frequency per field, and each field's length in terms. It depends on the document's
// content only (not on the other documents nor on the scoring parameters), so a build
// reuses the analysis of every document that did not change.
type analysis struct {
	doc   Doc // as analysed: compared in full before reuse
	key   uint64
	terms []termFreq // sorted by term
	lens  [numFields]uint16
	// changing: the tool's own name holds a changing verb (intent.go).
	changing bool
}

type termFreq struct {
	term string
	tf   [numFields]uint8 // per field, capped at 255 (BM25 saturates long before)
}

// docKey hashes the content the analysis reads. A hit in the previous index's cache is
// confirmed by comparing the content itself (sameContent), so a collision costs only
// a fresh analysis.
func docKey(d *Doc) uint64 {
	var h maphash.Hash
	h.SetSeed(keySeed)
	for _, s := range [...]string{d.Namespace, d.Name, d.Title, d.Description} {
		h.WriteString(s)
		h.WriteByte(0xff)
	}
	h.Write(d.InputSchema)
	return h.Sum64()
}

// keySeed seeds docKey: keys are compared only within one process (an index and the
// next one built from it).
var keySeed = maphash.MakeSeed()

func sameContent(a, b *Doc) bool {
	return a.Name == b.Name && a.Namespace == b.Namespace && a.Title == b.Title &&
		a.Description == b.Description && bytes.Equal(a.InputSchema, b.InputSchema)
}

// splitName returns the namespace and the tool's own name of d.
func splitName(d *Doc) (namespace, own string) {
	if d.Namespace != "" && strings.HasPrefix(d.Name, d.Namespace) {
		return d.Namespace, d.Name[len(d.Namespace):]
	}
	if i := strings.Index(d.Name, "__"); i > 0 {
		return d.Name[:i], d.Name[i+2:]
	}
	return "", d.Name
}

// maxFieldTerms caps the terms counted in one field of one document.
const maxFieldTerms = 4096

func analyze(d Doc, key uint64) *analysis {
	a := &analysis{doc: d, key: key}
	ns, own := splitName(&d)
	a.changing = changingName(own)
	pnames, ptexts := params(d.InputSchema)
	texts := [...]string{own, ns, d.Title, d.Description, pnames, ptexts, fieldNameForm: ""}
	idx := map[string]int{}
	count := func(t []byte, f int) {
		i, ok := idx[string(t)]
		if !ok {
			i = len(a.terms)
			idx[string(t)] = i
			a.terms = append(a.terms, termFreq{term: string(t)})
		}
		if a.terms[i].tf[f] < 1<<8-1 {
			a.terms[i].tf[f]++
		}
	}
	buf := make([]byte, 0, maxWordBytes)
	var form []byte
	for f, text := range texts {
		if f == fieldName {
			form = make([]byte, 0, maxWordBytes+1)
		} else {
			form = nil
		}
		n := 0
		buf, form = wordForms(text, buf, form, func(t, fm []byte) bool {
			count(t, f)
			if fm != nil {
				count(fm, fieldNameForm)
				a.lens[fieldNameForm]++
			}
			n++
			return n < maxFieldTerms
		})
		a.lens[f] = uint16(n)
		if f != fieldNamespace {
			buf = joinedWords(text, buf, func(t []byte) { count(t, f) }) // not counted in the length
		}
	}
	slices.SortFunc(a.terms, func(x, y termFreq) int { return strings.Compare(x.term, y.term) })
	return a
}
