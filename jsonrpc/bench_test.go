package jsonrpc_test

import (
	"encoding/json"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// toolsCall is a realistic tools/call request of about 300 bytes.
const toolsCall = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"github__search_issues",` +
	`"arguments":{"owner":"modelcontextprotocol","repo":"go-sdk","query":"is:open label:bug transport stdio",` +
	`"per_page":20,"sort":"updated","order":"desc"},` +
	`"_meta":{"progressToken":"c1f3a6e2-7b0d-4e57-9a0c-2f8e1d4b6a90"}}}`

// toolResult is a realistic tools/call result of about 500 bytes.
const toolResult = `{"content":[{"type":"text","text":"Found 3 open issues:\n#412 stdio transport drops the ` +
	`last line when the server exits (updated 2h ago)\n#398 Close hangs if the child ignores SIGTERM ` +
	`(updated 1d ago)\n#377 <progress> notifications arrive after the result & are dropped (updated 3d ago)"}],` +
	`"structuredContent":{"total_count":3,"items":[{"number":412,"state":"open","comments":4},` +
	`{"number":398,"state":"open","comments":1},{"number":377,"state":"open","comments":7}]},"isError":false}`

func TestBenchmarkInputs(t *testing.T) {
	if n := len(toolsCall); n < 270 || n > 330 {
		t.Errorf("tools/call request is %d bytes, want about 300", n)
	}
	if n := len(toolResult); n < 450 || n > 550 {
		t.Errorf("result is %d bytes, want about 500", n)
	}
	for _, s := range []string{toolsCall, toolResult} {
		if !json.Valid([]byte(s)) {
			t.Errorf("invalid JSON: %s", s)
		}
	}
	if m, err := jsonrpc.Decode([]byte(toolsCall)); err != nil || !m.IsRequest() {
		t.Errorf("Decode = %v, %v", m, err)
	}
}

func BenchmarkDecodeToolsCall(b *testing.B) {
	data := []byte(toolsCall)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		m, err := jsonrpc.Decode(data)
		if err != nil || m.Method != "tools/call" {
			b.Fatalf("Decode = %v, %v", m, err)
		}
	}
}

func BenchmarkEncodeResponse(b *testing.B) {
	m := jsonrpc.NewResult(jsonrpc.IntID(42), json.RawMessage(toolResult))
	b.ReportAllocs()
	b.SetBytes(int64(len(toolResult)))
	for b.Loop() {
		if _, err := m.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}
