package jsonrpc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// A request or notification with two members of one name anywhere is refused: in params
// with -32602, in the envelope with -32600. Responses are not checked (they are the
// upstream's answer, which the proxy forwards rather than decides on).
func TestDecodeRefusesDuplicateMembers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		code int64
		want string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs__read","arguments":{"path":"/srv/data/ok","path":"/etc/passwd"}}}`,
			jsonrpc.CodeInvalidParams, `duplicate member "path" in params.arguments`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs__read","arguments":{"path":"/srv/data/ok","p\u0061th":"/etc/passwd"}}}`,
			jsonrpc.CodeInvalidParams, `duplicate member "path" in params.arguments`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{},"Arguments":{"x":1}}}`,
			jsonrpc.CodeInvalidParams, `duplicate member "Arguments" in params`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list"}`,
			jsonrpc.CodeInvalidRequest, `duplicate member "method" in the top-level object`},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestId":2}}`,
			jsonrpc.CodeInvalidParams, `duplicate member "requestId" in params`},
	} {
		m, err := jsonrpc.Decode([]byte(tc.in))
		if !errors.Is(err, jsonrpc.ErrDuplicateMember) {
			t.Fatalf("Decode(%s) = %v; want ErrDuplicateMember", tc.in, err)
		}
		if m == nil || (strings.Contains(tc.in, `"id":1`) && m.ID.Raw() != "1") {
			t.Fatalf("Decode(%s): the id must be kept to answer: %+v", tc.in, m)
		}
		je := jsonrpc.DecodeError(err)
		if je.Code != tc.code || !strings.Contains(je.Message, tc.want) {
			t.Errorf("DecodeError for %s = %d %q; want %d containing %q", tc.in, je.Code, je.Message, tc.code, tc.want)
		}
	}
	// A response may repeat names in its result: it is forwarded, not decided on.
	if _, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":1,"result":{"a":1,"a":2}}`)); err != nil {
		t.Fatalf("response with a repeated result member: %v", err)
	}
}

func TestDecodeErrorCodes(t *testing.T) {
	_, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":1,`))
	if je := jsonrpc.DecodeError(err); je.Code != jsonrpc.CodeParseError {
		t.Errorf("truncated JSON: %d %q", je.Code, je.Message)
	}
	_, err = jsonrpc.Decode([]byte(`{"jsonrpc":"1.0","id":1,"method":"x"}`))
	if je := jsonrpc.DecodeError(err); je.Code != jsonrpc.CodeInvalidRequest {
		t.Errorf("wrong version: %d %q", je.Code, je.Message)
	}
}
