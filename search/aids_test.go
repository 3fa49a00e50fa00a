package search

import (
	"math"
	"testing"
)

// The aids beyond BM25F, each on a small catalogue made so that the aid decides the
// order (turning the aid's parameter off fails the test).

// TestRelatedWordDoesNotOutscore: a rare related word counts as the query's word, not
// as a rarer and so heavier one (concepts, query.go): the tool that says "create" comes
// before the one that says "make", however rare "make" is. (Scored as separate terms,
// make's idf would put d__make_user first.)
func TestRelatedWordDoesNotOutscore(t *testing.T) {
	docs := []Doc{
		{Name: "a__create_user", Description: "Create a user"},
		{Name: "b__create_group", Description: "Create a group"},
		{Name: "c__create_team", Description: "Create a team"},
		{Name: "d__make_user", Description: "Make a user"},
	}
	hits := BM25F{}.Build(docs, nil).Search("create user", 4, nil)
	if got := names(hits); len(got) < 2 || got[0] != "a__create_user" || got[1] != "d__make_user" {
		t.Errorf("%q", got)
	}
}

// TestValuesAndShapes: the words of a value (a file's name, a host) count for little,
// the shape's word for much.
func TestValuesAndShapes(t *testing.T) {
	docs := []Doc{
		{Name: "fs__write_file", Description: "Write a file", InputSchema: []byte(`{"properties":{"path":{"description":"the file's path"}}}`)},
		{Name: "ai__summarize", Description: "Summarize a text into a summary"},
		{Name: "web__navigate", Description: "Go to a URL", InputSchema: []byte(`{"properties":{"url":{"description":"the URL"}}}`)},
		{Name: "docs__example", Description: "Show an example"},
		{Name: "geo__reverse_geocode", Description: "The address at a latitude and longitude"},
		{Name: "pg__query", Description: "Run a read-only SQL query"},
		{Name: "chat__list_users", Description: "List the users"},
	}
	ix := BM25F{}.Build(docs, nil)
	for q, want := range map[string]string{
		"save it to summary.md":              "fs__write_file",
		"open example.com":                   "web__navigate",
		"what is at 48.8584, 2.2945":         "geo__reverse_geocode",
		"run select name from users limit 5": "pg__query",
	} {
		if hits := ix.Search(q, 1, nil); len(hits) == 0 || hits[0].Doc.Name != want {
			t.Errorf("%q: %q, want %s first", q, names(hits), want)
		}
	}
}

// TestJoinedCamelCase: a description's "JavaScript" is found by "javascript" as well as
// by "java script".
func TestJoinedCamelCase(t *testing.T) {
	docs := []Doc{
		{Name: "web__evaluate", Description: "Evaluate a JavaScript expression"},
		{Name: "web__run", Description: "Run some code"},
	}
	ix := BM25F{}.Build(docs, nil)
	for _, q := range []string{"javascript", "JavaScript"} {
		if hits := ix.Search(q, 2, nil); len(hits) != 1 || hits[0].Doc.Name != "web__evaluate" {
			t.Errorf("%q: %q", q, names(hits))
		}
	}
}

// TestNameForms: a word in the form the tool's name has it counts more.
func TestNameForms(t *testing.T) {
	docs := []Doc{
		{Name: "chat__get_channel", Description: "Get a channel"},
		{Name: "chat__list_channels", Description: "List the channels"},
	}
	ix := BM25F{}.Build(docs, nil)
	if hits := ix.Search("channels", 2, nil); len(hits) == 0 || hits[0].Doc.Name != "chat__list_channels" {
		t.Errorf("channels: %q", names(hits))
	}
	if hits := ix.Search("channel", 2, nil); len(hits) == 0 || hits[0].Doc.Name != "chat__get_channel" {
		t.Errorf("channel: %q", names(hits))
	}
}

// TestServiceShortened: a word that begins a service's name finds that service's tools
// ("elastic" for elasticsearch), and only a service a visible tool has: a hidden one's name is
// not looked for.
func TestServiceShortened(t *testing.T) {
	docs := []Doc{
		{Name: "aws__search_index", Description: "Search an index"}, // first on a tie (name order)
		{Name: "elasticsearch__search_index", Description: "Search an index"},
	}
	for _, service := range []float64{0, DefaultParams().Service} {
		r := BM25F{Params: DefaultParams()}
		r.Params.Service = service
		want := "elasticsearch__search_index"
		if service == 0 {
			want = "aws__search_index"
		}
		if hits := r.Build(docs, nil).Search("search the elastic index", 2, nil); len(hits) == 0 || hits[0].Doc.Name != want {
			t.Errorf("Service %v: %q, want %s first", service, names(hits), want)
		}
	}
	ix := BM25F{}.Build(docs, nil)
	if hits := ix.Search("elastic", 2, func(name string) bool { return name != "elasticsearch__search_index" }); len(hits) != 0 {
		t.Errorf("a hidden service's name found: %q", names(hits))
	}
	if hits := ix.Search("elastic", 2, nil); len(hits) != 1 || hits[0].Doc.Name != "elasticsearch__search_index" {
		t.Errorf("elastic alone: %q", names(hits))
	}
}

func TestPowFrac(t *testing.T) {
	for _, e := range []float64{0.25, 0.5, 0.75, 1, 0.3, 2} {
		for _, x := range []float64{0, 0.01, 0.3, 0.5, 0.99, 1} {
			if got, want := powFrac(x, e), math.Pow(x, e); math.Abs(got-want) > 1e-12 {
				t.Errorf("powFrac(%v, %v) = %v, want %v", x, e, got, want)
			}
		}
	}
}

// TestSearchAllocatesOnlyItsResult: a warm search of any benchmark query allocates its
// result and nothing else (query reading, the lexicon, shapes and scoring use pooled
// scratch space).
func TestSearchAllocatesOnlyItsResult(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop scratch space")
	}
	ix := BM25F{}.Build(corpusDocs(t), nil)
	for _, q := range append(probeQueries, "run select * from users limit 10", `send {"a": 1} to @bob in #general`, "what is at 48.85, 2.29 since 2024-05-01") {
		ix.Search(q, 5, nil)
		if a := testing.AllocsPerRun(10, func() { ix.Search(q, 5, nil) }); a > 1 {
			t.Errorf("%q: %v allocations per search", q, a)
		}
	}
}
