package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func mustNew(t testing.TB, cfg Config) *Redactor {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestJSON(t *testing.T) {
	r := mustNew(t, Config{})
	tests := []struct {
		name, in, want string
		counts         map[string]int
	}{
		{
			name:   "nested objects and arrays",
			in:     `{"a":{"b":[1,"x john@example.com",{"c":["4111111111111111"]}]},"d":null}`,
			want:   `{"a":{"b":[1,"x [REDACTED:email]",{"c":["[REDACTED:credit_card]"]}]},"d":null}`,
			counts: map[string]int{"email": 1, "credit_card": 1},
		},
		{
			name:   "member names are never changed",
			in:     `{"john@example.com":"john@example.com","AKIAIOSFODNN7EXAMPLE":{"AKIAIOSFODNN7EXAMPLE":true}}`,
			want:   `{"john@example.com":"[REDACTED:email]","AKIAIOSFODNN7EXAMPLE":{"AKIAIOSFODNN7EXAMPLE":true}}`,
			counts: map[string]int{"email": 1},
		},
		{
			name:   "escaped at sign",
			in:     `{"e":"john\u0040example.com"}`,
			want:   `{"e":"[REDACTED:email]"}`,
			counts: map[string]int{"email": 1},
		},
		{
			name:   "escapes split a token",
			in:     `["AKIA\u0049OSFODNN7EXAMPLE\n"]`,
			want:   `["[REDACTED:aws_access_key]\n"]`,
			counts: map[string]int{"aws_access_key": 1},
		},
		{
			name:   "other bytes are kept",
			in:     " {\n  \"n\": -0.50e+02 ,\t\"u\": \"caf\\u00e9 \\/ \\\"q\\\"\",\r\n  \"m\": \"to: a@b.io\" , \"z\" : [ 1 , 2 ] }\n",
			want:   " {\n  \"n\": -0.50e+02 ,\t\"u\": \"caf\\u00e9 \\/ \\\"q\\\"\",\r\n  \"m\": \"to: [REDACTED:email]\" , \"z\" : [ 1 , 2 ] }\n",
			counts: map[string]int{"email": 1},
		},
		{
			name:   "a changed string is re-encoded without HTML escaping",
			in:     `"<b>caf\u00e9</b> & \"a@b.io\"\t\u0001\u2028\/"`,
			want:   `"<b>café</b> & \"[REDACTED:email]\"\t\u0001\u2028/"`,
			counts: map[string]int{"email": 1},
		},
		{
			name:   "invalid UTF-8 and lone surrogates in a changed string become U+FFFD",
			in:     "\"\xff a@b.io \\ud800 x\"",
			want:   "\"\uFFFD [REDACTED:email] \uFFFD x\"",
			counts: map[string]int{"email": 1},
		},
		{
			name:   "surrogate pairs are decoded",
			in:     `"\ud83d\ude00 a@b.io"`,
			want:   `"😀 [REDACTED:email]"`,
			counts: map[string]int{"email": 1},
		},
		{
			name:   "top-level string",
			in:     `"Bearer ` + tok(30) + `"`,
			want:   `"Bearer [REDACTED:bearer_token]"`,
			counts: map[string]int{"bearer_token": 1},
		},
		{
			name: "MCP tools/call result",
			in: `{"content":[{"type":"text","text":"Found user jane@example.com, key AKIAIOSFODNN7EXAMPLE"},` +
				`{"type":"resource","resource":{"uri":"file:///x","mimeType":"text/plain","text":"` + strings.ReplaceAll(rsaPEM, "\n", `\n`) + `"}}],` +
				`"structuredContent":{"user":{"email":"jane@example.com","card":"4111 1111 1111 1111","id":42}},"isError":false}`,
			want: `{"content":[{"type":"text","text":"Found user [REDACTED:email], key [REDACTED:aws_access_key]"},` +
				`{"type":"resource","resource":{"uri":"file:///x","mimeType":"text/plain","text":"[REDACTED:private_key]"}}],` +
				`"structuredContent":{"user":{"email":"[REDACTED:email]","card":"[REDACTED:credit_card]","id":42}},"isError":false}`,
			counts: map[string]int{"email": 2, "aws_access_key": 1, "private_key": 1, "credit_card": 1},
		},
		{
			name:   "MCP tools/call arguments",
			in:     `{"name":"send_mail","arguments":{"to":["a@example.org","b@example.org"],"body":"hi"}}`,
			want:   `{"name":"send_mail","arguments":{"to":["[REDACTED:email]","[REDACTED:email]"],"body":"hi"}}`,
			counts: map[string]int{"email": 2},
		},
		{
			name:   "already masked",
			in:     `{"text":"[REDACTED:email] and [REDACTED:jwt]"}`,
			want:   `{"text":"[REDACTED:email] and [REDACTED:jwt]"}`,
			counts: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, counts, err := r.JSON([]byte(tc.in))
			if err != nil {
				t.Fatalf("JSON: %v", err)
			}
			if string(out) != tc.want {
				t.Errorf("JSON(%s)\n got %s\nwant %s", tc.in, out, tc.want)
			}
			if !equalCounts(counts, tc.counts) {
				t.Errorf("counts = %v, want %v", counts, tc.counts)
			}
			if !json.Valid(out) {
				t.Errorf("output is not valid JSON: %s", out)
			}
			again, c, err := r.JSON(out)
			if err != nil || !bytes.Equal(again, out) || c != nil {
				t.Errorf("JSON is not idempotent: %s then %s, %v, %v", out, again, c, err)
			}
		})
	}
}

