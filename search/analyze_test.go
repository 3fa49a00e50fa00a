package search

import (
	"reflect"
	"strings"
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
		q      string
		want   shape
		values string // the words read as values, space-separated
	}{
		{"show me notes.txt", shapeFile, "notes.txt"},
		{"open a.go, b.go and (c.py)", shapeFile, "a.go, b.go (c.py)"},
		{"go to example.com", shapeURL, "example.com"},
		{"fetch https://x.test/a", shapeURL, "https://x.test/a"},
		{"connect to mongodb://localhost:27017", shapeURL, "mongodb://localhost:27017"},
		{"www.example", shapeURL, "www.example"},
		{"what's in ~/Documents?", shapePath, "~/Documents?"},
		{"cat /etc/hosts.conf", shapeFile | shapePath, "/etc/hosts.conf"},
		{"mail john@acme.com", shapeEmail, "john@acme.com"},
		{"ping @alice in #general", shapeUser | shapeChannel, "@alice #general"},
		{"what changed in PR #17?", shapeNumber, "#17?"},
		{"what is at 48.8584, 2.2945", shapeCoord, "48.8584 2.2945"},
		{"what is at 48.85,2.29", shapeCoord, "48.85,2.29"},
		{"fixed in 1.2 or v2", shapeVersion, "1.2 v2"},
		{"logs since 2024-05-01 14:30", shapeDate | shapeTime, "2024-05-01 14:30"},
		{"show commit 9fceb02d and 123e4567-e89b-12d3-a456-426614174000", shapeID, "9fceb02d 123e4567-e89b-12d3-a456-426614174000"},
		{`send {"a": 1, "b": [2]} to it`, shapeJSON, `{"a": 1, "b": [2]}`},
		{"run select * from users limit 10", shapeSQL, "select * from users limit 10"},
		{"INSERT INTO t VALUES (1)", shapeSQL, "INSERT INTO t VALUES (1)"},
		{"insert these records into the collection", 0, ""},
		{"run `ls -la` there with --force", shapeCommand, "`ls -la` --force"},
		{"wait until 'Order complete' shows", 0, "'Order complete'"},
		{"what's Jane's title, isn't it", 0, ""},
		{"echo \"hello world\"", 0, "\"hello world\""},
		{"add 17 and 25", 0, "17 25"},
		{"show me the README and the Dockerfile", shapeFile, "README Dockerfile"},
		{"version and e.g. this", 0, ""},
		{"end with a dot.", 0, ""},
		{"", 0, ""},
	} {
		var values []string
		got := readQuery(tt.q, func(text string, value bool) {
			if value {
				values = append(values, text)
			}
		})
		if got != tt.want || strings.Join(values, " ") != tt.values {
			t.Errorf("%q: shapes %b, values %q; want %b, %q", tt.q, got, strings.Join(values, " "), tt.want, tt.values)
		}
	}
}
