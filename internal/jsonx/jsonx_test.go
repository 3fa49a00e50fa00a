package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// member is what Each reports for one field, as strings for easy comparison.
type member struct{ key, value string }

func members(t *testing.T, obj string) ([]member, error) {
	t.Helper()
	var got []member
	err := Each([]byte(obj), func(f Field) bool {
		if whole := obj[f.Start:f.End]; !strings.HasPrefix(whole, string(f.RawKey)) || !strings.HasSuffix(whole, string(f.Value)) {
			t.Errorf("Start:End = %q does not run from key %q to value %q", whole, f.RawKey, f.Value)
		}
		got = append(got, member{string(f.RawKey), string(f.Value)})
		return true
	})
	return got, err
}

func TestEach(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []member
	}{
		{"empty", `{}`, nil},
		{"empty with whitespace", " \t\r\n{ \n }\n", nil},
		{
			name: "scalars",
			in:   `{"a":1,"b":"x","c":null,"d":true,"e":false,"f":-1.5e+3}`,
			want: []member{{`"a"`, `1`}, {`"b"`, `"x"`}, {`"c"`, `null`}, {`"d"`, `true`}, {`"e"`, `false`}, {`"f"`, `-1.5e+3`}},
		},
		{
			name: "nested objects and arrays",
			in:   `{"o":{"p":[1,{"q":[]},[[{}]]]},"a":[{"x":{"y":"z"}}],"n":0}`,
			want: []member{{`"o"`, `{"p":[1,{"q":[]},[[{}]]]}`}, {`"a"`, `[{"x":{"y":"z"}}]`}, {`"n"`, `0`}},
		},
		{
			name: "strings holding braces and escaped quotes",
			in:   `{"s":"a}\"b{","t":"\\","u":"\\\"}]","v":{"w":"}}]]\"{"},"x":["\"]"]}`,
			want: []member{{`"s"`, `"a}\"b{"`}, {`"t"`, `"\\"`}, {`"u"`, `"\\\"}]"`}, {`"v"`, `{"w":"}}]]\"{"}`}, {`"x"`, `["\"]"]`}},
		},
		{
			name: "whitespace everywhere",
			in:   " \n{ \"a\" :\t1 ,\r\n\"b\"\n:\n[ 1 , 2 ] ,\"c\" : { \"d\" : \"e f\" } }\n ",
			want: []member{{`"a"`, `1`}, {`"b"`, `[ 1 , 2 ]`}, {`"c"`, `{ "d" : "e f" }`}},
		},
		{
			name: "escaped keys kept raw",
			in:   `{"na\u006de":"x","\"q\"":1,"a\\b":2}`,
			want: []member{{`"na\u006de"`, `"x"`}, {`"\"q\""`, `1`}, {`"a\\b"`, `2`}},
		},
		{
			name: "duplicate keys all reported",
			in:   `{"a":1,"a":2}`,
			want: []member{{`"a"`, `1`}, {`"a"`, `2`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := members(t, tc.in)
			if err != nil {
				t.Fatalf("Each: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("members =\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}

	t.Run("stops when fn returns false", func(t *testing.T) {
		n := 0
		err := Each([]byte(`{"a":1,"b":2,"c":3}`), func(Field) bool { n++; return n < 2 })
		if err != nil || n != 2 {
			t.Errorf("Each visited %d members, err %v; want 2, nil", n, err)
		}
	})
}

// badInputs are not objects (ErrNotObject) or are broken objects (ErrSyntax).
var badInputs = []struct {
	in   string
	want error
}{
	{``, ErrNotObject},
	{`   `, ErrNotObject},
	{`[1,2]`, ErrNotObject},
	{`"s"`, ErrNotObject},
	{`1`, ErrNotObject},
	{`null`, ErrNotObject},
	{`true`, ErrNotObject},
	{`}`, ErrNotObject},
	{`{`, ErrSyntax},
	{`{ `, ErrSyntax},
	{`{"a"`, ErrSyntax},
	{`{"a":`, ErrSyntax},
	{`{"a":}`, ErrSyntax},
	{`{"a":1`, ErrSyntax},
	{`{"a":1,}`, ErrSyntax},
	{`{"a":1,`, ErrSyntax},
	{`{,}`, ErrSyntax},
	{`{"a" 1}`, ErrSyntax},
	{`{a:1}`, ErrSyntax},
	{`{'a':1}`, ErrSyntax},
	{`{"a":1 "b":2}`, ErrSyntax},
	{`{"a":"unterminated}`, ErrSyntax},
	{`{"a\`, ErrSyntax},
	{`{"a\"}`, ErrSyntax},
	{`{"a":"b\"}`, ErrSyntax},
	{`{"a":[1,2}`, ErrSyntax},
	{`{"a":{"b":1}`, ErrSyntax},
	{`{"a":[`, ErrSyntax},
	{`{"a":["]"}`, ErrSyntax},
	{`{"a":1,,"b":2}`, ErrSyntax},
}

func TestMalformed(t *testing.T) {
	for _, tc := range badInputs {
		t.Run(fmt.Sprintf("%q", tc.in), func(t *testing.T) {
			if _, err := members(t, tc.in); !errors.Is(err, tc.want) {
				t.Errorf("Each = %v, want %v", err, tc.want)
			}
			if _, _, err := Get([]byte(tc.in), "zz"); !errors.Is(err, tc.want) {
				t.Errorf("Get = %v, want %v", err, tc.want)
			}
			if _, _, err := GetString([]byte(tc.in), "zz"); !errors.Is(err, tc.want) {
				t.Errorf("GetString = %v, want %v", err, tc.want)
			}
			// Edit treats empty input as {}; everything else must fail.
			wantEdit := tc.want
			if strings.TrimSpace(tc.in) == "" {
				wantEdit = nil
			}
			if out, err := Set([]byte(tc.in), "k", []byte(`1`)); !errors.Is(err, wantEdit) || (err != nil && out != nil) {
				t.Errorf("Set = %q, %v; want nil, %v", out, err, wantEdit)
			}
			if out, err := Delete([]byte(tc.in), "k"); !errors.Is(err, wantEdit) || (err != nil && out != nil) {
				t.Errorf("Delete = %q, %v; want nil, %v", out, err, wantEdit)
			}
		})
	}
}

func TestGet(t *testing.T) {
	tests := []struct {
		name, obj, key string
		want           string
		ok             bool
	}{
		{"present", `{"name":"x"}`, "name", `"x"`, true},
		{"absent", `{"name":"x"}`, "nam", "", false},
		{"empty object", `{}`, "name", "", false},
		{"escaped key", `{"na\u006de":"x"}`, "name", `"x"`, true},
		{"fully escaped key", `{"\u006e\u0061\u006D\u0065":1}`, "name", `1`, true},
		{"escaped quote in key", `{"a\"b":1}`, `a"b`, `1`, true},
		{"backslash in key", `{"a\\b":1}`, `a\b`, `1`, true},
		{"raw text of an escape is not the name", `{"a\"b":1}`, `a\"b`, "", false},
		{"raw text of a unicode escape is not the name", `{"\u0061":1}`, `\u0061`, "", false},
		{"unicode key", `{"\u00e9t\u00e9":1,"été":2}`, "été", `1`, true},
		{"key case matters", `{"Name":"x"}`, "name", "", false},
		{"nested key is not top-level", `{"args":{"name":"inner"},"n":1}`, "name", "", false},
		{"top-level after nested", `{"args":{"name":"inner"},"name":"outer"}`, "name", `"outer"`, true},
		{"key text inside a string value", `{"s":"\"name\":1","x":2}`, "name", "", false},
		{"value kept raw", `{"a": { "b" : [ 1 , 2 ] } }`, "a", `{ "b" : [ 1 , 2 ] }`, true},
		{"first of duplicates", `{"a":1,"a":2}`, "a", `1`, true},
		{"empty key", `{"":1}`, "", `1`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := Get([]byte(tc.obj), tc.key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if string(got) != tc.want || ok != tc.ok {
				t.Errorf("Get(%s, %q) = %q, %v; want %q, %v", tc.obj, tc.key, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestGetString(t *testing.T) {
	tests := []struct {
		name, obj, key string
		want           string
		ok             bool
		err            error
	}{
		{"plain", `{"name":"search"}`, "name", "search", true, nil},
		{"escapes", `{"name":"a\u0062\"c\\d\n\/"}`, "name", "ab\"c\\d\n/", true, nil},
		{"escaped key", `{"na\u006de":"x"}`, "name", "x", true, nil},
		{"html kept", `{"s":"<&>"}`, "s", "<&>", true, nil},
		{"surrogate pair", `{"s":"\ud83d\ude00"}`, "s", "😀", true, nil},
		{"empty string", `{"s":""}`, "s", "", true, nil},
		{"absent", `{"a":"x"}`, "s", "", false, nil},
		{"number", `{"s":1}`, "s", "", false, nil},
		{"null", `{"s":null}`, "s", "", false, nil},
		{"object", `{"s":{"t":"x"}}`, "s", "", false, nil},
		{"bad escape", `{"s":"\x"}`, "s", "", false, ErrSyntax},
		{"not an object", `["s"]`, "s", "", false, ErrNotObject},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := GetString([]byte(tc.obj), tc.key)
			if got != tc.want || ok != tc.ok || !errors.Is(err, tc.err) {
				t.Errorf("GetString(%s, %q) = %q, %v, %v; want %q, %v, %v", tc.obj, tc.key, got, ok, err, tc.want, tc.ok, tc.err)
			}
		})
	}
}

func TestUnquote(t *testing.T) {
	tests := []struct {
		in   string
		want string
		err  error
	}{
		{`""`, "", nil},
		{`"abc"`, "abc", nil},
		{`"<&>"`, "<&>", nil},
		{`"a\"b"`, `a"b`, nil},
		{`"\u0061\t\\"`, "a\t\\", nil},
		{`"\ud83d\ude00"`, "😀", nil},
		{`"\ud800"`, "\ufffd", nil},
		{"\"a\xffb\"", "a\ufffdb", nil}, // as encoding/json, with or without escapes
		{"\"a\xffb\\n\"", "a\ufffdb\n", nil},
		{``, "", ErrSyntax},
		{`"`, "", ErrSyntax},
		{`abc`, "", ErrSyntax},
		{`"abc`, "", ErrSyntax},
		{`abc"`, "", ErrSyntax},
		{`1`, "", ErrSyntax},
		{`"\x"`, "", ErrSyntax},
		{`"\u12"`, "", ErrSyntax},
		{`"a\"`, "", ErrSyntax},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Unquote([]byte(tc.in))
			if got != tc.want || !errors.Is(err, tc.err) {
				t.Errorf("Unquote(%s) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestKeyIs(t *testing.T) {
	tests := []struct {
		raw, name string
		want      bool
	}{
		{`"name"`, "name", true},
		{`"name"`, "Name", false},
		{`"name"`, "nam", false},
		{`"na\u006de"`, "name", true},
		{`"na\u006De"`, "name", true},
		{`"na\u006de"`, `na\u006de`, false},
		{`"a\"b"`, `a"b`, true},
		{`"a\"b"`, `a\"b`, false},
		{`"a\\b"`, `a\b`, true},
		{`"a\\b"`, `a\\b`, false},
		{`"\/"`, "/", true},
		{`""`, "", true},
		{`"\u0000"`, "\x00", true},
		{`"é"`, "é", true},
		{`"\u00e9"`, "é", true},
		{`"\ud83d\ude00"`, "😀", true},
		{`"\x"`, `\x`, false}, // not a valid literal: never equal
	}
	for _, tc := range tests {
		t.Run(tc.raw+"="+tc.name, func(t *testing.T) {
			if got := KeyIs([]byte(tc.raw), tc.name); got != tc.want {
				t.Errorf("KeyIs(%s, %q) = %v, want %v", tc.raw, tc.name, got, tc.want)
			}
		})
	}
}

func TestEdit(t *testing.T) {
	tests := []struct {
		name    string
		obj     string
		changes []Change
		want    string
	}{
		{
			name:    "replace keeps position and order",
			obj:     `{"a":1,"name":"old","z":[1,2]}`,
			changes: []Change{{Key: "name", Value: []byte(`"new"`)}},
			want:    `{"a":1,"name":"new","z":[1,2]}`,
		},
		{
			name:    "replace first member",
			obj:     `{"name":"old","a":1}`,
			changes: []Change{{Key: "name", Value: []byte(`"new"`)}},
			want:    `{"name":"new","a":1}`,
		},
		{
			name:    "replace keeps the escaped key as sent",
			obj:     `{"na\u006de":"old","_meta":{"k":1}}`,
			changes: []Change{{Key: "name", Value: []byte(`"new"`)}},
			want:    `{"na\u006de":"new","_meta":{"k":1}}`,
		},
		{
			name:    "add appends",
			obj:     `{"a":1,"b":2}`,
			changes: []Change{{Key: "c", Value: []byte(`{"d":[]}`)}},
			want:    `{"a":1,"b":2,"c":{"d":[]}}`,
		},
		{
			name:    "added members keep the given order",
			obj:     `{"a":1}`,
			changes: []Change{{Key: "y", Value: []byte(`1`)}, {Key: "x", Value: []byte(`2`)}},
			want:    `{"a":1,"y":1,"x":2}`,
		},
		{
			name:    "added key is escaped",
			obj:     `{}`,
			changes: []Change{{Key: "a\"b\\c\n", Value: []byte(`1`)}},
			want:    `{"a\"b\\c\n":1}`,
		},
		{
			name:    "replace, add and delete in one pass",
			obj:     `{"a":1,"b":2,"c":3}`,
			changes: []Change{{Key: "c", Value: []byte(`30`)}, {Key: "a", Delete: true}, {Key: "d", Value: []byte(`4`)}},
			want:    `{"b":2,"c":30,"d":4}`,
		},
		{
			name:    "delete middle",
			obj:     `{"a":1,"b":2,"c":3}`,
			changes: []Change{{Key: "b", Delete: true}},
			want:    `{"a":1,"c":3}`,
		},
		{
			name:    "delete first and last",
			obj:     `{"a":1,"b":2,"c":3}`,
			changes: []Change{{Key: "a", Delete: true}, {Key: "c", Delete: true}},
			want:    `{"b":2}`,
		},
		{
			name:    "delete only member",
			obj:     `{"a":1}`,
			changes: []Change{{Key: "a", Delete: true}},
			want:    `{}`,
		},
		{
			name:    "delete absent is a no-op",
			obj:     `{"a":1}`,
			changes: []Change{{Key: "b", Delete: true}},
			want:    `{"a":1}`,
		},
		{
			name:    "delete escaped key",
			obj:     `{"\u0061":1,"b":2}`,
			changes: []Change{{Key: "a", Delete: true}},
			want:    `{"b":2}`,
		},
		{
			name:    "whitespace between members dropped, inside values kept",
			obj:     "{ \"a\" : { \"x\" : 1 } ,\n \"b\" :\t\"v w\" }",
			changes: []Change{{Key: "b", Value: []byte(`2`)}},
			want:    `{"a":{ "x" : 1 },"b":2}`,
		},
		{
			name:    "nested key of the same name untouched",
			obj:     `{"arguments":{"name":"inner"},"name":"outer"}`,
			changes: []Change{{Key: "name", Value: []byte(`"x"`)}},
			want:    `{"arguments":{"name":"inner"},"name":"x"}`,
		},
		{
			name:    "strings with braces and quotes survive",
			obj:     `{"s":"}\"{","name":"a","t":["]","\\"]}`,
			changes: []Change{{Key: "name", Value: []byte(`"b"`)}},
			want:    `{"s":"}\"{","name":"b","t":["]","\\"]}`,
		},
		{
			name:    "every duplicate replaced",
			obj:     `{"name":"a","x":1,"name":"b"}`,
			changes: []Change{{Key: "name", Value: []byte(`"c"`)}},
			want:    `{"name":"c","x":1,"name":"c"}`,
		},
		{
			name:    "every duplicate deleted",
			obj:     `{"name":"a","x":1,"name":"b"}`,
			changes: []Change{{Key: "name", Delete: true}},
			want:    `{"x":1}`,
		},
		{
			name: "no changes copies members",
			obj:  ` {"a":1} `,
			want: `{"a":1}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.obj)
			orig := bytes.Clone(in)
			got, err := Edit(in, tc.changes)
			if err != nil {
				t.Fatalf("Edit: %v", err)
			}
			if string(got) != tc.want {
				t.Errorf("Edit =\n  %s\nwant\n  %s", got, tc.want)
			}
			if !bytes.Equal(in, orig) {
				t.Errorf("Edit modified its input: %q", in)
			}
			if !json.Valid(got) {
				t.Errorf("invalid JSON: %s", got)
			}
		})
	}
}

func TestSetDelete(t *testing.T) {
	tests := []struct {
		name string
		obj  []byte
		key  string
		val  string
		want string
	}{
		{"nil object", nil, "name", `"x"`, `{"name":"x"}`},
		{"empty bytes", []byte{}, "name", `"x"`, `{"name":"x"}`},
		{"whitespace only", []byte(" \n\t"), "name", `"x"`, `{"name":"x"}`},
		{"empty object", []byte(`{}`), "name", `"x"`, `{"name":"x"}`},
		{"empty object with spaces", []byte(`{ }`), "name", `"x"`, `{"name":"x"}`},
		{"replace", []byte(`{"name":"a","b":1}`), "name", `"x"`, `{"name":"x","b":1}`},
		{"add", []byte(`{"b":1}`), "name", `"x"`, `{"b":1,"name":"x"}`},
		{"value kept raw", []byte(`{"b":1}`), "v", `{ "k" : [1, 2.50] }`, `{"b":1,"v":{ "k" : [1, 2.50] }}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Set(tc.obj, tc.key, []byte(tc.val))
			if err != nil || string(got) != tc.want {
				t.Errorf("Set = %s, %v; want %s", got, err, tc.want)
			}
		})
	}

	got, err := Delete(nil, "a")
	if err != nil || string(got) != `{}` {
		t.Errorf("Delete(nil) = %s, %v; want {}", got, err)
	}

	// The result never aliases the input.
	in := []byte(`{"a":1}`)
	out, err := Set(in, "a", []byte(`2`))
	if err != nil {
		t.Fatal(err)
	}
	out[1] = 'X'
	if string(in) != `{"a":1}` {
		t.Errorf("the result shares memory with the input: %s", in)
	}
}

func TestEditTooManyChanges(t *testing.T) {
	changes := make([]Change, 65)
	for i := range changes {
		changes[i] = Change{Key: fmt.Sprint(i), Value: []byte(`1`)}
	}
	if _, err := Edit([]byte(`{}`), changes); err == nil {
		t.Errorf("Edit with 65 changes succeeded")
	}
	out, err := Edit([]byte(`{"63":0}`), changes[:64])
	if err != nil {
		t.Fatalf("Edit with 64 changes: %v", err)
	}
	var m map[string]int
	if err := json.Unmarshal(out, &m); err != nil || len(m) != 64 || m["63"] != 1 {
		t.Errorf("Edit with 64 changes = %s, %v", out, err)
	}
}

// FuzzEdit checks that no input makes the editors panic, and that on any valid object
// without duplicate keys Set and Delete change exactly one key.
func FuzzEdit(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"k":0}`,
		`{"a":1,"k":"x","b":[1,{"c":"}"}]}`,
		`{"\u006b":true,"K":1}`,
		" {\n\"a\" : \"\\\"}\" ,\"b\":{ }}\t",
		`{"a":-0.5e-3,"b":null,"c":"\ud83d\ude00"}`,
		`{"a":[[[[{}]]]]}`,
		`{"a":{]}`,
		`{"a":1,"a":2}`,
		`["k"]`,
		`{"a\`,
	} {
		f.Add([]byte(s))
	}
	for _, tc := range badInputs {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Whatever the input, nothing panics and nothing is written to data.
		orig := bytes.Clone(data)
		_ = Each(data, func(f Field) bool {
			_ = KeyIs(f.RawKey, "k")
			_, _ = Unquote(f.RawKey)
			return true
		})
		_, _, _ = Get(data, "k")
		_, _, _ = GetString(data, "k")
		_, _ = Unquote(data)
		set, setErr := Set(data, "k", []byte(`1`))
		del, delErr := Delete(data, "k")
		_, _ = Edit(data, []Change{{Key: "a", Value: []byte(`2`)}, {Key: "k", Delete: true}, {Key: "n", Value: []byte(`[]`)}})
		if !bytes.Equal(data, orig) {
			t.Fatalf("input modified: %q -> %q", orig, data)
		}

		if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' || !json.Valid(data) {
			return
		}
		before, ok := decodeUnique(data)
		if !ok {
			return // duplicate keys: encoding/json keeps the last, so maps cannot compare
		}
		if setErr != nil {
			t.Fatalf("Set on a valid object: %v\ninput: %q", setErr, data)
		}
		if delErr != nil {
			t.Fatalf("Delete on a valid object: %v\ninput: %q", delErr, data)
		}

		want := make(map[string]any, len(before)+1)
		for k, v := range before {
			want[k] = v
		}
		want["k"] = json.Number("1")
		if got := mustDecode(t, set); !reflect.DeepEqual(got, want) {
			t.Fatalf("Set(k, 1) changed more than k:\ninput:  %q\noutput: %q\ngot  %v\nwant %v", data, set, got, want)
		}

		delete(want, "k")
		if got := mustDecode(t, del); !reflect.DeepEqual(got, want) {
			t.Fatalf("Delete(k) changed more than k:\ninput:  %q\noutput: %q\ngot  %v\nwant %v", data, del, got, want)
		}

		if v, ok, err := Get(set, "k"); err != nil || !ok || string(v) != "1" {
			t.Fatalf("Get(Set(k, 1), k) = %q, %v, %v", v, ok, err)
		}
	})
}

// decodeUnique decodes a valid object into a map (numbers as json.Number, so they
// compare exactly) and reports false when two of its keys decode to the same string.
func decodeUnique(data []byte) (map[string]any, bool) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, false
	}
	n := 0
	if err := Each(data, func(Field) bool { n++; return true }); err != nil || n != len(m) {
		return nil, false
	}
	return m, true
}

func mustDecode(t *testing.T, data []byte) map[string]any {
	t.Helper()
	if !json.Valid(data) {
		t.Fatalf("invalid JSON: %q", data)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decoding %q: %v", data, err)
	}
	return m
}

func BenchmarkSetName(b *testing.B) {
	params := []byte(`{"name":"github__search_issues","arguments":{"owner":"modelcontextprotocol",` +
		`"repo":"go-sdk","query":"is:open label:bug transport stdio","per_page":20,"sort":"updated"},` +
		`"_meta":{"progressToken":"c1f3a6e2-7b0d-4e57-9a0c-2f8e1d4b6a90"}}`)
	name := []byte(`"search_issues"`)
	b.ReportAllocs()
	b.SetBytes(int64(len(params)))
	for b.Loop() {
		out, err := Set(params, "name", name)
		if err != nil || len(out) == 0 {
			b.Fatalf("Set = %s, %v", out, err)
		}
	}
}
