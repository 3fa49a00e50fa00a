package search

import (
	"slices"
	"strings"
	"testing"
)

// TestLexiconTerms: the embedded table decodes, and the analyzer still makes of the
// table's probe words the terms it made when the table was generated. A table
// generated before a change of the analyzer (its stop words, its stemmer) fails here:
// run `make search-lexicon`.
func TestLexiconTerms(t *testing.T) {
	lex, err := loadLexicon()
	if err != nil {
		t.Fatal(err)
	}
	if lex.n < 10000 {
		t.Fatalf("%d terms", lex.n)
	}
	probes := strings.Split(strings.TrimSuffix(lex.probes, "\n"), "\n")
	if len(probes) < 1000 {
		t.Fatalf("%d probes", len(probes))
	}
	stale := 0
	for _, p := range probes {
		word, want, ok := strings.Cut(p, "\t")
		if !ok {
			t.Fatalf("probe %q", p)
		}
		if got := strings.Join(Terms(word), " "); got != want {
			if stale++; stale <= 10 {
				t.Errorf("%q analyzes as %q, the table was made when it gave %q", word, got, want)
			}
		}
	}
	if stale > 0 {
		t.Errorf("%d of %d probe words analyze differently: regenerate the table (make search-lexicon)", stale, len(probes))
	}
}

// TestLexiconRelations: a few relations a reader of WordNet expects, each lighter than
// the word itself; none of a word to itself.
func TestLexiconRelations(t *testing.T) {
	lex, err := loadLexicon()
	if err != nil {
		t.Fatal(err)
	}
	related := func(w string) map[string]float64 {
		m := map[string]float64{}
		lex.lookup([]byte(Terms(w)[0]), func(term string, weight float64) { m[term] = weight })
		return m
	}
	for _, tt := range []struct{ word, rel string }{
		{"remember", "recollect"},   // a synonym
		{"remember", "remembrance"}, // a derivation
		{"remember", "memory"},      // a synonym of a derivation (remembering, memory)
		{"high", "height"},          // an attribute
		{"picture", "image"},
		{"add", "addition"},
	} {
		m := related(tt.word)
		w, ok := m[Terms(tt.rel)[0]]
		if !ok || w <= 0 || w >= 1 {
			t.Errorf("%s → %s: weight %v (found %v)", tt.word, tt.rel, w, ok)
		}
		if _, self := m[Terms(tt.word)[0]]; self {
			t.Errorf("%s relates to itself", tt.word)
		}
	}
	if m := related("xyzzyplugh"); len(m) != 0 {
		t.Errorf("an unknown word relates to %v", m)
	}
	// Heaviest first.
	for i := 0; i < lex.n; i += 97 {
		var ws []float64
		lex.lookup([]byte(lex.term(i)), func(_ string, w float64) { ws = append(ws, -w) })
		if !slices.IsSorted(ws) {
			t.Fatalf("%s: weights not in order: %v", lex.term(i), ws)
		}
	}
}

func TestLexiconLookupAllocates(t *testing.T) {
	lex, err := loadLexicon()
	if err != nil {
		t.Fatal(err)
	}
	w := []byte("remember")
	n := 0
	if a := testing.AllocsPerRun(100, func() { lex.lookup(w, func(string, float64) { n++ }) }); a != 0 {
		t.Errorf("%v allocations per lookup", a)
	}
	if n == 0 {
		t.Error("no relations")
	}
}

// TestLexiconDamaged: a table cut short or altered is refused, not read out of bounds.
func TestLexiconDamaged(t *testing.T) {
	raw := lexiconRaw(t)
	for _, cut := range []int{0, 5, len(lexiconMagic) + 4, len(raw) / 2, len(raw) - 1} {
		if _, err := parseLexicon(raw[:cut]); err == nil {
			t.Errorf("a table cut at %d bytes was read", cut)
		}
	}
	bad := []byte(raw)
	bad[len(lexiconMagic)+12+4+3] = 0xff // the second term's offset
	if _, err := parseLexicon(string(bad)); err == nil {
		t.Error("a table with a bad offset was read")
	}
	if _, err := readLexicon("no header"); err == nil {
		t.Error("a file without its header was read")
	}
}

// lexiconRaw is the embedded table after its header.
func lexiconRaw(t testing.TB) string {
	t.Helper()
	nul := strings.IndexByte(lexiconFile, 0)
	if nul < 0 {
		t.Fatal("no header")
	}
	return lexiconFile[nul+1:]
}

// FuzzParseLexicon: whatever the bytes, parseLexicon refuses them or returns a table
// whose lookups stay in bounds.
func FuzzParseLexicon(f *testing.F) {
	raw := lexiconRaw(f)
	f.Add([]byte(raw[:4096]))
	f.Add([]byte(lexiconMagic + "\x02\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x01\x00\x00ab"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lex, err := parseLexicon(string(b))
		if err != nil {
			return
		}
		for i := 0; i < lex.n && i < 64; i++ {
			lex.lookup([]byte(lex.term(i)), func(string, float64) {})
		}
		lex.lookup([]byte("zzz"), func(string, float64) {})
	})
}
