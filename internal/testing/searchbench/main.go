// Command searchbench is `make bench-search`: the lexical ranker's recall@1, recall@5
// and MRR@10 on the labelled query set (whole, development half, held-out half) over
// the committed corpus of real servers' tools, every query whose answer is not first,
// and the size of tools/list in mode all against a search-mode endpoint's first list.
// With -tune it searches BM25F's parameters on the development half only and prints the
// best settings with their held-out figures (how DefaultParams were chosen).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/searcheval"
	"github.com/mcp-proxy/mcp-proxy/search"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "searchbench:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("searchbench", flag.ContinueOnError)
	corpus := fs.String("corpus", "search/testdata/corpus", "the corpus directory")
	queries := fs.String("queries", "search/testdata/queries.json", "the labelled queries")
	tune := fs.Bool("tune", false, "search the parameters on the development half")
	fs.StringVar(&objective, "objective", objective, "with -tune: mrr or recall (recall@1 + recall@5)")
	restarts := fs.Int("restarts", 4, "with -tune: descents from random starting points besides DefaultParams")
	explain := fs.Bool("explain", false, "with each miss, why the first result and the first wanted tool scored as they did")
	related := fs.Float64("related", -1, "override Params.Related (for comparisons)")
	prefix := fs.Float64("prefix", -1, "override Params.Prefix (for comparisons)")
	asking := fs.Float64("asking", -1, "override Params.Asking (for comparisons)")
	coverage := fs.Float64("coverage", -1, "override Params.Coverage (for comparisons)")
	k1 := fs.Float64("k1", -1, "override Params.K1 (for comparisons)")
	lexicon := fs.Float64("lexicon", -1, "override Params.Lexicon (for comparisons)")
	abbrev := fs.Float64("abbrev", -1, "override Params.Abbrev (for comparisons)")
	nameCover := fs.Float64("namecover", -1, "override Params.NameCover (for comparisons)")
	shapeW := fs.Float64("shape", -1, "override Params.Shape (for comparisons)")
	valueW := fs.Float64("value", -1, "override Params.Value (for comparisons)")
	wForm := fs.Float64("nameform", -1, "override Params.NameForm.Weight (for comparisons)")
	wNS := fs.Float64("namespace", -1, "override Params.Namespace.Weight (for comparisons)")
	set := fs.String("set", "", "override parameters by the tuner's names: \"K1=2 Name.Weight=4 …\" (as -tune prints them)")
	ranks := fs.Bool("ranks", false, "print each query's rank (0: not in the first 10) and first result, one a line, for diffs between settings")
	if err := fs.Parse(args); err != nil {
		return err
	}
	servers, err := searcheval.LoadCorpus(*corpus)
	if err != nil {
		return err
	}
	docs, err := searcheval.Docs(servers)
	if err != nil {
		return err
	}
	qs, err := searcheval.LoadQueries(*queries, docs)
	if err != nil {
		return err
	}
	dev, held := searcheval.Split(qs)
	if *tune {
		return tuneParams(out, docs, dev, held, *restarts)
	}

	p := search.DefaultParams()
	if *related >= 0 {
		p.Related = *related
	}
	if *k1 >= 0 {
		p.K1 = *k1
	}
	if *wNS >= 0 {
		p.Namespace.Weight = *wNS
	}
	if *coverage >= 0 {
		p.Coverage = *coverage
	}
	if *asking >= 0 {
		p.Asking = *asking
	}
	if *lexicon >= 0 {
		p.Lexicon = *lexicon
	}
	if *abbrev >= 0 {
		p.Abbrev = *abbrev
	}
	if *nameCover >= 0 {
		p.NameCover = *nameCover
	}
	if *shapeW >= 0 {
		p.Shape = *shapeW
	}
	if *valueW >= 0 {
		p.Value = *valueW
	}
	if *wForm >= 0 {
		p.NameForm.Weight = *wForm
	}
	if *prefix >= 0 {
		p.Prefix = *prefix
	}
	if err := setParams(&p, *set); err != nil {
		return err
	}
	if *ranks {
		ix := search.BM25F{Params: p}.Build(docs, nil)
		for i, q := range qs {
			r := searcheval.Evaluate(ix, []searcheval.Query{q})
			rank, first := 1, ""
			if len(r.Misses) > 0 {
				rank = r.Misses[0].Rank
				if len(r.Misses[0].Top) > 0 {
					first = r.Misses[0].Top[0]
				}
			}
			set := "dev"
			if i%2 == 1 {
				set = "held"
			}
			fmt.Fprintf(out, "%3d %-4s rank %2d %-60q %s\n", i, set, rank, q.Query, first)
		}
		return nil
	}
	start := time.Now()
	ix := search.BM25F{Params: p}.Build(docs, nil)
	build := time.Since(start)
	fmt.Fprintf(out, "corpus: %d tools from %d servers (index built in %v)\n", len(docs), len(servers), build.Round(time.Microsecond))
	fmt.Fprintf(out, "queries: %d (dev %d, held-out %d)\n\n", len(qs), len(dev), len(held))
	fmt.Fprintf(out, "%-10s %5s %9s %9s %7s\n", "set", "n", "recall@1", "recall@5", "MRR@10")
	var all searcheval.Result
	for _, set := range []struct {
		name string
		qs   []searcheval.Query
	}{{"whole", qs}, {"dev", dev}, {"held-out", held}} {
		r := searcheval.Evaluate(ix, set.qs)
		if set.name == "whole" {
			all = r
		}
		fmt.Fprintf(out, "%-10s %5d %9.3f %9.3f %7.3f\n", set.name, r.N, r.Recall1(), r.Recall5(), r.MRR())
	}
	full, small := searcheval.FullListBytes(servers), searcheval.SearchListBytes()
	fmt.Fprintf(out, "\ntools/list bytes: mode all %d, search mode %d (search_tools + call_tool): %.2f%%\n",
		full, small, 100*float64(small)/float64(full))

	var b strings.Builder
	var notIn5, notFirst []searcheval.Miss
	for _, m := range all.Misses {
		if m.Rank == 0 || m.Rank > 5 {
			notIn5 = append(notIn5, m)
		} else {
			notFirst = append(notFirst, m)
		}
	}
	ex, _ := ix.(search.Explainer)
	if !*explain {
		ex = nil
	}
	fmt.Fprintf(&b, "\nmissed at rank 5 (%d):\n", len(notIn5))
	searcheval.FormatMisses(&b, notIn5, ex)
	fmt.Fprintf(&b, "\nin the first 5 but not first (%d):\n", len(notFirst))
	searcheval.FormatMisses(&b, notFirst, ex)
	_, err = io.WriteString(out, b.String())
	return err
}
