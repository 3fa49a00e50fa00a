package jsonrpc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// kind names the classification a decoded message must have.
type kind int

const (
	kindRequest kind = iota + 1
	kindNotification
	kindResponse
)

func kindOf(m *jsonrpc.Message) kind {
	var k kind
	n := 0
	if m.IsRequest() {
		k, n = kindRequest, n+1
	}
	if m.IsNotification() {
		k, n = kindNotification, n+1
	}
	if m.IsResponse() {
		k, n = kindResponse, n+1
	}
	if n != 1 {
		return 0 // the predicates must be mutually exclusive
	}
	return k
}

func (k kind) String() string {
	switch k {
	case kindRequest:
		return "request"
	case kindNotification:
		return "notification"
	case kindResponse:
		return "response"
	}
	return "unclassified"
}

// validCases decode without error; out is the exact wire encoding of the decoded message.
var validCases = []struct {
	name   string
	in     string
	kind   kind
	id     string // ID.Raw()
	method string
	params string
	result string
	err    *jsonrpc.Error
	out    string
}{
	{
		name:   "request with numeric id",
		in:     `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`,
		kind:   kindRequest,
		id:     `7`,
		method: "tools/call",
		params: `{"name":"x"}`,
		out:    `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`,
	},
	{
		name:   "string id stays a string",
		in:     `{"jsonrpc":"2.0","id":"7","method":"ping"}`,
		kind:   kindRequest,
		id:     `"7"`,
		method: "ping",
		out:    `{"jsonrpc":"2.0","id":"7","method":"ping"}`,
	},
	{
		name:   "id beyond float64 precision",
		in:     `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
		kind:   kindRequest,
		id:     `9007199254740993`,
		method: "ping",
		out:    `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
	},
	{
		name:   "negative zero id",
		in:     `{"jsonrpc":"2.0","id":-0,"method":"ping"}`,
		kind:   kindRequest,
		id:     `-0`,
		method: "ping",
		out:    `{"jsonrpc":"2.0","id":-0,"method":"ping"}`,
	},
	{
		name:   "exponent id",
		in:     `{"jsonrpc":"2.0","id":1e3,"method":"ping"}`,
		kind:   kindRequest,
		id:     `1e3`,
		method: "ping",
		out:    `{"jsonrpc":"2.0","id":1e3,"method":"ping"}`,
	},
	{
		name:   "fractional id",
		in:     `{"jsonrpc":"2.0","id":1.50,"method":"ping"}`,
		kind:   kindRequest,
		id:     `1.50`,
		method: "ping",
		out:    `{"jsonrpc":"2.0","id":1.50,"method":"ping"}`,
	},
	{
		name:   "escaped string id kept as sent",
		in:     `{"jsonrpc":"2.0","id":"\u0037","method":"ping"}`,
		kind:   kindRequest,
		id:     `"\u0037"`,
		method: "ping",
		out:    `{"jsonrpc":"2.0","id":"\u0037","method":"ping"}`,
	},
	{
		name:   "empty string id is present",
		in:     `{"jsonrpc":"2.0","id":"","method":"ping"}`,
		kind:   kindRequest,
		id:     `""`,
		method: "ping",
		out:    `{"jsonrpc":"2.0","id":"","method":"ping"}`,
	},
	{
		name:   "notification",
		in:     `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		kind:   kindNotification,
		method: "notifications/initialized",
		out:    `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	},
	{
		name:   "notification with null id",
		in:     `{"jsonrpc":"2.0","id":null,"method":"notifications/progress","params":{"progress":1}}`,
		kind:   kindNotification,
		method: "notifications/progress",
		params: `{"progress":1}`,
		out:    `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
	},
	{
		name:   "array params",
		in:     `{"jsonrpc":"2.0","id":1,"method":"sum","params":[1,2,3]}`,
		kind:   kindRequest,
		id:     `1`,
		method: "sum",
		params: `[1,2,3]`,
		out:    `{"jsonrpc":"2.0","id":1,"method":"sum","params":[1,2,3]}`,
	},
	{
		name:   "null params are dropped",
		in:     `{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`,
		kind:   kindRequest,
		id:     `1`,
		method: "ping",
		out:    `{"jsonrpc":"2.0","id":1,"method":"ping"}`,
	},
	{
		name:   "params bytes kept as sent",
		in:     `{"jsonrpc":"2.0","id":1,"method":"m","params":{ "b" : 1.0, "a":"\u00e9<&>" }}`,
		kind:   kindRequest,
		id:     `1`,
		method: "m",
		params: `{ "b" : 1.0, "a":"\u00e9<&>" }`,
		out:    `{"jsonrpc":"2.0","id":1,"method":"m","params":{ "b" : 1.0, "a":"\u00e9<&>" }}`,
	},
	{
		name:   "unknown top-level fields ignored",
		in:     `{"jsonrpc":"2.0","id":1,"method":"ping","extra":{"a":[1,{"b":"}"}]},"_meta":null}`,
		kind:   kindRequest,
		id:     `1`,
		method: "ping",
		out:    `{"jsonrpc":"2.0","id":1,"method":"ping"}`,
	},
	{
		name:   "whitespace and member order",
		in:     " \t{ \"params\" : [ ] ,\n \"method\":\"m\", \"id\" : \"a b\",\r\n\"jsonrpc\" : \"2.0\" }\r\n",
		kind:   kindRequest,
		id:     `"a b"`,
		method: "m",
		params: `[ ]`,
		out:    `{"jsonrpc":"2.0","id":"a b","method":"m","params":[ ]}`,
	},
	{
		name:   "method with escapes",
		in:     `{"jsonrpc":"2.0","id":1,"method":"a\u003cb\"c\\d\n"}`,
		kind:   kindRequest,
		id:     `1`,
		method: "a<b\"c\\d\n",
		out:    `{"jsonrpc":"2.0","id":1,"method":"a<b\"c\\d\n"}`,
	},
	{
		name:   "result response",
		in:     `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}`,
		kind:   kindResponse,
		id:     `7`,
		result: `{"content":[{"type":"text","text":"hi"}]}`,
		out:    `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}`,
	},
	{
		name:   "null result is a result",
		in:     `{"jsonrpc":"2.0","id":"x","result":null}`,
		kind:   kindResponse,
		id:     `"x"`,
		result: `null`,
		out:    `{"jsonrpc":"2.0","id":"x","result":null}`,
	},
	{
		name:   "null error next to a result",
		in:     `{"jsonrpc":"2.0","id":1,"result":[],"error":null}`,
		kind:   kindResponse,
		id:     `1`,
		result: `[]`,
		out:    `{"jsonrpc":"2.0","id":1,"result":[]}`,
	},
	{
		name: "error response",
		in:   `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}`,
		kind: kindResponse,
		id:   `3`,
		err:  &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found"},
		out:  `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}`,
	},
	{
		name: "error response with null id",
		in:   `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
		kind: kindResponse,
		err:  &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "Parse error"},
		out:  `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
	},
	{
		name: "error response without id",
		in:   `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"}}`,
		kind: kindResponse,
		err:  &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "Invalid Request"},
		out:  `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}`,
	},
	{
		name: "error data passed through",
		in:   `{"jsonrpc":"2.0","id":"e","error":{"code":-32000,"message":"boom","data":{"why":["<a>",1.0]},"extra":1}}`,
		kind: kindResponse,
		id:   `"e"`,
		err:  &jsonrpc.Error{Code: -32000, Message: "boom", Data: json.RawMessage(`{"why":["<a>",1.0]}`)},
		out:  `{"jsonrpc":"2.0","id":"e","error":{"code":-32000,"message":"boom","data":{"why":["<a>",1.0]}}}`,
	},
}

