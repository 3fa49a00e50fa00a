package search

import (
	"bytes"
	"compress/flate"
	_ "embed" // the lexicon's table
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The lexicon: for each common English word, the words WordNet relates to it (its
// synonyms, its derivationally related forms, the words of its direct hypernyms), each
// with a weight below the word itself: remember → recollect, recall; high → height;
// add → addition. A query word also looks for them, at Params.Lexicon times their
// weight, and only those the catalogue holds count (a related word no tool says adds
// nothing). Weights come from WordNet's sense frequencies: a relation through a
// meaning that is rare for either word weighs little ("commit" is seldom "pull").
//
// The table is derived from WordNet 3.1 (Princeton University; see wordnet.lex's header
// and WORDNET-LICENSE) by internal/testing/searchlex (`make search-lexicon`), keyed and
// valued by the analyzer's terms: it must be regenerated when the analyzer changes
// (TestLexiconTerms fails until it is).
//
// It is embedded compressed and decoded once, by the first Build that uses it: a
// process that never builds an index never pays for it. Decoded it is one byte slice
// searched in place (no map, no strings built): a lookup is a binary search over the
// sorted terms and allocates nothing.

//go:embed wordnet.lex
var lexiconFile []byte

// lexiconMagic begins the table (after the file's text header and its NUL).
const lexiconMagic = "MCPLEX1\n"

// lexTable is a decoded table:
//
//	magic, u32 n (terms), u32 r (relations), u32 p (probe bytes)
//	u32 × (n+1): the terms' offsets into the term bytes (terms sorted)
//	u32 × (n+1): each term's first relation (its relations are [rel[i], rel[i+1]))
//	u32 × r:     relations: the related term's number << 8 | its weight (1..255 → /255)
//	p bytes:     probes, "lemma\tterms\n" each: words with the terms the analyzer
//	             made of them when the table was made (TestLexiconTerms)
//	the term bytes
type lexTable struct {
	n       int
	termOff []byte // u32 × (n+1)
	relOff  []byte // u32 × (n+1)
	rels    []byte // u32 × r
	probes  []byte
	terms   []byte
}

var (
	lexiconOnce  sync.Once
	lexiconTable *lexTable
	lexiconErr   error
)

// loadLexicon decodes the embedded table, once. An error (a damaged build) leaves the
// lexicon empty: search works without it.
func loadLexicon() (*lexTable, error) {
	lexiconOnce.Do(func() {
		lexiconTable, lexiconErr = decodeLexicon(lexiconFile)
	})
	return lexiconTable, lexiconErr
}

// decodeLexicon reads a table file: a text header up to a NUL, then the table
// compressed with DEFLATE.
func decodeLexicon(file []byte) (*lexTable, error) {
	nul := bytes.IndexByte(file, 0)
	if nul < 0 {
		return nil, errors.New("lexicon: no header")
	}
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(file[nul+1:])))
	if err != nil {
		return nil, fmt.Errorf("lexicon: %w", err)
	}
	return parseLexicon(raw)
}

// parseLexicon checks a decompressed table and returns it.
func parseLexicon(raw []byte) (*lexTable, error) {
	bad := errors.New("lexicon: damaged table")
	if len(raw) < len(lexiconMagic)+12 || string(raw[:len(lexiconMagic)]) != lexiconMagic {
		return nil, bad
	}
	p := raw[len(lexiconMagic):]
	n := int(binary.LittleEndian.Uint32(p))
	r := int(binary.LittleEndian.Uint32(p[4:]))
	pl := int(binary.LittleEndian.Uint32(p[8:]))
	p = p[12:]
	if n <= 0 || n > len(p) || r > len(p) || pl > len(p) {
		return nil, bad
	}
	need := 4*(n+1)*2 + 4*r
	if len(p) < need+pl {
		return nil, bad
	}
	t := &lexTable{n: n, termOff: p[:4*(n+1)], relOff: p[4*(n+1) : 8*(n+1)], rels: p[8*(n+1) : need], probes: p[need : need+pl], terms: p[need+pl:]}
	// Offsets must grow and stay within bounds, relations name terms that exist: then
	// lookups need no checks.
	prevT, prevR := uint32(0), uint32(0)
	for i := 0; i <= n; i++ {
		to, ro := t.u32(t.termOff, i), t.u32(t.relOff, i)
		if to < prevT || int(to) > len(t.terms) || ro < prevR || int(ro) > r {
			return nil, bad
		}
		prevT, prevR = to, ro
	}
	if t.u32(t.relOff, n) != uint32(r) || int(t.u32(t.termOff, n)) != len(t.terms) {
		return nil, bad
	}
	for i := 0; i < r; i++ {
		if v := t.u32(t.rels, i); int(v>>8) >= n || v&0xff == 0 {
			return nil, bad
		}
	}
	for i := 1; i < n; i++ {
		if string(t.term(i-1)) >= string(t.term(i)) {
			return nil, bad
		}
	}
	return t, nil
}

func (t *lexTable) u32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[4*i:]) }

func (t *lexTable) term(i int) []byte {
	return t.terms[t.u32(t.termOff, i):t.u32(t.termOff, i+1)]
}

// find returns the number of term w, or -1.
func (t *lexTable) find(w []byte) int {
	lo, hi := 0, t.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if string(t.term(m)) < string(w) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < t.n && string(t.term(lo)) == string(w) {
		return lo
	}
	return -1
}

// lookup calls f with each term related to w and its weight, heaviest first. The
// slice passed to f is the table's own: it must not be kept or changed.
func (t *lexTable) lookup(w []byte, f func(term []byte, weight float64)) {
	if t == nil {
		return
	}
	i := t.find(w)
	if i < 0 {
		return
	}
	for j := t.u32(t.relOff, i); j < t.u32(t.relOff, i+1); j++ {
		v := t.u32(t.rels, int(j))
		f(t.term(int(v>>8)), float64(v&0xff)/255)
	}
}
