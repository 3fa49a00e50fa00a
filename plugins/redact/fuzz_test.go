package redact

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzRedactor has every built-in and a custom detector.
func fuzzRedactor(t testing.TB) *Redactor {
	return mustNew(t, Config{Custom: map[string]string{"ticket": `TICKET-[0-9]+`}})
}

// fuzzSeeds are documents for FuzzJSON's corpus: MCP shapes, escapes, every detector case.
func fuzzSeeds() []string {
	seeds := []string{
		benchDoc(true),
		benchDoc(false),
		`{"content":[{"type":"text","text":"mail a@b.io, TICKET-42"}],"isError":false}`,
		`{"a\u0040b.io":"x\u0040y.io","n":[-0.0e+1,true,null,{"k":"4111\u00201111 1111 1111"}]}`,
		`"\ud83d\ude00 \ud800 \u2028 caf\u00e9"`,
		"\"\xff a@b.io\"",
		` [ "Bearer ` + tok(30) + `" , { } , [ ] ] `,
	}
	for _, tc := range detectorCases {
		b, _ := json.Marshal(map[string]string{tc.det: tc.in})
		seeds = append(seeds, string(b))
	}
	return seeds
}

func FuzzJSON(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add([]byte(s))
	}
	r := fuzzRedactor(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		in := bytes.Clone(doc)
		out, counts, err := r.JSON(doc)
		if !bytes.Equal(doc, in) {
			t.Fatalf("JSON modified its input")
		}
		if valid := json.Valid(doc); valid != (err == nil) {
			t.Fatalf("JSON(%q): err = %v, json.Valid = %v", doc, err, valid)
		}
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("JSON(%q) = %q: not valid JSON", doc, out)
		}
		if counts == nil {
			if len(out) != len(doc) || (len(doc) > 0 && &out[0] != &doc[0]) {
				t.Fatalf("JSON(%q) = %q with nil counts: want the input itself", doc, out)
			}
		} else {
			for name, n := range counts {
				if n <= 0 {
					t.Fatalf("JSON(%q): counts[%s] = %d", doc, name, n)
				}
			}
		}
		sameShape(t, decodeAny(t, doc), decodeAny(t, out))
		again, c, err := r.JSON(out)
		if err != nil || c != nil || len(again) != len(out) || (len(out) > 0 && &again[0] != &out[0]) {
			t.Fatalf("JSON is not idempotent: JSON(%q) = %q, then %q, %v, %v", doc, out, again, c, err)
		}
	})
}

func decodeAny(t *testing.T, doc []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", doc, err)
	}
	return v
}

// sameShape checks that b is a with only some string values masked: the same member
// names, array lengths, numbers, booleans and nulls.
func sameShape(t *testing.T, a, b any) {
	t.Helper()
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(bm) != len(a) {
			t.Fatalf("object %v became %v", a, b)
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok {
				t.Fatalf("member %q is gone from %v", k, b)
			}
			sameShape(t, av, bv)
		}
	case []any:
		bs, ok := b.([]any)
		if !ok || len(bs) != len(a) {
			t.Fatalf("array %v became %v", a, b)
		}
		for i := range a {
			sameShape(t, a[i], bs[i])
		}
	case string:
		bs, ok := b.(string)
		if !ok || (bs != a && !strings.Contains(bs, "[REDACTED:")) {
			t.Fatalf("string %q became %v", a, b)
		}
	default:
		if a != b {
			t.Fatalf("value %v became %v", a, b)
		}
	}
}

func FuzzString(f *testing.F) {
	for _, tc := range detectorCases {
		f.Add(tc.in)
	}
	f.Add("TICKET-7 and [REDACTED:ticket] and " + rsaPEM)
	r := fuzzRedactor(f)
	f.Fuzz(func(t *testing.T, s string) {
		out, counts := r.String(s)
		if (counts == nil) != (out == s) {
			t.Fatalf("String(%q) = %q, %v", s, out, counts)
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("String(%q) = %q: not valid UTF-8", s, out)
		}
		if again, c := r.String(out); again != out || c != nil {
			t.Fatalf("String is not idempotent: %q -> %q -> %q (%v)", s, out, again, c)
		}
	})
}