func TestDecodeValid(t *testing.T) {
	for _, tc := range validCases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := jsonrpc.Decode([]byte(tc.in))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got := kindOf(m); got != tc.kind {
				t.Errorf("kind = %v, want %v", got, tc.kind)
			}
			if got := m.ID.Raw(); got != tc.id {
				t.Errorf("ID.Raw() = %q, want %q", got, tc.id)
			}
			if got := m.ID.IsValid(); got != (tc.id != "") {
				t.Errorf("ID.IsValid() = %v, want %v", got, tc.id != "")
			}
			if m.Method != tc.method {
				t.Errorf("Method = %q, want %q", m.Method, tc.method)
			}
			if string(m.Params) != tc.params {
				t.Errorf("Params = %q, want %q", m.Params, tc.params)
			}
			if string(m.Result) != tc.result {
				t.Errorf("Result = %q, want %q", m.Result, tc.result)
			}
			if !errorsEqual(m.Error, tc.err) {
				t.Errorf("Error = %#v, want %#v", m.Error, tc.err)
			}
			out, err := m.Encode()
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if string(out) != tc.out {
				t.Errorf("Encode =\n  %s\nwant\n  %s", out, tc.out)
			}
			if !json.Valid(out) {
				t.Errorf("Encode produced invalid JSON: %s", out)
			}
			again, err := jsonrpc.Decode(out)
			if err != nil {
				t.Fatalf("Decode(Encode(m)): %v", err)
			}
			if again.ID.Raw() != m.ID.Raw() || again.Method != m.Method ||
				!bytes.Equal(again.Params, m.Params) || !bytes.Equal(again.Result, m.Result) ||
				!errorsEqual(again.Error, m.Error) {
				t.Errorf("round trip changed the message:\n  %s\n  %s", m, again)
			}
		})
	}
}

