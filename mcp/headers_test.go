package mcp

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestHeaderValueRoundTrip(t *testing.T) {
	for in, want := range map[string]string{
		"us-west1":            "us-west1",
		"Hello, 世界":           "=?base64?SGVsbG8sIOS4lueVjA==?=",
		" padded ":            "=?base64?IHBhZGRlZCA=?=",
		"line1\nline2":        "=?base64?bGluZTEKbGluZTI=?=",
		"=?base64?literal?=":  "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=",
		"file:///a/b c.json":  "file:///a/b c.json",
		"":                    "",
		"=?base64?unfinished": "=?base64?unfinished",
	} {
		if got := EncodeHeaderValue(in); got != want {
			t.Errorf("EncodeHeaderValue(%q) = %q, want %q", in, got, want)
		}
		back, err := DecodeHeaderValue(want)
		if err != nil || back != in {
			t.Errorf("DecodeHeaderValue(%q) = %q, %v; want %q", want, back, err, in)
		}
	}
	for _, bad := range []string{"=?base64?!!!?=", "caf\xc3\xa9", "a\x01b"} {
		if _, err := DecodeHeaderValue(bad); err == nil {
			t.Errorf("DecodeHeaderValue(%q) accepted", bad)
		}
	}
}

func TestParamHeadersSchema(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         []string // Header names, in any order; nil with wantErr
		wantErr      string
	}{
		{"none", `{"type":"object","properties":{"a":{"type":"string"}}}`, nil, ""},
		{"top level", `{"type":"object","properties":{
			"region":{"type":"string","x-mcp-header":"Region"},
			"n":{"type":"integer","x-mcp-header":"N"},
			"on":{"type":"boolean","x-mcp-header":"On"}}}`, []string{"Mcp-Param-Region", "Mcp-Param-N", "Mcp-Param-On"}, ""},
		{"nested properties", `{"properties":{"where":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}}}}`,
			[]string{"Mcp-Param-Zone"}, ""},
		{"property named like the keyword", `{"properties":{"x-mcp-header":{"type":"string"}}}`, nil, ""},
		{"number", `{"properties":{"f":{"type":"number","x-mcp-header":"F"}}}`, nil, "only string, integer and boolean"},
		{"through items", `{"properties":{"l":{"type":"array","items":{"type":"string","x-mcp-header":"L"}}}}`, nil, "reachable"},
		{"through anyOf", `{"properties":{"u":{"anyOf":[{"type":"string","x-mcp-header":"U"}]}}}`, nil, "reachable"},
		{"through $defs", `{"$defs":{"d":{"type":"string","x-mcp-header":"D"}},"properties":{}}`, nil, "reachable"},
		{"on the root", `{"type":"object","x-mcp-header":"Root"}`, nil, "reachable"},
		{"not a token", `{"properties":{"a":{"type":"string","x-mcp-header":"A B"}}}`, nil, "token"},
		{"empty", `{"properties":{"a":{"type":"string","x-mcp-header":""}}}`, nil, "token"},
		{"duplicate", `{"properties":{"a":{"type":"string","x-mcp-header":"Dup"},"b":{"type":"string","x-mcp-header":"dup"}}}`, nil, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			phs, err := ParamHeaders(json.RawMessage(tc.schema))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, ph := range phs {
				got[ph.Header] = true
			}
			if len(got) != len(tc.want) {
				t.Fatalf("headers %v, want %v", got, tc.want)
			}
			for _, h := range tc.want {
				if !got[h] {
					t.Errorf("missing %s in %v", h, got)
				}
			}
		})
	}
}

