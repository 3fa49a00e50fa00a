package guard

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none: valid
	}{
		{"sql only", Config{SQLArguments: []string{"query"}}, nil},
		{"sql with dialect", Config{SQLArguments: []string{"query"}, SQLDialect: "postgres"}, nil},
		{"commands", Config{CommandArguments: []string{"cmd"}, Commands: []string{"ls", "git"}}, nil},
		{"urls", Config{URLArguments: []string{"url"}, Hosts: []string{"api.github.com", "*.example.com", "10.0.0.0/8"}}, nil},
		{"urls with schemes", Config{URLArguments: []string{"url"}, Hosts: []string{"x.org"}, Schemes: []string{"HTTPS"}}, nil},
		{"everything", Config{SQLArguments: []string{"q"}, CommandArguments: []string{"c"}, Commands: []string{"ls"}, URLArguments: []string{"u"}, Hosts: []string{"x.org"}}, nil},

		{"nothing", Config{}, []string{"nothing to check"}},
		{"empty argument name", Config{SQLArguments: []string{"q", ""}}, []string{"sql_arguments[1]: empty argument name"}},
		{"bad dialect", Config{SQLArguments: []string{"q"}, SQLDialect: "oracle"}, []string{"unknown SQL dialect"}},
		{"dialect without sql", Config{URLArguments: []string{"u"}, Hosts: []string{"x.org"}, SQLDialect: "mysql"}, []string{"sql_dialect is set"}},
		{"command with slash", Config{CommandArguments: []string{"c"}, Commands: []string{"/bin/ls"}}, []string{"commands[0]", "without a path"}},
		{"command with space", Config{CommandArguments: []string{"c"}, Commands: []string{"ls", "my tool"}}, []string{"commands[1]"}},
		{"command arguments without commands", Config{CommandArguments: []string{"c"}}, []string{"commands is empty"}},
		{"commands without arguments", Config{SQLArguments: []string{"q"}, Commands: []string{"ls"}}, []string{"command_arguments is empty"}},
		{"bad host", Config{URLArguments: []string{"u"}, Hosts: []string{"ok.org", "bad host"}}, []string{"hosts[1]"}},
		{"bad cidr", Config{URLArguments: []string{"u"}, Hosts: []string{"10.0.0.1/8"}}, []string{"did you mean 10.0.0.0/8"}},
		{"bad wildcard", Config{URLArguments: []string{"u"}, Hosts: []string{"a.*.com"}}, []string{"'*' may only stand first"}},
		{"url arguments without hosts", Config{URLArguments: []string{"u"}}, []string{"hosts is empty"}},
		{"hosts without arguments", Config{SQLArguments: []string{"q"}, Hosts: []string{"x.org"}}, []string{"url_arguments is empty"}},
		{"bad scheme", Config{URLArguments: []string{"u"}, Hosts: []string{"x.org"}, Schemes: []string{"1http"}}, []string{"schemes[0]"}},
		{"every problem at once", Config{SQLArguments: []string{""}, CommandArguments: []string{"c"}, Commands: []string{"a/b"}, URLArguments: []string{"u"}, Hosts: []string{"*"}},
			[]string{"sql_arguments[0]", "commands[0]", "hosts[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := New(tt.cfg)
			if len(tt.want) == 0 {
				if err != nil || g == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("New: no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCheck(t *testing.T) {
	g, err := New(Config{
		SQLArguments:     []string{"query"},
		CommandArguments: []string{"command"},
		Commands:         []string{"ls"},
		URLArguments:     []string{"url", "urls"},
		Hosts:            []string{"api.github.com"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     string
		argument string // the refused argument; "-" for none (accepted)
		reason   string // a substring of the reason
	}{
		{"empty", ``, "-", ""},
		{"null", `null`, "-", ""},
		{"empty object", `{}`, "-", ""},
		{"unconfigured members", `{"other": 1, "more": {"query": "DROP TABLE t"}}`, "-", ""},
		{"all fine", `{"query": "SELECT 1", "command": "ls -l", "url": "https://api.github.com/x", "urls": ["https://api.github.com/a", "https://api.github.com/b"]}`, "-", ""},
		{"empty url array", `{"urls": []}`, "-", ""},
		{"escaped member name", `{"q\u0075ery": "SELECT 1"}`, "-", ""},

		{"bad sql", `{"query": "DELETE FROM t"}`, "query", "must start with SELECT"},
		{"bad command", `{"command": "ls; rm -rf /"}`, "command", "';' separates commands"},
		{"bad url", `{"url": "https://evil.com/"}`, "url", "not in the allowed hosts"},
		{"bad url in array", `{"urls": ["https://api.github.com/", "https://evil.com/"]}`, "urls", "element 1: URL host"},
		{"non-string in url array", `{"urls": ["https://api.github.com/", 7]}`, "urls", "element 1: must be a URL string, not a number"},
		{"url array for sql", `{"query": ["SELECT 1"]}`, "query", "must be an SQL query, not an array"},
		{"number", `{"query": 1}`, "query", "not a number"},
		{"object", `{"command": {"x": 1}}`, "command", "not an object"},
		{"null member", `{"url": null}`, "url", "not null"},
		{"bool member", `{"url": true}`, "url", "not a boolean"},
		{"first violation in order", `{"url": "https://evil.com/", "query": "DROP TABLE t"}`, "url", "not in the allowed hosts"},
		{"escaped member name refused", `{"q\u0075ery": "DROP TABLE t"}`, "query", "must start with SELECT"},
		{"case-insensitive member", `{"QUERY": "DROP TABLE t"}`, "QUERY", "must start with SELECT"},
		{"mixed-case member", `{"Url": "https://evil.com"}`, "Url", "not in the allowed hosts"},
		{"duplicate, second bad", `{"query": "SELECT 1", "query": "DROP TABLE t"}`, "query", "must start with SELECT"},
		{"duplicate, first bad", `{"query": "DROP TABLE t", "query": "SELECT 1"}`, "query", "must start with SELECT"},
		{"lone surrogate", `{"command": "ls \ud800"}`, "command", "unpaired UTF-16 surrogate"},
		{"lone low surrogate", `{"command": "ls \udc00"}`, "command", "unpaired UTF-16 surrogate"},
		{"escaped newline", `{"command": "ls\nrm -rf /"}`, "command", "line break"},
		{"escaped nul", `{"query": "SELECT 1\u0000; DROP TABLE t"}`, "query", "control character"},

		{"array", `[]`, "", "one JSON object"},
		{"string", `"SELECT 1"`, "", "one JSON object"},
		{"malformed", `{"query": "SELECT 1"`, "", "not valid JSON"},
		{"malformed member", `{"query" "SELECT 1"}`, "", "not valid JSON"},
		{"trailing data", `{"query": "SELECT 1"} {"query": "DROP TABLE t"}`, "", "one JSON object"},
		{"invalid utf-8", "{\"query\": \"SELECT '\xff'\"}", "", "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := g.Check([]byte(tt.args))
			if tt.argument == "-" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var v *Violation
			if !errors.As(err, &v) {
				t.Fatalf("got %v, want a *Violation", err)
			}
			if v.Argument != tt.argument || !strings.Contains(v.Reason, tt.reason) {
				t.Fatalf("got %q / %q, want %q / ...%s...", v.Argument, v.Reason, tt.argument, tt.reason)
			}
		})
	}
}

// TestCheckValidUTF8Surrogates: a proper surrogate pair is a character, not a refusal.
func TestCheckValidUTF8Surrogates(t *testing.T) {
	g, err := New(Config{CommandArguments: []string{"c"}, Commands: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Check([]byte(`{"c": "echo \ud83d\ude00 \"\\u\" é"}`)); err != nil {
		t.Fatal(err)
	}
}

func TestZeroGuardRefuses(t *testing.T) {
	var g *Guard
	if err := g.Check([]byte(`{}`)); err == nil {
		t.Error("nil Guard: Check accepted")
	}
	if err := (&Guard{}).Check([]byte(`{}`)); err == nil {
		t.Error("zero Guard: Check accepted")
	}
	if err := (&Guard{}).CheckCommand("ls"); err == nil {
		t.Error("zero Guard: CheckCommand accepted")
	}
	if err := (&Guard{}).CheckURL("https://example.com/"); err == nil {
		t.Error("zero Guard: CheckURL accepted")
	}
}

func TestViolationError(t *testing.T) {
	v := &Violation{Argument: "query", Reason: "empty query"}
	if got, want := v.Error(), `guard: argument "query" refused: empty query`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	v = &Violation{Reason: "arguments must be one JSON object"}
	if got, want := v.Error(), "guard: arguments refused: arguments must be one JSON object"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	long := &Violation{Argument: strings.Repeat("x", 500), Reason: "r"}
	if n := len(long.Error()); n > 100 {
		t.Errorf("a long argument name makes a %d-byte message", n)
	}
}

func TestExcerpt(t *testing.T) {
	for in, want := range map[string]string{
		"":                       `""`,
		"abc":                    `"abc"`,
		"a\nb\x00":               `"a\nb\x00"`,
		"é\u202e":                `"\u00e9\u202e"`,
		"\xff":                   `"\xff"`,
		strings.Repeat("a", 40):  `"` + strings.Repeat("a", 40) + `"`,
		strings.Repeat("a", 41):  `"` + strings.Repeat("a", 40) + `"...`,
		strings.Repeat("é", 30):  `"` + strings.Repeat(`\u00e9`, 9) + `"...`,
		strings.Repeat("\n", 50): `"` + strings.Repeat(`\n`, 29) + `"...`,
	} {
		if got := excerpt(in); got != want {
			t.Errorf("excerpt(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestLoneSurrogate(t *testing.T) {
	for raw, want := range map[string]bool{
		`"abc"`:                false,
		`"\ud83d\ude00"`:       false,
		`"\\ud800"`:            false, // an escaped backslash, then text
		`"\ud800"`:             true,
		`"\ud800x"`:            true,
		`"\ud800\u0041"`:       true,
		`"\udc00"`:             true,
		`"\ud83d\ude00\ud8"`:   false, // malformed escape: left to the JSON decoder
		`"\u00e9\uDBFF\uDFFF"`: false,
	} {
		if got := loneSurrogate([]byte(raw)); got != want {
			t.Errorf("loneSurrogate(%s) = %v, want %v", raw, got, want)
		}
	}
}

// TestConfigJSON: the configuration decodes from the JSON the host passes.
func TestConfigJSON(t *testing.T) {
	var cfg Config
	err := json.Unmarshal([]byte(`{"sql_arguments":["q"],"sql_dialect":"postgres","command_arguments":["c"],"commands":["ls"],"url_arguments":["u"],"hosts":["x.org"],"schemes":["https"]}`), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
}