func errorsEqual(a, b *jsonrpc.Error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Code == b.Code && a.Message == b.Message && bytes.Equal(a.Data, b.Data)
}

func TestDecodeInvalid(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantMsg bool   // a non-nil Message comes back with the error
		id      string // its ID.Raw(), so the caller can answer the right request
		substr  string // in the error text
	}{
		{
			name:    "result with null id",
			in:      `{"jsonrpc":"2.0","id":null,"result":{}}`,
			wantMsg: true,
			substr:  "without id",
		},
		{
			name:    "result without id",
			in:      `{"jsonrpc":"2.0","result":{}}`,
			wantMsg: true,
			substr:  "without id",
		},
		{
			name:    "missing jsonrpc",
			in:      `{"id":1,"method":"ping"}`,
			wantMsg: true,
			id:      `1`,
			substr:  `jsonrpc must be "2.0"`,
		},
		{
			name:    "wrong jsonrpc version",
			in:      `{"jsonrpc":"1.0","id":"a","method":"ping"}`,
			wantMsg: true,
			id:      `"a"`,
			substr:  `jsonrpc must be "2.0"`,
		},
		{
			name:    "numeric jsonrpc version",
			in:      `{"jsonrpc":2.0,"id":4,"method":"ping"}`,
			wantMsg: true,
			id:      `4`,
		},
		{
			name:    "empty method",
			in:      `{"jsonrpc":"2.0","id":2,"method":""}`,
			wantMsg: true,
			id:      `2`,
			substr:  "empty method",
		},
		{
			name:    "method not a string",
			in:      `{"jsonrpc":"2.0","id":5,"method":5}`,
			wantMsg: true,
			id:      `5`,
		},
		{
			name:    "string params",
			in:      `{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}`,
			wantMsg: true,
			id:      `1`,
			substr:  "params must be an object or array",
		},
		{
			name:    "number params",
			in:      `{"jsonrpc":"2.0","id":1,"method":"m","params":3}`,
			wantMsg: true,
			id:      `1`,
			substr:  "params must be an object or array",
		},
		{
			name:    "boolean params",
			in:      `{"jsonrpc":"2.0","method":"m","params":true}`,
			wantMsg: true,
			substr:  "params must be an object or array",
		},
		{
			name:    "request carrying a result",
			in:      `{"jsonrpc":"2.0","id":1,"method":"m","result":{}}`,
			wantMsg: true,
			id:      `1`,
			substr:  "cannot carry result or error",
		},
		{
			name:    "result and error both present",
			in:      `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`,
			wantMsg: true,
			id:      `1`,
			substr:  "both result and error",
		},
		{
			name:    "null result and error both present",
			in:      `{"jsonrpc":"2.0","id":1,"result":null,"error":{"code":1,"message":"x"}}`,
			wantMsg: true,
			id:      `1`,
			substr:  "both result and error",
		},
		{
			name:    "neither method, result nor error",
			in:      `{"jsonrpc":"2.0","id":1}`,
			wantMsg: true,
			id:      `1`,
			substr:  "neither method, result nor error",
		},
		{
			name:    "error that is not an object",
			in:      `{"jsonrpc":"2.0","id":1,"error":"boom"}`,
			wantMsg: true,
			id:      `1`,
			substr:  "error object",
		},
		{name: "boolean id", in: `{"jsonrpc":"2.0","id":true,"method":"m"}`, substr: "id must be"},
		{name: "object id", in: `{"jsonrpc":"2.0","id":{},"method":"m"}`, substr: "id must be"},
		{name: "array id", in: `{"jsonrpc":"2.0","id":[1],"method":"m"}`, substr: "id must be"},
		{name: "batch", in: `[{"jsonrpc":"2.0","id":1,"method":"m"}]`, substr: "batch"},
		{name: "empty batch", in: ` [] `, substr: "batch"},
		{name: "top-level string", in: `"hello"`, substr: "not a JSON object"},
		{name: "top-level number", in: `42`, substr: "not a JSON object"},
		{name: "top-level null", in: `null`, substr: "not a JSON object"},
		{name: "top-level true", in: `true`, substr: "not a JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := jsonrpc.Decode([]byte(tc.in))
			if err == nil {
				t.Fatalf("Decode succeeded: %s", m)
			}
			if !errors.Is(err, jsonrpc.ErrInvalidMessage) {
				t.Errorf("error %q does not wrap ErrInvalidMessage", err)
			}
			var se *json.SyntaxError
			if errors.As(err, &se) {
				t.Errorf("error %q is a syntax error; the input is valid JSON", err)
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("error %q does not contain %q", err, tc.substr)
			}
			if (m != nil) != tc.wantMsg {
				t.Fatalf("message = %v, want one: %v", m, tc.wantMsg)
			}
			if m != nil && m.ID.Raw() != tc.id {
				t.Errorf("ID.Raw() = %q, want %q", m.ID.Raw(), tc.id)
			}
		})
	}
}

