package search

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// corpusDocs reads the committed corpus (the real servers' tools) as documents.
func corpusDocs(t testing.TB) []Doc {
	t.Helper()
	files, err := filepath.Glob("testdata/corpus/*.json")
	if err != nil {
		t.Fatal(err)
	}
	var docs []Doc
	for _, f := range files {
		if filepath.Base(f) == "servers.json" {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Server string            `json:"server"`
			Tools  []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tr := range s.Tools {
			d, err := DocFromTool(tr, s.Server)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			docs = append(docs, d)
		}
	}
	if len(docs) < 300 {
		t.Fatalf("corpus has %d tools", len(docs))
	}
	return docs
}

func names(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Doc.Name
	}
	return out
}

var probeQueries = []string{
	"take a screenshot of the login page",
	"list open issues in the repo",
	"what's in my downloads folder",
	"search",
	"create",
	"delete the stuck pod",
	"post a message to slack",
	"mongo collection count",
	"go to example.com and take a screenshot of the pull request",
	"how many rows are in the users table?",
	"remember that Alice leads the JavaScript team",
}

// TestHiddenToolsLeaveNoTrace: a search with visible over the whole catalogue gives
// exactly (names, order and scores) what an index of the visible tools alone gives, so
// nothing of a hidden tool can be read from a result; Restrict gives the same again.
func TestHiddenToolsLeaveNoTrace(t *testing.T) {
	docs := corpusDocs(t)
	for _, hide := range []string{"github__", "slack__", "playwright__browser_t", "everything__"} {
		visible := func(name string) bool { return !strings.HasPrefix(name, hide) }
		var shown []Doc
		for _, d := range docs {
			if visible(d.Name) {
				shown = append(shown, d)
			}
		}
		all := BM25F{}.Build(docs, nil)
		alone := BM25F{}.Build(shown, nil)
		view := all.(Restricter).Restrict(visible)
		if view.Len() != len(shown) {
			t.Fatalf("hiding %s: view has %d documents, want %d", hide, view.Len(), len(shown))
		}
		for _, q := range probeQueries {
			want := alone.Search(q, 20, nil)
			for how, got := range map[string][]Hit{
				"visible":  all.Search(q, 20, visible),
				"restrict": view.Search(q, 20, nil),
			} {
				if !slices.Equal(names(got), names(want)) {
					t.Errorf("hiding %s, %q (%s): %q, want %q", hide, q, how, names(got), names(want))
					continue
				}
				for i := range got {
					if math.Abs(got[i].Score-want[i].Score) > 1e-9 {
						t.Errorf("hiding %s, %q (%s): score of %s %v, want %v", hide, q, how, got[i].Doc.Name, got[i].Score, want[i].Score)
					}
				}
				for _, h := range got {
					if !visible(h.Doc.Name) {
						t.Errorf("hiding %s, %q (%s): returned %s", hide, q, how, h.Doc.Name)
					}
				}
			}
		}
	}
}

func TestNothingVisible(t *testing.T) {
	ix := BM25F{}.Build(corpusDocs(t), nil)
	none := func(string) bool { return false }
	if hits := ix.Search("screenshot", 5, none); hits != nil {
		t.Errorf("hits with nothing visible: %q", names(hits))
	}
	if v := ix.(Restricter).Restrict(none); v.Len() != 0 || v.Search("screenshot", 5, nil) != nil {
		t.Errorf("a view of nothing has %d documents", v.Len())
	}
}

// TestViewNarrows: a view searched with a further visible function sees both filters.
func TestViewNarrows(t *testing.T) {
	docs := corpusDocs(t)
	ix := BM25F{}.Build(docs, nil)
	noGithub := func(n string) bool { return !strings.HasPrefix(n, "github__") }
	noGitlab := func(n string) bool { return !strings.HasPrefix(n, "gitlab__") }
	both := func(n string) bool { return noGithub(n) && noGitlab(n) }
	got := ix.(Restricter).Restrict(noGithub).Search("create a branch", 10, noGitlab)
	want := ix.Search("create a branch", 10, both)
	if !slices.Equal(names(got), names(want)) {
		t.Errorf("view then visible: %q, want %q", names(got), names(want))
	}
}

