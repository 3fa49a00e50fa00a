package jsonrpc_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// FuzzDecode checks that Decode never panics and that whatever it accepts survives an
// Encode/Decode round trip on one line.
func FuzzDecode(f *testing.F) {
	for _, tc := range validCases {
		f.Add([]byte(tc.in))
	}
	for _, s := range []string{
		``,
		`[]`,
		`{"jsonrpc":"2.0","id":null,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`,
		`{"jsonrpc":2,"id":1,"method":"m"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\n\"a\" :\r\n [1,\n2]}}",
		"{\"jsonrpc\":\"2.0\",\"id\":\"\u2028\",\"error\":{\"code\":0,\"message\":\"\\ud800\",\"data\":\n\"x\"}}",
		`{"JSONRPC":"2.0","ID":1,"Method":"m","method":null,"result":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := jsonrpc.Decode(data)
		if err != nil {
			return
		}
		out, err := m.Encode()
		if err != nil {
			t.Fatalf("Encode of a decoded message failed: %v\ninput: %q", err, data)
		}
		if bytes.ContainsAny(out, "\r\n") {
			t.Fatalf("encoding spans lines: %q", out)
		}
		if !json.Valid(out) {
			t.Fatalf("encoding is not valid JSON: %q", out)
		}
		again, err := jsonrpc.Decode(out)
		if err != nil {
			t.Fatalf("Decode(Encode(m)) failed: %v\ninput:  %q\nencoded: %q", err, data, out)
		}
		if again.ID.Raw() != m.ID.Raw() {
			t.Errorf("ID %q became %q", m.ID.Raw(), again.ID.Raw())
		}
		if again.ID.Key() != m.ID.Key() {
			t.Errorf("ID key %q became %q", m.ID.Key(), again.ID.Key())
		}
		if again.Method != m.Method {
			t.Errorf("Method %q became %q", m.Method, again.Method)
		}
		if !compactEqual(t, again.Params, m.Params) {
			t.Errorf("Params %q became %q", m.Params, again.Params)
		}
		if !compactEqual(t, again.Result, m.Result) {
			t.Errorf("Result %q became %q", m.Result, again.Result)
		}
		if (again.Error == nil) != (m.Error == nil) {
			t.Fatalf("Error %v became %v", m.Error, again.Error)
		}
		if m.Error != nil && (again.Error.Code != m.Error.Code || again.Error.Message != m.Error.Message ||
			!compactEqual(t, again.Error.Data, m.Error.Data)) {
			t.Errorf("Error %+v became %+v", m.Error, again.Error)
		}
		if kindOf(again) != kindOf(m) || kindOf(m) == 0 {
			t.Errorf("kind %v became %v", kindOf(m), kindOf(again))
		}
		if out2, err := again.Encode(); err != nil || !bytes.Equal(out2, out) {
			t.Errorf("second encoding differs: %q, %v\nfirst: %q", out2, err, out)
		}
	})
}

// compactEqual reports whether two raw JSON values are equal after json.Compact; both
// empty counts as equal.
func compactEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var ca, cb bytes.Buffer
	if err := json.Compact(&ca, a); err != nil {
		t.Fatalf("compacting %q: %v", a, err)
	}
	if err := json.Compact(&cb, b); err != nil {
		t.Fatalf("compacting %q: %v", b, err)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