func TestDecodeSyntaxError(t *testing.T) {
	for _, in := range []string{
		``,
		"  \r\n\t",
		`{`,
		`{"jsonrpc":"2.0",`,
		`{"jsonrpc":"2.0","id":1,"method":"m"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m"} x`,
		`{"jsonrpc":"2.0","id":01,"method":"m"}`,
		`{'jsonrpc':'2.0'}`,
		`hello`,
		`nul`,
		`[1,`,
		`[{"jsonrpc":"2.0","id":1,"method":"m"}`,
		"\u00a0{\"jsonrpc\":\"2.0\",\"method\":\"m\"}", // NBSP is not JSON whitespace
		"{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\u00a0",
	} {
		t.Run(fmt.Sprintf("%q", in), func(t *testing.T) {
			m, err := jsonrpc.Decode([]byte(in))
			if err == nil {
				t.Fatalf("Decode succeeded: %s", m)
			}
			var se *json.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %q (%T) is not a *json.SyntaxError", err, err)
			}
			if errors.Is(err, jsonrpc.ErrInvalidMessage) {
				t.Errorf("syntax error %q also wraps ErrInvalidMessage", err)
			}
			if err.Error() == "" {
				t.Errorf("syntax error has an empty message")
			}
			if m != nil {
				t.Errorf("message = %s, want nil", m)
			}
		})
	}
}

func ExampleDecode() {
	line := []byte(`{"jsonrpc":"2.0","id":"7","method":"tools/call","params":{"name":"a<b"}}`)
	msg, err := jsonrpc.Decode(line)
	if err != nil {
		fmt.Println("decode:", err)
		return
	}
	fmt.Println(msg.IsRequest(), msg.ID.Raw(), msg.Method, string(msg.Params))

	reply, err := jsonrpc.NewResult(msg.ID, nil).Encode()
	if err != nil {
		fmt.Println("encode:", err)
		return
	}
	fmt.Println(string(reply))
	// Output:
	// true "7" tools/call {"name":"a<b"}
	// {"jsonrpc":"2.0","id":"7","result":{}}
}