// TestDeterministic: the same catalogue in any order gives the same result, and equal
// scores are ordered by name.
func TestDeterministic(t *testing.T) {
	docs := corpusDocs(t)
	a := BM25F{}.Build(docs, nil)
	rev := slices.Clone(docs)
	slices.Reverse(rev)
	b := BM25F{}.Build(rev, nil)
	for _, q := range probeQueries {
		ha, hb := a.Search(q, 50, nil), b.Search(q, 50, nil)
		if !slices.Equal(names(ha), names(hb)) {
			t.Errorf("%q: order depends on the catalogue's order:\n%q\n%q", q, names(ha), names(hb))
		}
		for i := 1; i < len(ha); i++ {
			if ha[i].Score > ha[i-1].Score || ha[i].Score == ha[i-1].Score && ha[i].Doc.Name < ha[i-1].Doc.Name {
				t.Errorf("%q: %s (%v) after %s (%v)", q, ha[i].Doc.Name, ha[i].Score, ha[i-1].Doc.Name, ha[i-1].Score)
			}
		}
	}
	// Twins: identical but for the name; the first name wins.
	twins := []Doc{
		{Name: "b__read_file", Description: "Read a file"},
		{Name: "a__read_file", Description: "Read a file"},
	}
	hits := BM25F{Params: Params{K1: 1.2, Name: Field{Weight: 1}, Desc: Field{Weight: 1}}}.Build(twins, nil).Search("read file", 2, nil)
	if got := names(hits); !slices.Equal(got, []string{"a__read_file", "b__read_file"}) || hits[0].Score != hits[1].Score {
		t.Errorf("twins: %q", got)
	}
}

func TestQueryEdges(t *testing.T) {
	ix := BM25F{}.Build(corpusDocs(t), nil)
	for _, q := range []string{"", "   ", "the of and to", "?!…", "zzzzqqq", "\x00\xff\xfe"} {
		if hits := ix.Search(q, 5, nil); hits != nil {
			t.Errorf("%q: %q, want nothing", q, names(hits))
		}
	}
	if hits := ix.Search("screenshot", 0, nil); hits != nil {
		t.Errorf("limit 0: %q", names(hits))
	}
	if hits := ix.Search("screenshot", -3, nil); hits != nil {
		t.Errorf("limit -3: %q", names(hits))
	}
	// Case, punctuation and quotes do not change what matches.
	base := names(ix.Search("take a screenshot", 5, nil))
	for _, q := range []string{"TAKE A SCREENSHOT", "take... a screenshot?!", `"take a screenshot"`, "take_a-screenshot"} {
		if got := names(ix.Search(q, 5, nil)); !slices.Equal(got, base) {
			t.Errorf("%q: %q, want %q", q, got, base)
		}
	}
	// A huge query is read up to a bound and still answers.
	huge := strings.Repeat("screenshot page browser ", 10000)
	if hits := ix.Search(huge, 5, nil); len(hits) == 0 {
		t.Error("a huge query found nothing")
	}
	// A large limit returns every match, sorted.
	all := ix.Search("file", 1000, nil)
	if len(all) < 20 {
		t.Errorf("limit 1000: %d hits", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].Score > all[i-1].Score {
			t.Fatalf("limit 1000: not sorted at %d", i)
		}
	}
	if got := names(ix.Search("file", 7, nil)); !slices.Equal(got, names(all[:7])) {
		t.Errorf("limit 7 %q is not the head of limit 1000 %q", got, names(all[:7]))
	}
}

func TestEmptyIndex(t *testing.T) {
	ix := BM25F{}.Build(nil, nil)
	if ix.Len() != 0 || ix.Search("anything", 5, nil) != nil {
		t.Error("an empty index answered")
	}
	ix = BM25F{}.Build([]Doc{{Name: "x"}}, ix)
	if ix.Len() != 1 || ix.Search("x", 5, nil) != nil { // one letter: not a term
		t.Error("a one-letter name matched")
	}
}

