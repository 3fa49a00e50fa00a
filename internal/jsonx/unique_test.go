package jsonx

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheckUnique(t *testing.T) {
	for _, tc := range []struct {
		in, err string // err: "" for none, else the error text
	}{
		{`{"name":"x","arguments":{"path":"/srv/data/ok"}}`, ""},
		{`{"a":{"b":1},"c":[{"b":2},{"b":3}]}`, ""},
		{`[1,"a",{"x":null}]`, ""},
		{`{}`, ""},
		{`{"arguments":{"path":"/srv/data/ok","path":"/etc/passwd"}}`, `duplicate member "path" in arguments`},
		{`{"arguments":{"path":"/srv/data/ok","p\u0061th":"/etc/passwd"}}`, `duplicate member "path" in arguments`},
		{`{"arguments":{"path":"/srv/data/ok","PATH":"/etc/passwd"}}`, `duplicate member "PATH" in arguments`},
		{`{"arguments":{"kelvin":1,"\u212Aelvin":2}}`, "duplicate member \"\u212Aelvin\" in arguments"},
		{`{"arguments":{},"arguments":{"path":"/etc/passwd"}}`, `duplicate member "arguments" in the top-level object`},
		{`{"name":"a","Name":"b"}`, `duplicate member "Name" in the top-level object`},
		{`{"x":[{"y":{"z":1,"z":2}}]}`, `duplicate member "z" in x.y`},
		{`{"_meta":{"progressToken":1,"progresstoken":2}}`, `duplicate member "progresstoken" in _meta`},
	} {
		err := CheckUnique([]byte(tc.in))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.err {
			t.Errorf("CheckUnique(%s) = %q; want %q", tc.in, got, tc.err)
		}
		var de *DuplicateError
		if tc.err != "" && !errors.As(err, &de) {
			t.Errorf("CheckUnique(%s): %T is not a *DuplicateError", tc.in, err)
		}
	}
}

func TestCheckUniqueManyMembers(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 40; i++ {
		b.WriteString(`"k` + strings.Repeat("x", i) + `":1,`)
	}
	ok := b.String() + `"last":1}`
	if err := CheckUnique([]byte(ok)); err != nil {
		t.Fatalf("40 distinct members: %v", err)
	}
	dup := b.String() + `"KXXX":1}`
	if err := CheckUnique([]byte(dup)); err == nil || !strings.Contains(err.Error(), `"KXXX"`) {
		t.Fatalf("a folded duplicate after 40 members: %v", err)
	}
}

func TestCheckUniqueMalformed(t *testing.T) {
	for _, in := range []string{`{"a":1`, `{"a" 1}`, `[1,]`, `{"a":tru}`, ``} {
		if err := CheckUnique([]byte(in)); !errors.Is(err, ErrSyntax) {
			t.Errorf("CheckUnique(%q) = %v; want ErrSyntax", in, err)
		}
	}
}

func TestCheckUniqueAllocs(t *testing.T) {
	msg := []byte(`{"name":"fs__read_file","arguments":{"path":"/srv/data/a.txt","limit":10},"_meta":{"progressToken":7}}`)
	if n := testing.AllocsPerRun(100, func() { _ = CheckUnique(msg) }); n != 0 {
		t.Fatalf("CheckUnique allocates %v times per call", n)
	}
}

// FuzzCheckUnique: whatever CheckUnique accepts decodes with encoding/json to objects
// whose every member survives (no member was lost to a later one), compared without
// case; what it refuses as duplicate really has two such members.
func FuzzCheckUnique(f *testing.F) {
	for _, s := range []string{`{"a":1,"A":2}`, `{"p\u0061th":1,"path":2}`, `{"x":[{"y":1},{"y":2}]}`, `[{"a":{"b":{}}}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		err := CheckUnique(b)
		if err != nil && !errors.As(err, new(*DuplicateError)) {
			t.Fatalf("valid JSON %q: %v", b, err)
		}
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		if err == nil && countFoldDup(b) {
			t.Fatalf("accepted %q with a duplicate", b)
		}
		if err != nil && !countFoldDup(b) {
			t.Fatalf("refused %q without a duplicate: %v", b, err)
		}
	})
}

// countFoldDup is an independent oracle: whether any object in b has two members with
// names equal under strings.EqualFold, found with encoding/json's token stream.
func countFoldDup(b []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	type frame struct {
		obj   bool
		names []string
		key   bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.key {
			if s, ok := tok.(string); ok {
				for _, n := range top.names {
					if strings.EqualFold(n, s) {
						return true
					}
				}
				top.names = append(top.names, s)
				top.key = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].key = true
		}
	}
}

func BenchmarkCheckUnique(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fs__read_file","arguments":{"path":"/srv/data/a.txt","limit":10},"_meta":{"progressToken":7}}}`)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckUnique(msg); err != nil {
			b.Fatal(err)
		}
	}
}
