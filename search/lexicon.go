package search

import (
	_ "embed" // the lexicon's table
	"errors"
	"strings"
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
// The table is embedded as it is searched: a sorted byte table read in place (no map,
// no strings built, nothing decoded). It lives in the binary's read-only data, so an
// idle process holds none of it in its private memory: the pages a lookup reads are
// file-backed, and only those are read. The first Build that uses it checks it once.

//go:embed wordnet.lex
var lexiconFile string

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
	termOff string // u32 × (n+1)
	relOff  string // u32 × (n+1)
	rels    string // u32 × r
	probes  string
	terms   string
}

var (
	lexiconOnce  sync.Once
	lexiconTable *lexTable
	lexiconErr   error
)

// loadLexicon checks the embedded table, once. An error (a damaged build) leaves the
// lexicon empty: search works without it.
func loadLexicon() (*lexTable, error) {
	lexiconOnce.Do(func() {
		lexiconTable, lexiconErr = readLexicon(lexiconFile)
	})
	return lexiconTable, lexiconErr
}

// readLexicon reads a table file: a text header up to a NUL, then the table.
func readLexicon(file string) (*lexTable, error) {
	nul := strings.IndexByte(file, 0)
	if nul < 0 {
		return nil, errors.New("lexicon: no header")
	}
	return parseLexicon(file[nul+1:])
}

// parseLexicon checks a table and returns it.
func parseLexicon(raw string) (*lexTable, error) {
	bad := errors.New("lexicon: damaged table")
	if len(raw) < len(lexiconMagic)+12 || raw[:len(lexiconMagic)] != lexiconMagic {
		return nil, bad
	}
	p := raw[len(lexiconMagic):]
	n, r, pl := int(u32(p, 0)), int(u32(p, 1)), int(u32(p, 2))
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
		to, ro := u32(t.termOff, i), u32(t.relOff, i)
		if to < prevT || int(to) > len(t.terms) || ro < prevR || int(ro) > r {
			return nil, bad
		}
		prevT, prevR = to, ro
	}
	if u32(t.relOff, n) != uint32(r) || int(u32(t.termOff, n)) != len(t.terms) {
		return nil, bad
	}
	for i := 0; i < r; i++ {
		if v := u32(t.rels, i); int(v>>8) >= n || v&0xff == 0 {
			return nil, bad
		}
	}
	for i := 1; i < n; i++ {
		if t.term(i-1) >= t.term(i) {
			return nil, bad
		}
	}
	return t, nil
}

// u32 reads the i-th little-endian uint32 of s.
func u32(s string, i int) uint32 {
	s = s[4*i : 4*i+4]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

func (t *lexTable) term(i int) string {
	return t.terms[u32(t.termOff, i):u32(t.termOff, i+1)]
}

// find returns the number of term w, or -1.
func (t *lexTable) find(w []byte) int {
	lo, hi := 0, t.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.term(m) < string(w) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < t.n && t.term(lo) == string(w) {
		return lo
	}
	return -1
}

// lookup calls f with each term related to w and its weight, heaviest first.
func (t *lexTable) lookup(w []byte, f func(term string, weight float64)) {
	if t == nil {
		return
	}
	i := t.find(w)
	if i < 0 {
		return
	}
	for j := u32(t.relOff, i); j < u32(t.relOff, i+1); j++ {
		v := u32(t.rels, int(j))
		f(t.term(int(v>>8)), float64(v&0xff)/255)
	}
}
