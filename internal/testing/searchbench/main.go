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
	set := fs.String("set", "", "override parameters by the tuner's names: \"K1=2 Name.Weight=4 …\" (as -tune prints them); with -tune, those held fixed")
	ablate := fs.Bool("ablate", false, "the figures with each aid turned off in turn (docs/search.md's table)")
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
		return tuneParams(out, docs, dev, held, *restarts, *set) // -set: parameters held fixed
	}

	p := search.DefaultParams()
	if err := setParams(&p, *set); err != nil {
		return err
	}
	if *ablate {
		return ablation(out, docs, p, qs, dev, held)
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
	fmt.Fprintf(out, "\nwhat each aid adds (recall@1 / recall@5 / MRR@10 with it turned off):\n\n")
	if err := ablation(out, docs, p, qs, dev, held); err != nil {
		return err
	}
	full, small := searcheval.FullListBytes(servers), searcheval.SearchListBytes(servers)
	fmt.Fprintf(out, "\ntools/list bytes: mode all %d, search mode %d (search_tools naming the services + call_tool): %.2f%%\n",
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
