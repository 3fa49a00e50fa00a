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

func TestEncode(t *testing.T) {
	pretty := json.RawMessage("{\n  \"name\": \"search\",\r\n  \"arguments\": {\n    \"q\": \"a b\\nc\"\n  }\n}")
	tests := []struct {
		name string
		msg  *jsonrpc.Message
		want string
	}{
		{
			name: "no HTML escaping",
			msg:  jsonrpc.NewRequest(jsonrpc.IntID(1), "a<b>&c", json.RawMessage(`{"q":"<script>&amp;</script>"}`)),
			want: `{"jsonrpc":"2.0","id":1,"method":"a<b>&c","params":{"q":"<script>&amp;</script>"}}`,
		},
		{
			name: "pretty params compacted",
			msg:  jsonrpc.NewRequest(jsonrpc.StringID("x"), "tools/call", pretty),
			want: `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"search","arguments":{"q":"a b\nc"}}}`,
		},
		{
			name: "pretty result compacted",
			msg:  jsonrpc.NewResult(jsonrpc.IntID(2), pretty),
			want: `{"jsonrpc":"2.0","id":2,"result":{"name":"search","arguments":{"q":"a b\nc"}}}`,
		},
		{
			name: "pretty error data compacted",
			msg:  jsonrpc.NewErrorResponse(jsonrpc.IntID(3), &jsonrpc.Error{Code: 1, Message: "m", Data: pretty}),
			want: `{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m","data":{"name":"search","arguments":{"q":"a b\nc"}}}}`,
		},
		{
			name: "error data passthrough",
			msg: jsonrpc.NewErrorResponse(jsonrpc.StringID("e"),
				&jsonrpc.Error{Code: -32000, Message: "a<b", Data: json.RawMessage(`{"n":1.0,"s":"<&>","l":[ 1, 2 ]}`)}),
			want: `{"jsonrpc":"2.0","id":"e","error":{"code":-32000,"message":"a<b","data":{"n":1.0,"s":"<&>","l":[ 1, 2 ]}}}`,
		},
		{
			name: "error response with absent id",
			msg:  jsonrpc.NewErrorResponse(jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeParseError, "Parse error: %s", "x")),
			want: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: x"}}`,
		},
		{
			name: "nil result",
			msg:  jsonrpc.NewResult(jsonrpc.IntID(4), nil),
			want: `{"jsonrpc":"2.0","id":4,"result":{}}`,
		},
		{
			name: "zero message result",
			msg:  &jsonrpc.Message{ID: jsonrpc.IntID(5)},
			want: `{"jsonrpc":"2.0","id":5,"result":{}}`,
		},
		{
			name: "notification",
			msg:  jsonrpc.NewNotification("notifications/tools/list_changed", nil),
			want: `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		},
		{
			name: "string escapes",
			msg:  jsonrpc.NewRequest(jsonrpc.StringID("q\"\\\x01"), "m\t\u2028\xff", nil),
			want: `{"jsonrpc":"2.0","id":"q\"\\\u0001","method":"m\t\u2028\ufffd"}`,
		},
		{
			name: "error message escapes",
			msg:  jsonrpc.NewErrorResponse(jsonrpc.IntID(6), &jsonrpc.Error{Code: -1, Message: "line1\nline2 <&>"}),
			want: `{"jsonrpc":"2.0","id":6,"error":{"code":-1,"message":"line1\nline2 <&>"}}`,
		},
		{
			name: "WithData",
			msg: jsonrpc.NewErrorResponse(jsonrpc.IntID(7),
				jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "bad %s", "arg").WithData(map[string]int{"at": 3})),
			want: `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"bad arg","data":{"at":3}}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.msg.Encode()
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if string(got) != tc.want {
				t.Errorf("Encode =\n  %s\nwant\n  %s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Errorf("invalid JSON: %s", got)
			}
			if bytes.ContainsAny(got, "\r\n") {
				t.Errorf("encoding spans lines: %q", got)
			}
			if s := tc.msg.String(); s != tc.want {
				t.Errorf("String() = %s", s)
			}
			prefix := []byte("prefix:")
			app, err := tc.msg.Append(prefix)
			if err != nil || string(app) != "prefix:"+tc.want {
				t.Errorf("Append = %q, %v", app, err)
			}
		})
	}
}

func TestEncodeBadRaw(t *testing.T) {
	bad := json.RawMessage("{\n\"a\":")
	for name, m := range map[string]*jsonrpc.Message{
		"params": jsonrpc.NewRequest(jsonrpc.IntID(1), "m", bad),
		"result": jsonrpc.NewResult(jsonrpc.IntID(1), bad),
	} {
		t.Run(name, func(t *testing.T) {
			if b, err := m.Encode(); err == nil {
				t.Errorf("Encode succeeded: %s", b)
			}
			if s := m.String(); !strings.HasPrefix(s, "<unencodable message:") {
				t.Errorf("String() = %q", s)
			}
		})
	}
	t.Run("error data", func(t *testing.T) {
		m := jsonrpc.NewErrorResponse(jsonrpc.IntID(1), &jsonrpc.Error{Code: 1, Message: "m", Data: bad})
		b, err := m.Encode()
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		if want := `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":null}}`; string(b) != want {
			t.Errorf("Encode = %s, want %s", b, want)
		}
	})
}

func TestErrorType(t *testing.T) {
	var err error = jsonrpc.Errorf(jsonrpc.CodeInternalError, "oops %d", 1)
	var rpcErr *jsonrpc.Error
	if !errors.As(fmt.Errorf("wrapped: %w", err), &rpcErr) {
		t.Fatal("errors.As did not find *jsonrpc.Error")
	}
	if rpcErr.Code != jsonrpc.CodeInternalError || rpcErr.Message != "oops 1" {
		t.Errorf("got %+v", rpcErr)
	}
	if got, want := err.Error(), "jsonrpc error -32603: oops 1"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	base := jsonrpc.Errorf(1, "m")
	withData := base.WithData([]int{1})
	if base.Data != nil {
		t.Errorf("WithData modified the receiver")
	}
	if string(withData.Data) != `[1]` {
		t.Errorf("Data = %s", withData.Data)
	}
	if d := base.WithData(func() {}).Data; d != nil {
		t.Errorf("unmarshallable data gave %s, want none", d)
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "<&>", "q\"b\\", "\x00\x1f\x7f", "é😀", "\u2028\u2029", "bad\xffutf8"} {
		got := jsonrpc.AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("AppendString(%q) = %s: invalid: %v", s, got, err)
			continue
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if back != want {
			t.Errorf("AppendString(%q) decodes to %q, want %q", s, back, want)
		}
		if bytes.ContainsAny(got, "\n\r") || bytes.Contains(got, []byte("\u2028")) || bytes.Contains(got, []byte("\u2029")) {
			t.Errorf("AppendString(%q) = %q holds a line break", s, got)
		}
	}
}
