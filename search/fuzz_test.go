package search

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSearch feeds arbitrary queries (and a document made of the same bytes) to the
// analyzer, the query parser and the ranker: no panic, no term longer than the cap or
// not valid UTF-8 from valid input, results within the limit, sorted, each one a
// visible document.
func FuzzSearch(f *testing.F) {
	for _, s := range []string{
		"", "take a screenshot", "what's in ~/Documents?", `"quoted" PR #17`, "HTTPServer getURL",
		"Grüße 東京 ﬁle", strings.Repeat("a", 300), "\xff\xfe\x00", "ſ K", "İstanbul",
		"running committed queries", "ies sses xes ation tion ing ed",
	} {
		f.Add(s, uint8(5))
	}
	docs := []Doc{
		{Name: "fs__read_file", Description: "Read a file", InputSchema: []byte(`{"properties":{"path":{"description":"the path"}}}`)},
		{Name: "gh__create_pull_request", Description: "Open a pull request"},
		{Name: "web__take_screenshot", Title: "Screenshot", Description: "Take a screenshot of the page"},
	}
	f.Fuzz(func(t *testing.T, q string, limit uint8) {
		for _, term := range Terms(q) {
			if len(term) > maxWordBytes {
				t.Fatalf("term %q longer than %d", term, maxWordBytes)
			}
			if term == "" {
				t.Fatal("empty term")
			}
			if utf8.ValidString(q) && !utf8.ValidString(term) {
				t.Fatalf("invalid UTF-8 term %q from %q", term, q)
			}
		}
		all := append(docs, Doc{Name: "fz__" + q, Title: q, Description: q, InputSchema: []byte(q)})
		ix := BM25F{}.Build(all, nil)
		hidden := "gh__create_pull_request"
		visible := func(n string) bool { return n != hidden }
		hits := ix.Search(q, int(limit), visible)
		if len(hits) > int(limit) {
			t.Fatalf("%d hits for limit %d", len(hits), limit)
		}
		for i, h := range hits {
			if h.Doc.Name == hidden {
				t.Fatal("returned a hidden document")
			}
			if h.Score <= 0 {
				t.Fatalf("score %v", h.Score)
			}
			if i > 0 && (h.Score > hits[i-1].Score || h.Score == hits[i-1].Score && h.Doc.Name < hits[i-1].Doc.Name) {
				t.Fatalf("not sorted: %v", hits)
			}
		}
	})
}
