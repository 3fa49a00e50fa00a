package search_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/searcheval"
	"github.com/mcp-proxy/mcp-proxy/search"
)

// The quality floor on the committed benchmark (search/testdata: the corpus of real
// servers' tools and the labelled queries), over the whole corpus with DefaultParams.
// A regression of the ranker below these fails CI. Recall@1's floor is the issue's
// target (0.70; the lexical ranker reaches 0.713); recall@5's and MRR's are a little
// under what it reaches (0.888, two queries short of the target 0.90, and 0.787):
// docs/search.md lists the misses and why.
const (
	floorRecall1 = 0.70
	floorRecall5 = 0.88
	floorMRR     = 0.78
)

func loadBenchmark(t testing.TB) ([]searcheval.Server, []search.Doc, []searcheval.Query) {
	t.Helper()
	servers, err := searcheval.LoadCorpus("testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := searcheval.Docs(servers)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := searcheval.LoadQueries("testdata/queries.json", docs)
	if err != nil {
		t.Fatal(err)
	}
	return servers, docs, qs
}

// TestBenchmarkShape: the corpus and the query set are what the issue asks for.
func TestBenchmarkShape(t *testing.T) {
	servers, docs, qs := loadBenchmark(t)
	if len(servers) < 12 || len(docs) < 300 || len(qs) < 150 {
		t.Fatalf("%d servers, %d tools, %d queries: want at least 12, 300, 150", len(servers), len(docs), len(qs))
	}
	seen := map[string]bool{}
	for _, d := range docs {
		if seen[d.Name] {
			t.Errorf("tool %s listed twice", d.Name)
		}
		seen[d.Name] = true
	}
	for _, q := range qs {
		if seen["q:"+strings.ToLower(q.Query)] {
			t.Errorf("query %q twice", q.Query)
		}
		seen["q:"+strings.ToLower(q.Query)] = true
	}
	if full, small := searcheval.FullListBytes(servers), searcheval.SearchListBytes(servers); small*20 > full {
		t.Errorf("search mode's first tools/list is %d bytes, more than 5%% of mode all's %d", small, full)
	}
}

// TestQualityFloor checks recall@1, recall@5 and MRR@10 on the whole query set.
func TestQualityFloor(t *testing.T) {
	_, docs, qs := loadBenchmark(t)
	ix := search.BM25F{}.Build(docs, nil)
	r := searcheval.Evaluate(ix, qs)
	t.Logf("%d queries: recall@1 %.3f, recall@5 %.3f, MRR@10 %.3f", r.N, r.Recall1(), r.Recall5(), r.MRR())
	if r.Recall1() < floorRecall1 || r.Recall5() < floorRecall5 || r.MRR() < floorMRR {
		var b strings.Builder
		searcheval.FormatMisses(&b, r.Misses, nil)
		t.Errorf("below the floor (recall@1 %.2f, recall@5 %.2f, MRR %.2f); the misses:\n%s", floorRecall1, floorRecall5, floorMRR, b.String())
	}
}

// catalogue returns n tools: the corpus repeated with renamed namespaces (copy 2 of
// "github" is "github2"), as a proxy in front of more servers would list them.
func catalogue(t testing.TB, n int) []search.Doc {
	_, docs, _ := loadBenchmark(t)
	out := make([]search.Doc, 0, n)
	for copyN := 1; len(out) < n; copyN++ {
		for _, d := range docs {
			if len(out) == n {
				break
			}
			if copyN > 1 {
				ns := fmt.Sprintf("%s%d", d.Namespace, copyN)
				d.Name = ns + strings.TrimPrefix(d.Name, d.Namespace)
				d.Namespace = ns
			}
			out = append(out, d)
		}
	}
	return out
}

// BenchmarkSearch is one query against catalogues of 300 and 1,000 tools, cycling
// through the labelled queries (so that each op is a realistic query), with and
// without a visibility function (a map lookup, as a principal's view would be), and
// through a Restrict view.
func BenchmarkSearch(b *testing.B) {
	_, _, qs := loadBenchmark(b)
	for _, n := range []int{300, 1000} {
		docs := catalogue(b, n)
		ix := search.BM25F{}.Build(docs, nil)
		hidden := map[string]bool{}
		for i, d := range docs {
			if i%10 == 0 {
				hidden[d.Name] = true
			}
		}
		visible := func(name string) bool { return !hidden[name] }
		view := ix.(search.Restricter).Restrict(visible)
		for _, c := range []struct {
			name    string
			ix      search.Index
			visible func(string) bool
		}{{"all", ix, nil}, {"visible", ix, visible}, {"view", view, nil}} {
			b.Run(fmt.Sprintf("tools=%d/%s", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				// Each search is also timed alone, for its median and 99th percentile
				// (the clock's own cost, some tens of ns, is in them).
				lat := make([]time.Duration, 0, 1<<16)
				i := 0
				for b.Loop() {
					start := time.Now()
					c.ix.Search(qs[i%len(qs)].Query, 5, c.visible)
					if len(lat) < cap(lat) {
						lat = append(lat, time.Since(start))
					}
					i++
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
			})
		}
	}
}

// BenchmarkBuild is a whole build from nothing, and a rebuild after one upstream's
// tools changed (every github tool's description), for 300 and 1,000 tools.
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{300, 1000} {
		docs := catalogue(b, n)
		b.Run(fmt.Sprintf("tools=%d/fresh", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				search.BM25F{}.Build(docs, nil)
			}
		})
		prev := search.BM25F{}.Build(docs, nil)
		changed := make([]search.Doc, len(docs))
		copy(changed, docs)
		k := 0
		for i := range changed {
			if changed[i].Namespace == "github" {
				changed[i].Description += " (v2)"
				k++
			}
		}
		b.Run(fmt.Sprintf("tools=%d/one-upstream-changed(%d)", n, k), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				search.BM25F{}.Build(changed, prev)
			}
		})
		b.Run(fmt.Sprintf("tools=%d/unchanged", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				search.BM25F{}.Build(docs, prev)
			}
		})
	}
}