func equalCounts(a, b map[string]int) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestJSONUnchangedIsSameSlice: when nothing is masked, the document itself comes back.
func TestJSONUnchangedIsSameSlice(t *testing.T) {
	r := mustNew(t, Config{})
	for _, doc := range []string{
		`{"content":[{"type":"text","text":"nothing to see here"}],"isError":false}`,
		`"x"`, `0`, `[]`, ` {"a" : "\u0041" } `,
	} {
		in := []byte(doc)
		out, counts, err := r.JSON(in)
		if err != nil || counts != nil || len(out) != len(in) || &out[0] != &in[0] {
			t.Errorf("JSON(%s) = %s, %v, %v; want the same slice, nil, nil", doc, out, counts, err)
		}
	}
}

// TestJSONSyntax checks that JSON accepts exactly what encoding/json accepts.
func TestJSONSyntax(t *testing.T) {
	r := mustNew(t, Config{})
	for _, doc := range []string{
		``, ` `, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{1:2}`, `[1,]`, `[,1]`, `[1 2]`,
		`01`, `-`, `-a`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `1.5e3.2`, `NaN`, `nul`, `tru`, `falsey`,
		`"a`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"\x01\"", "\"a\tb\"", `{"a":1}x`, `[] []`, "\ufeff{}",
		`{"a":"b"`, `["a"`, `'a'`, `[-]`, `{"\ud800":1}`, `"\/"`, ` [ ] `, `-0`, `-0.0e-0`, `1E9`,
		"\"\xff\"", `{"a":{"b":{"c":[[[]]]}}}`, `[true,false,null]`, `"\uD83D\uDE00"`, `"\\"`,
	} {
		_, _, err := r.JSON([]byte(doc))
		if valid := json.Valid([]byte(doc)); valid != (err == nil) {
			t.Errorf("JSON(%q): err = %v, but json.Valid = %v", doc, err, valid)
		}
		var se *SyntaxError
		if err != nil && !errors.As(err, &se) {
			t.Errorf("JSON(%q): error %v is not a *SyntaxError", doc, err)
		}
	}
}

func TestJSONDepth(t *testing.T) {
	r := mustNew(t, Config{})
	ok := strings.Repeat("[", maxDepth) + `"a@b.io"` + strings.Repeat("]", maxDepth)
	if !json.Valid([]byte(ok)) {
		t.Errorf("encoding/json rejects depth %d; maxDepth should follow it", maxDepth)
	}
	out, counts, err := r.JSON([]byte(ok))
	if err != nil || counts["email"] != 1 || !json.Valid(out) {
		t.Errorf("depth %d: %v, %v", maxDepth, counts, err)
	}
	deep := "[" + ok + "]"
	if _, _, err := r.JSON([]byte(deep)); err == nil {
		t.Errorf("depth %d: no error", maxDepth+1)
	}
	if json.Valid([]byte(deep)) {
		t.Errorf("encoding/json accepts depth %d; maxDepth should follow it", maxDepth+1)
	}
}

func TestSyntaxErrorOffset(t *testing.T) {
	r := mustNew(t, Config{})
	_, _, err := r.JSON([]byte(`{"a": [1, 2 x]}`))
	var se *SyntaxError
	if !errors.As(err, &se) || se.Offset != 12 {
		t.Fatalf("err = %v, want a SyntaxError at offset 12", err)
	}
	if !strings.Contains(err.Error(), "masking JSON: invalid JSON at offset 12") {
		t.Errorf("err = %q", err)
	}
}
