package search

import (
	"reflect"
	"testing"
)

func TestTerms(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"github__create_pull_request", []string{"github", "creat", "pull", "request"}},
		{"listPullRequests", []string{"list", "pull", "request"}},
		{"HTTPServer getURLFor", []string{"http", "server", "get", "url"}},
		{"API-get-block-children", []string{"api", "get", "block", "children"}},
		{"browser.take-screenshot", []string{"browser", "tak", "screenshot"}},
		{"s3 oauth2 ec2Instance", []string{"s3", "oauth2", "ec2", "instanc"}},
		{"What's in my Downloads folder?", []string{"download", "folder"}},
		{"  \"quoted phrase\"  ", []string{"quot", "phras"}},
		{"Grüße aus Köln — 東京", []string{"grüße", "aus", "köln", "東京"}},
		{"a I x", nil},
		{"", nil},
		{"!!! ... ---", nil},
	} {
		if got := Terms(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Terms(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestStem(t *testing.T) {
	// Each group's words must stem alike: the forms a person and a description use.
	for _, group := range [][]string{
		{"file", "files"},
		{"query", "queries"},
		{"create", "creates", "created", "creating"},
		{"delete", "deleted", "deleting", "deletion"},
		{"navigate", "navigation", "navigating"},
		{"list", "lists", "listing", "listed"},
		{"commit", "commits", "committed", "committing"},
		{"run", "running"},
		{"pull", "pulled", "pulling"},
		{"modify", "modified", "modifies"},
		{"repository", "repositories"},
		{"address", "addresses"},
		{"branch", "branches"},
		{"box", "boxes"},
		{"message", "messages", "messaging"},
		{"organization", "organizations"},
	} {
		want := Terms(group[0])
		for _, w := range group[1:] {
			if got := Terms(w); !reflect.DeepEqual(got, want) {
				t.Errorf("Terms(%q) = %q, want %q (as %q)", w, got, want, group[0])
			}
		}
	}
	// And these must not collapse into one another.
	for _, pair := range [][2]string{{"status", "state"}, {"us", "use"}, {"add", "ad"}, {"analysis", "analyst"}} {
		if a, b := Terms(pair[0]), Terms(pair[1]); reflect.DeepEqual(a, b) {
			t.Errorf("%q and %q both give %q", pair[0], pair[1], a)
		}
	}
}

func TestLongWordsAreCut(t *testing.T) {
	long := ""
	for range 200 {
		long += "x"
	}
	got := Terms(long)
	if len(got) != 1 || len(got[0]) > maxWordBytes {
		t.Fatalf("Terms(200 x) = %q", got)
	}
}

func TestParams(t *testing.T) {
	schema := []byte(`{"type":"object","properties":{
		"path":{"type":"string","description":"Where the file is"},
		"options":{"type":"object","properties":{"recursive":{"type":"boolean","title":"Walk subfolders"}}},
		"tags":{"type":"array","items":{"type":"object","properties":{"labelName":{"type":"string"}}}},
		"state":{"type":"string","enum":["open","closed"]},
		"choice":{"anyOf":[{"type":"object","properties":{"deep":{"type":"string"}}}]}
	}}`)
	names, texts := params(schema)
	if got, want := Terms(names), []string{"choic", "deep", "option", "recursiv", "path", "stat", "tag", "label", "nam"}; !reflect.DeepEqual(got, want) {
		t.Errorf("parameter names %q, want %q", got, want)
	}
	if got, want := Terms(texts), []string{"walk", "subfolder", "fil", "open", "clos"}; !reflect.DeepEqual(got, want) {
		t.Errorf("parameter texts %q, want %q", got, want)
	}
	for _, bad := range []string{``, `null`, `[]`, `"x"`, `{"properties":[]}`, `{"properties":{"a":1}}`, `{`} {
		params([]byte(bad)) // must not panic
	}
}

func TestShapes(t *testing.T) {
	for _, tt := range []struct {
		q    string
		want []string
	}{
		{"show me notes.txt", []string{fileTerm}},
		{"open a.go, b.go and (c.py)", []string{fileTerm}},
		{"go to example.com", []string{urlTerm}},
		{"fetch https://x.test/a", []string{urlTerm}},
		{"www.example", []string{urlTerm}},
		{"what's in ~/Documents?", []string{pathTerm}},
		{"cat /etc/hosts.conf", []string{fileTerm, pathTerm}},
		{"mail john@acme.com", nil},
		{"version 1.2 and e.g. this", nil},
		{"end with a dot.", nil},
		{"", nil},
	} {
		var got []string
		shapeWords(tt.q, func(w string) { got = append(got, w) })
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: %q, want %q", tt.q, got, tt.want)
		}
	}
}