// TestIncrementalBuild: a rebuild reuses the analysis of every unchanged document, and
// re-reads only changed ones; the result equals a build from nothing.
func TestIncrementalBuild(t *testing.T) {
	docs := corpusDocs(t)
	first := BM25F{}.Build(docs, nil).(*index)
	changed := slices.Clone(docs)
	for i := range changed {
		if strings.HasPrefix(changed[i].Name, "slack__") {
			changed[i].Description += " (changed)"
		}
	}
	changed = append(changed, Doc{Name: "new__thing", Description: "A new tool"})
	second := BM25F{}.Build(changed, first).(*index)
	fresh := BM25F{}.Build(changed, nil).(*index)
	reused, reread := 0, 0
	old := map[*analysis]bool{}
	for _, a := range first.an {
		old[a] = true
	}
	for _, a := range second.an {
		if old[a] {
			reused++
			if strings.HasPrefix(a.doc.Name, "slack__") {
				t.Errorf("%s changed but its analysis was reused", a.doc.Name)
			}
		} else {
			reread++
		}
	}
	if want := len(docs) - 8 + 0; reused != want || reread != 9 {
		t.Errorf("reused %d, re-read %d; want %d and 9", reused, reread, want)
	}
	for _, q := range append(probeQueries, "changed", "new thing") {
		a, b := names(second.Search(q, 20, nil)), names(fresh.Search(q, 20, nil))
		if !slices.Equal(a, b) {
			t.Errorf("%q: incremental %q, fresh %q", q, a, b)
		}
	}
	// The hit carries the current definition (Raw), even for a reused analysis.
	for i := range changed {
		changed[i].Raw = json.RawMessage(fmt.Sprintf(`{"v":%d}`, i))
	}
	third := BM25F{}.Build(changed, second)
	for _, h := range third.Search("screenshot", 3, nil) {
		if !strings.HasPrefix(string(h.Doc.Raw), `{"v":`) {
			t.Errorf("%s: stale Raw %s", h.Doc.Name, h.Doc.Raw)
		}
	}
}

// TestNamespaceCountsLess: the same word in the tool's own name counts for more than
// in its namespace.
func TestNamespaceCountsLess(t *testing.T) {
	docs := []Doc{
		{Name: "browser__open", Namespace: "browser", Description: "Open something"},
		{Name: "web__browser", Namespace: "web", Description: "Open something"},
	}
	hits := BM25F{}.Build(docs, nil).Search("browser", 2, nil)
	if got := names(hits); !slices.Equal(got, []string{"web__browser", "browser__open"}) {
		t.Errorf("%q", got)
	}
	// Without Namespace the part before "__" is the namespace.
	ns, own := splitName(&Doc{Name: "gh__list_issues"})
	if ns != "gh" || own != "list_issues" {
		t.Errorf("splitName: %q %q", ns, own)
	}
	ns, own = splitName(&Doc{Name: "gh.list", Namespace: "gh"})
	if ns != "gh" || own != ".list" {
		t.Errorf("splitName with Namespace: %q %q", ns, own)
	}
}

