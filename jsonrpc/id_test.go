package jsonrpc_test

import (
	"encoding/json"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

func TestIDKey(t *testing.T) {
	decodeID := func(t *testing.T, raw string) jsonrpc.ID {
		t.Helper()
		m, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":` + raw + `,"method":"m"}`))
		if err != nil {
			t.Fatalf("Decode id %s: %v", raw, err)
		}
		if m.ID.Raw() != raw {
			t.Fatalf("ID.Raw() = %q, want %q", m.ID.Raw(), raw)
		}
		return m.ID
	}
	tests := []struct {
		a, b string // raw ids
		same bool
	}{
		{`"a"`, `"\u0061"`, true},
		{`"a"`, `"\u0041"`, false},
		{`"7"`, `7`, false},
		{`"7"`, `"\u0037"`, true},
		{`7`, `7`, true},
		{`1e3`, `1000`, false}, // numbers compare by literal text
		{`-0`, `0`, false},
		{`"/"`, `"\/"`, true},
		{`"é"`, `"\u00e9"`, true},
		{`"é"`, `"\u00E9"`, true},
		{`"😀"`, `"\ud83d\ude00"`, true},
		{`"a\"b"`, `"a\u0022b"`, true},
		{`"tab\t"`, `"tab\u0009"`, true},
		{"\"\u2028\"", `"\u2028"`, true},
		{"\"x\u2029y\"", `"x\u2029y"`, true},
		{"\"\xff\"", `"\ufffd"`, true}, // encoding/json decodes invalid UTF-8 to U+FFFD
		{`"ab"`, `"a"`, false},
	}
	for _, tc := range tests {
		t.Run(tc.a+"_"+tc.b, func(t *testing.T) {
			a, b := decodeID(t, tc.a), decodeID(t, tc.b)
			if got := a.Key() == b.Key(); got != tc.same {
				t.Errorf("Key(%s) = %q, Key(%s) = %q; equal = %v, want %v", tc.a, a.Key(), tc.b, b.Key(), got, tc.same)
			}
		})
	}

	t.Run("constructors", func(t *testing.T) {
		if got, want := jsonrpc.StringID("a").Key(), decodeID(t, `"\u0061"`).Key(); got != want {
			t.Errorf("StringID(a).Key() = %q, want %q", got, want)
		}
		if got, want := jsonrpc.IntID(7).Key(), decodeID(t, `7`).Key(); got != want {
			t.Errorf("IntID(7).Key() = %q, want %q", got, want)
		}
		if jsonrpc.IntID(7).Key() == jsonrpc.StringID("7").Key() {
			t.Errorf("IntID(7) and StringID(\"7\") share a key")
		}
		if (jsonrpc.ID{}).Key() == jsonrpc.StringID("").Key() {
			t.Errorf("the absent id and the empty string id share a key")
		}
	})
}

func TestIDAccessors(t *testing.T) {
	tests := []struct {
		id       jsonrpc.ID
		raw      string
		isString bool
		n        int64
		isInt    bool
		str      string
		json     string
	}{
		{id: jsonrpc.ID{}, raw: "", str: "<none>", json: "null"},
		{id: jsonrpc.IntID(-12), raw: "-12", n: -12, isInt: true, str: "-12", json: "-12"},
		{id: jsonrpc.StringID("7"), raw: `"7"`, isString: true, str: `"7"`, json: `"7"`},
		{id: jsonrpc.StringID("a b\n"), raw: `"a b\n"`, isString: true, str: `"a b\n"`, json: `"a b\n"`},
	}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			if got := tc.id.Raw(); got != tc.raw {
				t.Errorf("Raw() = %q, want %q", got, tc.raw)
			}
			if got := tc.id.IsString(); got != tc.isString {
				t.Errorf("IsString() = %v, want %v", got, tc.isString)
			}
			n, ok := tc.id.Int64()
			if n != tc.n || ok != tc.isInt {
				t.Errorf("Int64() = %d, %v; want %d, %v", n, ok, tc.n, tc.isInt)
			}
			if got := tc.id.String(); got != tc.str {
				t.Errorf("String() = %q, want %q", got, tc.str)
			}
			b, err := json.Marshal(tc.id)
			if err != nil || string(b) != tc.json {
				t.Errorf("json.Marshal = %s, %v; want %s", b, err, tc.json)
			}
		})
	}

	t.Run("Int64 of non-integers", func(t *testing.T) {
		for _, raw := range []string{`1e3`, `1.0`, `9223372036854775808`, `"7"`} {
			m, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":` + raw + `,"method":"m"}`))
			if err != nil {
				t.Fatal(err)
			}
			if n, ok := m.ID.Int64(); ok {
				t.Errorf("Int64(%s) = %d, true; want false", raw, n)
			}
		}
	})

	t.Run("UnmarshalJSON", func(t *testing.T) {
		var v struct{ A, B, C jsonrpc.ID }
		if err := json.Unmarshal([]byte(`{"A":9007199254740993,"B":"\u0037","C":null}`), &v); err != nil {
			t.Fatal(err)
		}
		if v.A.Raw() != `9007199254740993` || v.B.Raw() != `"\u0037"` || v.C.IsValid() {
			t.Errorf("got %q %q %q", v.A.Raw(), v.B.Raw(), v.C.Raw())
		}
		if err := json.Unmarshal([]byte(`{"A":true}`), &v); err == nil {
			t.Errorf("a boolean id was accepted")
		}
	})
}
