package redact

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestOverlaps(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		in     string
		want   string
		counts map[string]int
	}{
		{
			name:   "an email inside a private key block is not counted",
			in:     "-----BEGIN PRIVATE KEY-----\nMIIE" + tok(40) + "\nComment: me@example.com\n-----END PRIVATE KEY-----",
			want:   "[REDACTED:private_key]",
			counts: map[string]int{"private_key": 1},
		},
		{
			name:   "a JWT sent as a bearer token is reported as a jwt",
			in:     "Authorization: Bearer " + jwtHS,
			want:   "Authorization: Bearer [REDACTED:jwt]",
			counts: map[string]int{"jwt": 1},
		},
		{
			name:   "an OpenAI key as a bearer token",
			in:     "Bearer sk-" + tok(48),
			want:   "Bearer [REDACTED:openai_key]",
			counts: map[string]int{"openai_key": 1},
		},
		{
			name:   "a bearer token holding a key is named for the longer match",
			in:     "Bearer xyz.sk-" + tok(48),
			want:   "Bearer [REDACTED:bearer_token]",
			counts: map[string]int{"bearer_token": 1},
		},
		{
			name:   "partly overlapping matches are masked as one span, named for the longest",
			cfg:    Config{Patterns: []string{"email"}, Custom: map[string]string{"a": `foo bar`, "b": `bar baz qux`}},
			in:     "x foo bar baz qux y",
			want:   "x [REDACTED:b] y",
			counts: map[string]int{"b": 1},
		},
		{
			name:   "on a tie the earliest wins",
			cfg:    Config{Patterns: []string{"email"}, Custom: map[string]string{"a": `foo bar`, "b": `bar baz`}},
			in:     "foo bar baz",
			want:   "[REDACTED:a]",
			counts: map[string]int{"a": 1},
		},
		{
			name:   "on the same span custom detectors win over built-ins",
			cfg:    Config{Custom: map[string]string{"corp_mail": `[a-z]+@corp\.example\.com`}},
			in:     "to bob@corp.example.com and eve@example.com",
			want:   "to [REDACTED:corp_mail] and [REDACTED:email]",
			counts: map[string]int{"corp_mail": 1, "email": 1},
		},
		{
			name:   "adjacent matches are masked separately",
			cfg:    Config{Patterns: []string{"email"}, Custom: map[string]string{"a": `aaa`, "b": `bbb`}},
			in:     "aaabbb",
			want:   "[REDACTED:a][REDACTED:b]",
			counts: map[string]int{"a": 1, "b": 1},
		},
		{
			name:   "many matches",
			in:     "a@b.io, c@d.io; 4111111111111111 / AKIAIOSFODNN7EXAMPLE",
			want:   "[REDACTED:email], [REDACTED:email]; [REDACTED:credit_card] / [REDACTED:aws_access_key]",
			counts: map[string]int{"email": 2, "credit_card": 1, "aws_access_key": 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustNew(t, tc.cfg)
			got, counts := r.String(tc.in)
			if got != tc.want || !equalCounts(counts, tc.counts) {
				t.Errorf("String(%q)\n got %q %v\nwant %q %v", tc.in, got, counts, tc.want, tc.counts)
			}
		})
	}
}

