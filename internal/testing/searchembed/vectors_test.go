package main

import (
	"fmt"
	"strings"
	"testing"
)

// fakePackage writes a JSON in the package's shape: words by frequency, then each
// word's vector (dim numbers), its norm and its rank, in the order given.
func fakePackage(words []string, order []int, d int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"precision":8,"dimensions":%d,"words":[`, d)
	for i, w := range words {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", w)
	}
	b.WriteString(`],"vectors":{`)
	for k, i := range order {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:[", words[i])
		for j := range d {
			fmt.Fprintf(&b, "%d,", i*1000+j)
		}
		fmt.Fprintf(&b, "1.5,%d]", i)
	}
	b.WriteString(`},"unkVector":[0]}`)
	return b.String()
}

func TestReadVectors(t *testing.T) {
	words := []string{"the", "file", "files", "search", "e-mail"}
	// The vectors in another order than the words': a vector's rank places it.
	raw := fakePackage(words, []int{3, 0, 4, 1, 2}, dim)
	got, vs, err := readVectors(strings.NewReader(raw), 3)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "the file files" || len(vs) != 3 {
		t.Fatalf("words %q, %d vectors", got, len(vs))
	}
	for i, v := range vs {
		if v[0] != float32(i*1000) || v[dim-1] != float32(i*1000+dim-1) {
			t.Errorf("vector %d begins %v, ends %v", i, v[0], v[dim-1])
		}
	}
	// More words asked than the package has: all of them.
	if got, _, err := readVectors(strings.NewReader(raw), 99); err != nil || len(got) != len(words) {
		t.Errorf("n=99: %d words, %v", len(got), err)
	}
	// The analyzer's terms: file and files are one term, ranked as the more frequent;
	// "the" is a stop word; e-mail is not a plain word.
	tb := stemTable(got, vsOf(t, raw, len(words)), len(words))
	if _, ok := tb.vec["fil"]; !ok || len(tb.vec) != 2 || tb.rank["fil"] != 2 || tb.rank["search"] != 4 {
		t.Errorf("terms %v, ranks %v", keys(tb), tb.rank)
	}
}

func vsOf(t *testing.T, raw string, n int) []vec {
	_, vs, err := readVectors(strings.NewReader(raw), n)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func keys(t *table) []string {
	var out []string
	for k := range t.vec {
		out = append(out, k)
	}
	return out
}

func TestReadVectorsRefusesBadInput(t *testing.T) {
	words := []string{"a1", "b2"}
	for name, raw := range map[string]string{
		"other dimension":       fakePackage(words, []int{0, 1}, 3),
		"vectors before words":  `{"dimensions":100,"vectors":{},"words":["a"]}`,
		"a vector missing":      fakePackage(words, []int{0}, dim),
		"not an object":         `[1,2]`,
		"truncated":             fakePackage(words, []int{0, 1}, dim)[:300],
		"a vector of one value": `{"dimensions":100,"words":["a"],"vectors":{"a":[1]}}`,
	} {
		if _, _, err := readVectors(strings.NewReader(raw), 2); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzReadVectors(f *testing.F) {
	f.Add(fakePackage([]string{"a1", "b2"}, []int{1, 0}, dim), 2)
	f.Add(`{"dimensions":100,"words":["a"],"vectors":{"a":[1]}}`, 1)
	f.Fuzz(func(t *testing.T, raw string, n int) {
		if n <= 0 || n > 1000 {
			return
		}
		words, vs, err := readVectors(strings.NewReader(raw), n)
		if err == nil && (len(words) != len(vs) || len(words) > n) {
			t.Fatalf("%d words, %d vectors for n=%d", len(words), len(vs), n)
		}
	})
}

func TestFusions(t *testing.T) {
	bm := []float64{0, 2, 4, 0}
	sem := []float64{0.9, 0.1, 0.2, 0.3}
	if got := (fusion{kind: "bm25"}).combine(bm, sem); got[2] != 4 || got[0] != 0 {
		t.Errorf("bm25: %v", got)
	}
	// Linear: BM25F's best keeps first at a small weight; a tool BM25F missed enters.
	got := (fusion{kind: "linear", lam: 0.2}).combine(bm, sem)
	if !(got[2] > got[1] && got[0] > 0 && got[2] > got[0]) {
		t.Errorf("linear: %v", got)
	}
	// RRF: a tool BM25F did not match has only its semantic part.
	got = (fusion{kind: "rrf", k: 5, lam: 0.5}).combine(bm, sem)
	if want := 0.5 / 6; got[0] != want {
		t.Errorf("rrf: %v, want %v first", got, want)
	}
	if r := ranks([]float64{1, 3, 3, 2}); r[1] != 1 || r[2] != 2 || r[3] != 3 || r[0] != 4 {
		t.Errorf("ranks: %v", r)
	}
}