func TestParamHeaderValuesAndCheck(t *testing.T) {
	phs, err := ParamHeaders(json.RawMessage(`{"properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"n":{"type":"integer","x-mcp-header":"N"},
		"on":{"type":"boolean","x-mcp-header":"On"},
		"where":{"properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}},
		"plain":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	params := json.RawMessage(`{"name":"t","arguments":{"region":" eu","n":7,"on":false,"where":{"zone":"b"},"plain":"x"}}`)
	got := ParamHeaderValues(phs, params)
	want := map[string]string{"Mcp-Param-Region": "=?base64?IGV1?=", "Mcp-Param-N": "7", "Mcp-Param-On": "false", "Mcp-Param-Zone": "b"}
	if len(got) != len(want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if h := ParamHeaderValues(phs, json.RawMessage(`{"name":"t","arguments":{"region":null}}`)); h != nil {
		t.Errorf("null argument gave headers %v", h)
	}

	getter := func(h http.Header) HeaderGetter {
		return func(name string) (string, bool) {
			v := h.Values(name)
			if len(v) == 0 {
				return "", false
			}
			return v[0], true
		}
	}
	ok := http.Header{}
	for k, v := range want {
		ok.Set(k, v)
	}
	if err := CheckParamHeaders(phs, params, getter(ok)); err != nil {
		t.Errorf("matching headers refused: %v", err)
	}
	numeric := ok.Clone()
	numeric.Set("Mcp-Param-N", "7.0")
	if err := CheckParamHeaders(phs, params, getter(numeric)); err != nil {
		t.Errorf("7.0 for 7 refused: %v", err)
	}
	for name, mutate := range map[string]func(http.Header){
		"missing":          func(h http.Header) { h.Del("Mcp-Param-Region") },
		"different":        func(h http.Header) { h.Set("Mcp-Param-Region", "eu") },
		"wrong number":     func(h http.Header) { h.Set("Mcp-Param-N", "8") },
		"wrong bool":       func(h http.Header) { h.Set("Mcp-Param-On", "true") },
		"bad base64":       func(h http.Header) { h.Set("Mcp-Param-Zone", "=?base64?***?=") },
		"non-ascii":        func(h http.Header) { h.Set("Mcp-Param-Zone", "b\xc3\xa9") },
		"nested different": func(h http.Header) { h.Set("Mcp-Param-Zone", "c") },
	} {
		h := ok.Clone()
		mutate(h)
		if err := CheckParamHeaders(phs, params, getter(h)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	extra := http.Header{}
	extra.Set("Mcp-Param-Region", "eu")
	if err := CheckParamHeaders(phs, json.RawMessage(`{"name":"t","arguments":{}}`), getter(extra)); err == nil {
		t.Error("a header without its argument was accepted")
	}
	if err := CheckParamHeaders(phs, json.RawMessage(`{"name":"t","arguments":{"region":null}}`), getter(http.Header{})); err != nil {
		t.Errorf("null argument without header refused: %v", err)
	}
}

// FuzzHeaderValue: encoding round-trips, the encoded form is always a valid header
// value, and decoding never panics.
func FuzzHeaderValue(f *testing.F) {
	for _, s := range []string{"us-west1", " padded ", "=?base64?x?=", "Zürich", "", "a\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := EncodeHeaderValue(s)
		for i := 0; i < len(enc); i++ {
			if enc[i] < 0x20 || enc[i] > 0x7e {
				t.Fatalf("EncodeHeaderValue(%q) = %q holds byte 0x%02x", s, enc, enc[i])
			}
		}
		if dec, err := DecodeHeaderValue(enc); err != nil || dec != s {
			t.Fatalf("round trip of %q: %q %v", s, dec, err)
		}
		_, _ = DecodeHeaderValue(s)
	})
}

// FuzzParamHeaders: any schema is either accepted with valid annotations or refused;
// never a panic.
func FuzzParamHeaders(f *testing.F) {
	f.Add(`{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}`)
	f.Add(`{"properties":{"a":{"properties":{"b":{"type":"integer","x-mcp-header":"B"}}}}}`)
	f.Add(`{"items":[{"x-mcp-header":"X"}]}`)
	f.Fuzz(func(t *testing.T, schema string) {
		phs, err := ParamHeaders(json.RawMessage(schema))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, ph := range phs {
			name := strings.ToLower(ph.Header)
			if seen[name] || len(ph.Path) == 0 || !isToken(strings.TrimPrefix(ph.Header, ParamHeaderPrefix)) {
				t.Fatalf("accepted an invalid annotation %+v in %s", ph, schema)
			}
			seen[name] = true
		}
	})
}
