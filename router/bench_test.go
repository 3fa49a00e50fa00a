package router

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// BenchmarkHotPath measures the proxy's own work for one tools/call: decode the client's
// line, route by exposed name, rewrite the name, encode the upstream request, decode the
// upstream's response, and encode the response with the client's id. Pipes, syscalls and
// goroutine hand-offs are measured end to end by the load tool (make load).
func BenchmarkHotPath(b *testing.B) {
	var tools []string
	for i := 0; i < 200; i++ {
		tools = append(tools, "tool_"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	up := newFake("github", tools...)
	r := newTestRouter(b, Options{}, nsUp{up, "github"})
	line := []byte(`{"jsonrpc":"2.0","id":"req-12345","method":"tools/call","params":{"name":"github__tool_ab","arguments":{"owner":"modelcontextprotocol","repo":"go-sdk","title":"A bug report","body":"Steps to reproduce: run the proxy, call a tool, observe the result."},"_meta":{"progressToken":"abc"}}}`)
	var out []byte
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		msg, err := jsonrpc.Decode(line)
		if err != nil {
			b.Fatal(err)
		}
		r.Dispatch(ctx, &Request{Method: msg.Method, Params: msg.Params}, func(res json.RawMessage, err error) {
			if err != nil {
				b.Fatal(err)
			}
			out, err = jsonrpc.NewResult(msg.ID, res).Append(out[:0])
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
