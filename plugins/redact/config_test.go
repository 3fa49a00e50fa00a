package redact

import (
	"errors"
	"regexp/syntax"
	"strings"
	"testing"
)

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error
		not  []string // substrings the error must not have
	}{
		{
			name: "unknown detector with a suggestion",
			cfg:  Config{Patterns: []string{"emial"}},
			want: []string{`unknown detector "emial"`, `did you mean "email"?`, "known: anthropic_key, aws_access_key,", "stripe_key)"},
		},
		{
			name: "suggestion ignores case and dashes",
			cfg:  Config{Patterns: []string{"GitHub-Token"}},
			want: []string{`did you mean "github_token"?`},
		},
		{
			name: "no suggestion when nothing is close",
			cfg:  Config{Patterns: []string{"passport_number"}},
			want: []string{`unknown detector "passport_number" (known: `},
			not:  []string{"did you mean"},
		},
		{
			name: "invalid custom expression names it",
			cfg:  Config{Custom: map[string]string{"ticket": `TICKET-(\d+`}},
			want: []string{`custom detector "ticket": compiling its expression: error parsing regexp: missing closing )`},
		},
		{
			name: "custom name collides with a built-in",
			cfg:  Config{Custom: map[string]string{"email": `x`}},
			want: []string{`custom detector "email": the name is a built-in detector's`},
		},
		{
			name: "custom name collides with a built-in that is not selected",
			cfg:  Config{Patterns: []string{"jwt"}, Custom: map[string]string{"email": `x`}},
			want: []string{`custom detector "email": the name is a built-in detector's`},
		},
		{
			name: "invalid custom name",
			cfg:  Config{Custom: map[string]string{"my key": `x`, "": `y`}},
			want: []string{`custom detector "my key": a name is`, `custom detector "": a name is`},
		},
		{
			name: "invalid replacement",
			cfg:  Config{Replacement: "\xff{name}"},
			want: []string{"replacement: not valid UTF-8"},
		},
		{
			name: "every problem at once",
			cfg:  Config{Patterns: []string{"jwt", "cc", "emails"}, Custom: map[string]string{"a": `(`, "jwt": `x`}},
			want: []string{"configuring redact: ", `custom detector "a"`, `custom detector "jwt"`, `unknown detector "cc"`, `unknown detector "emails"; did you mean "email"?`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(tc.cfg)
			if err == nil {
				t.Fatalf("New(%+v) = %v, want an error", tc.cfg, r)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nhas %q", err, w)
				}
			}
		})
	}
}

func TestNewRegexpErrorIsWrapped(t *testing.T) {
	_, err := New(Config{Custom: map[string]string{"x": `[`}})
	var se *syntax.Error
	if !errors.As(err, &se) || se.Code != syntax.ErrMissingBracket {
		t.Errorf("err = %v, want it to wrap the *syntax.Error", err)
	}
}

func TestNewSelection(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"all built-ins by default", Config{}, []string{"private_key", "jwt", "aws_access_key", "aws_secret_key",
			"github_token", "gitlab_token", "slack_token", "stripe_key", "anthropic_key", "openai_key",
			"google_api_key", "npm_token", "credit_card", "email", "bearer_token"}},
		{"chosen built-ins in priority order", Config{Patterns: []string{"email", "jwt", "email"}}, []string{"jwt", "email"}},
		{"custom first, by name", Config{Patterns: []string{"email"}, Custom: map[string]string{"zz": "z", "aa": "a"}},
			[]string{"aa", "zz", "email"}},
	}
	for _, tc := range tests {
		r := mustNew(t, tc.cfg)
		if got := r.Names(); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: Names() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"patterns":["email"],"custom":{"ticket":"T-\\d+"},"replacement":"***"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Patterns) != 1 || cfg.Custom["ticket"] != `T-\d+` || cfg.Replacement != "***" {
		t.Errorf("ParseConfig = %+v", cfg)
	}
	for _, bad := range []string{`{"pattern":["email"]}`, `{"patterns":"email"}`, `{} {}`, `[`} {
		if _, err := ParseConfig([]byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "decoding redact config: ") {
			t.Errorf("ParseConfig(%s) = %v, want a decoding error", bad, err)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"anthropic_key", "aws_access_key", "aws_secret_key", "email", "jwt", "openai_key"}
	tests := []struct{ in, want string }{
		{"emial", "email"},
		{"EMAIL", "email"},
		{"aws-secret-key", "aws_secret_key"},
		{"aws_acess_key", "aws_access_key"},
		{"jwts", "jwt"},
		{"openai", "openai_key"},
		{"aws", "aws_access_key"},
		{"aw", ""},
		{"x", ""},
		{"credit", ""},
	}
	for _, tc := range tests {
		if got := closest(tc.in, names); got != tc.want {
			t.Errorf("closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2},
		{"email", "emial", 1}, {"ca", "abc", 3}, {"abcd", "badc", 2}, {"héllo", "hello", 1}, {"same", "same", 0},
	}
	for _, tc := range tests {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := editDistance(tc.b, tc.a); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestMinMatchLen(t *testing.T) {
	tests := []struct {
		expr string
		want int
	}{
		{`abc`, 3}, {`a|bc`, 1}, {`x*`, 1}, {`^$`, 1}, {`\bT-\d{4,}\b`, 6}, {`(?i)secret[0-9]+`, 7},
		{`(ab)+c?`, 2}, {`[a-z]{3}(-[a-z]{2})*`, 3}, {`é`, 1}, {`.`, 1},
	}
	for _, tc := range tests {
		d, err := customDetector("x", tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		if d.minLen != tc.want {
			t.Errorf("minMatchLen(%q) = %d, want %d", tc.expr, d.minLen, tc.want)
		}
	}
}