func TestDocFromTool(t *testing.T) {
	d, err := DocFromTool(json.RawMessage(`{"name":"fs__read","annotations":{"title":"Read"},"description":"d","inputSchema":{"type":"object"}}`), "fs")
	if err != nil || d.Name != "fs__read" || d.Title != "Read" || d.Namespace != "fs" || string(d.InputSchema) != `{"type":"object"}` || len(d.Raw) == 0 {
		t.Errorf("%+v %v", d, err)
	}
	for _, bad := range []string{`{}`, `[]`, `{"name":1}`, ``} {
		if _, err := DocFromTool(json.RawMessage(bad), ""); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestRebuildSequence: a chain of incremental builds (tools removed, changed, added
// back; the vocabulary extended and compacted on the way) answers exactly as a build
// from nothing at every step, scores included.
func TestRebuildSequence(t *testing.T) {
	docs := corpusDocs(t)
	steps := [][]Doc{
		docs,
		docs[:len(docs)/2],
		docs[len(docs)/2:],
		docs[:20],
		append(slices.Clone(docs[:50]), Doc{Name: "zz__xylophone_tuner", Description: "Tune a xylophone"}),
		docs,
	}
	var prev Index
	for i, step := range steps {
		inc := BM25F{}.Build(step, prev)
		fresh := BM25F{}.Build(step, nil)
		for _, q := range append(probeQueries, "xylophone", "tune") {
			a, b := inc.Search(q, 30, nil), fresh.Search(q, 30, nil)
			if !slices.Equal(names(a), names(b)) {
				t.Fatalf("step %d, %q: incremental %q, fresh %q", i, q, names(a), names(b))
			}
			for j := range a {
				if a[j].Score != b[j].Score {
					t.Fatalf("step %d, %q: %s scores %v incrementally, %v fresh", i, q, a[j].Doc.Name, a[j].Score, b[j].Score)
				}
			}
		}
		if i == 3 && len(inc.(*index).voc.terms) > 2*len(fresh.(*index).voc.terms)+64 {
			t.Errorf("step %d: vocabulary of %d terms for %d in use: not compacted", i, len(inc.(*index).voc.terms), len(fresh.(*index).voc.terms))
		}
		prev = inc
	}
}

// TestConcurrentSearches: an index and a view serve searches from many goroutines
// while the next index is built from them (run with -race).
func TestConcurrentSearches(t *testing.T) {
	docs := corpusDocs(t)
	ix := BM25F{}.Build(docs, nil)
	view := ix.(Restricter).Restrict(func(n string) bool { return !strings.HasPrefix(n, "github__") })
	want := names(ix.Search(probeQueries[0], 5, nil))
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				q := probeQueries[(g+i)%len(probeQueries)]
				ix.Search(q, 5, nil)
				view.Search(q, 5, func(n string) bool { return !strings.HasPrefix(n, "slack__") })
			}
		}()
	}
	next := BM25F{}.Build(docs[:100], ix)
	for range 4 {
		<-done
	}
	if got := names(ix.Search(probeQueries[0], 5, nil)); !slices.Equal(got, want) {
		t.Errorf("after a build from it, the old index answers %q, want %q", got, want)
	}
	if next.Len() != 100 {
		t.Errorf("next has %d documents", next.Len())
	}
}

func TestDocFromPrompt(t *testing.T) {
	raw := json.RawMessage(`{"name":"gh__review_pr","description":"Review a pull request","arguments":[{"name":"prNumber","description":"which pull request"}]}`)
	d, err := DocFromPrompt(raw, "gh")
	if err != nil || d.Name != "gh__review_pr" || d.Namespace != "gh" || string(d.Raw) != string(raw) {
		t.Fatalf("%+v %v", d, err)
	}
	names, texts := params(d.InputSchema)
	if got := Terms(names + " " + texts); !slices.Equal(got, []string{"pr", "number", "pull", "request"}) {
		t.Errorf("arguments read as %q", got)
	}
	hits := BM25F{}.Build([]Doc{d}, nil).Search("review the PR", 5, nil)
	if len(hits) != 1 {
		t.Errorf("prompt not found: %v", hits)
	}
	for _, bad := range []string{`{}`, `[]`, ``} {
		if _, err := DocFromPrompt(json.RawMessage(bad), ""); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestExplainAddsUp: Explain's total is the score Search gives.
func TestExplainAddsUp(t *testing.T) {
	ix := BM25F{}.Build(corpusDocs(t), nil)
	for _, q := range probeQueries {
		for _, h := range ix.Search(q, 5, nil) {
			e := ix.(Explainer).Explain(q, h.Doc.Name)
			if want := fmt.Sprintf("total %.2f", h.Score); !strings.HasSuffix(e, want) {
				t.Errorf("%q, %s: %q does not end in %q", q, h.Doc.Name, e, want)
			}
		}
	}
	if e := ix.(Explainer).Explain("x", "no__such_tool"); !strings.Contains(e, "not indexed") {
		t.Errorf("unknown tool: %q", e)
	}
}
