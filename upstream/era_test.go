package upstream

import (
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"
)

func TestAdapt(t *testing.T) {
	u := New(Spec{Name: "u", ClientName: "mcp-proxy", ClientVersion: "1",
		ClientCapabilities: json.RawMessage(`{"roots":{}}`)}, zerolog.Nop(), nil)
	legacy := &conn{u: u}
	modern := &conn{u: u, version: "2026-07-28"}
	modern.modern.Store(true)
	sink := func(json.RawMessage) {}
	tests := []struct {
		name   string
		c      *conn
		req    *Request
		want   string
		wantOK bool // a progress token was mapped
	}{
		{"legacy, nothing to do", legacy, &Request{Params: json.RawMessage(`{"name":"x","arguments":{}}`)},
			`{"name":"x","arguments":{}}`, false},
		{"legacy, token mapped", legacy, &Request{Params: json.RawMessage(`{"name":"x","_meta":{"progressToken":"t","k":1}}`), Progress: sink},
			`{"name":"x","_meta":{"progressToken":42,"k":1}}`, true},
		{"legacy, token without a sink is dropped", legacy, &Request{Params: json.RawMessage(`{"_meta":{"progressToken":"t"}}`)},
			`{}`, false},
		{"legacy, modern keys and retry fields removed", legacy, &Request{Params: json.RawMessage(
			`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"traceparent":"00-1"},"requestState":"s","inputResponses":{}}`)},
			`{"name":"x","_meta":{"traceparent":"00-1"}}`, false},
		{"modern, stamped from the spec", modern, &Request{Params: json.RawMessage(`{"name":"x"}`)},
			`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}},"io.modelcontextprotocol/clientInfo":{"name":"mcp-proxy","version":"1"}}}`, false},
		{"modern, the client's identity and level win, retry fields kept", modern, &Request{
			Params: json.RawMessage(`{"name":"x","requestState":"s","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":5}}`),
			Meta:   &ClientMeta{Capabilities: json.RawMessage(`{"sampling":{}}`), Info: json.RawMessage(`{"name":"ide"}`), LogLevel: "debug"}, Progress: sink},
			`{"name":"x","requestState":"s","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":42,"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"ide"},"io.modelcontextprotocol/logLevel":"debug"}}`, true},
	}
	for _, tt := range tests {
		got, tok, err := tt.c.adapt(tt.req, 42)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
		if (tok != nil) != tt.wantOK {
			t.Errorf("%s: mapped token %s", tt.name, tok)
		}
	}
	if _, _, err := legacy.adapt(&Request{Params: json.RawMessage(`{"_meta":7}`)}, 1); err == nil {
		t.Errorf("a non-object _meta was accepted")
	}
}

func TestHeadID(t *testing.T) {
	for head, want := range map[string]string{
		`{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"xxxx`: "17",
		`{"id":"s","jsonrpc":"2.0","res`:                                            `"s"`,
		`{"result":{"a":1},"id":9,`:                                                 "9",
		`{"jsonrpc":"2.0","resu`:                                                    "",
	} {
		got, ok := headID([]byte(head))
		if got != want || ok != (want != "") {
			t.Errorf("headID(%q) = %q, %v; want %q", head, got, ok, want)
		}
	}
}