func TestIdempotence(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		in   string
		want string
	}{
		{
			name: "a mask is not masked again",
			cfg:  Config{Custom: map[string]string{"word": `REDACTED`, "bracket": `\[`}},
			in:   "[REDACTED:email] REDACTED [",
			want: "[REDACTED:email] [REDACTED:word] [REDACTED:bracket]",
		},
		{
			name: "a match that contains a mask is masked whole",
			in:   "-----BEGIN PRIVATE KEY-----\n[REDACTED:email]\nMIIE" + tok(40) + "\n-----END PRIVATE KEY-----",
			want: "[REDACTED:private_key]",
		},
		{
			name: "a match that is a mask of another template is masked",
			cfg:  Config{Replacement: "<{name}>", Custom: map[string]string{"tag": `\[REDACTED:[a-z_]+\]`}},
			in:   "[REDACTED:email] <tag>",
			want: "<tag> <tag>",
		},
		{
			name: "masking that makes a new match searches again",
			cfg:  Config{Patterns: []string{"email"}, Custom: map[string]string{"first": `^.`}},
			in:   "abc",
			want: "[REDACTED:first]bc",
		},
		{
			name: "a template without {name}",
			cfg:  Config{Replacement: "***", Custom: map[string]string{"stars": `\*+`}},
			in:   "a@b.io ** c",
			want: "*** *** c",
		},
		{
			name: "a template that is just the name",
			cfg:  Config{Replacement: "{name}", Custom: map[string]string{"word": `[a-z]+`}},
			in:   "hello a@b.io",
			want: "word email",
		},
		{
			name: "a mask that another detector matches",
			cfg:  Config{Replacement: "{name}@example.com", Patterns: []string{"email", "jwt"}},
			in:   "to a@b.io",
			want: "to email@example.com",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustNew(t, tc.cfg)
			got, _ := r.String(tc.in)
			if got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if again, c := r.String(got); again != got || c != nil {
				t.Errorf("String(%q) = %q, %v; want it unchanged", got, again, c)
			}
		})
	}
}

// TestStringUnchanged: nothing masked means the same string and nil counts.
func TestStringUnchanged(t *testing.T) {
	r := mustNew(t, Config{})
	for _, s := range []string{"", "a", "plain words only, nothing secret at all", strings.Repeat("0123456789 ", 50)} {
		if got, c := r.String(s); got != s || c != nil {
			t.Errorf("String(%q) = %q, %v", s, got, c)
		}
	}
}

// TestConcurrent runs one Redactor from many goroutines (with -race, it checks that
// calls share no mutable state).
func TestConcurrent(t *testing.T) {
	r := mustNew(t, Config{Custom: map[string]string{"ticket": `TICKET-\d+`}})
	doc := []byte(benchDoc(true))
	want, wantCounts, err := r.JSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				out, counts, err := r.JSON(doc)
				if err != nil || string(out) != string(want) || !equalCounts(counts, wantCounts) {
					errs <- fmt.Errorf("JSON = %s, %v, %v", out, counts, err)
					return
				}
				if s, _ := r.String("TICKET-7 a@b.io"); s != "[REDACTED:ticket] [REDACTED:email]" {
					errs <- fmt.Errorf("String = %q", s)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestUnguarded(t *testing.T) {
	guarded := []span{{start: 10, end: 20}, {start: 30, end: 40}}
	tests := []struct {
		c    span
		keep bool
	}{
		{span{start: 0, end: 5}, true},
		{span{start: 0, end: 10}, true},   // touches a mask
		{span{start: 20, end: 25}, true},  // touches a mask
		{span{start: 0, end: 25}, true},   // contains a mask
		{span{start: 5, end: 45}, true},   // contains two
		{span{start: 10, end: 25}, true},  // contains a mask from its start
		{span{start: 25, end: 40}, true},  // contains a mask up to its end
		{span{start: 10, end: 20}, false}, // is a mask
		{span{start: 12, end: 18}, false}, // inside
		{span{start: 10, end: 15}, false}, // inside, from its start
		{span{start: 15, end: 20}, false}, // inside, to its end
		{span{start: 15, end: 25}, false}, // crosses its end
		{span{start: 5, end: 15}, false},  // crosses its start
		{span{start: 15, end: 35}, false}, // crosses both
		{span{start: 21, end: 29}, true},
	}
	for _, tc := range tests {
		got := unguarded([]span{tc.c}, guarded)
		if (len(got) == 1) != tc.keep {
			t.Errorf("unguarded(%v) kept = %v, want %v", tc.c, len(got) == 1, tc.keep)
		}
	}
}
