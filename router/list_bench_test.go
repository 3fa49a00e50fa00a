package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// listShape builds a router over ups upstreams of n tools each, every tool with a
// description and a small input schema (about 300 bytes, as real servers list).
func listShape(b *testing.B, ups, n int) *Router {
	var list []nsUp
	for u := range ups {
		f := newFake(fmt.Sprintf("up%02d", u))
		for i := range n {
			f.cat.Tools = append(f.cat.Tools, json.RawMessage(fmt.Sprintf(
				`{"name":"tool_%03d","description":"Does thing %d of this server: reads the input, acts on it and returns what happened.","inputSchema":{"type":"object","properties":{"path":{"type":"string","description":"where"},"count":{"type":"integer","minimum":1}},"required":["path"]}}`, i, i)))
		}
		list = append(list, nsUp{f, f.name})
	}
	return newTestRouter(b, Options{}, list...)
}

// BenchmarkToolsList measures serving tools/list from the merged catalogue, encoded as
// the client receives it (the JSON-RPC response line): the first page, and a walk of
// every page, over one upstream of 50 tools and over 20 upstreams of 50 (page size 100,
// so the first page there holds twice the tools).
func BenchmarkToolsList(b *testing.B) {
	for _, shape := range []struct{ ups, tools int }{{1, 50}, {20, 50}} {
		r := listShape(b, shape.ups, shape.tools)
		ctx := context.Background()
		id := jsonrpc.IntID(7)
		b.Run(fmt.Sprintf("first_page/%dx%d", shape.ups, shape.tools), func(b *testing.B) {
			var out []byte
			b.ReportAllocs()
			for b.Loop() {
				r.Dispatch(ctx, &Request{Method: mcp.MethodToolsList}, func(res json.RawMessage, err error) {
					if err != nil {
						b.Fatal(err)
					}
					out, _ = jsonrpc.NewResult(id, res).Append(out[:0])
				})
			}
			b.SetBytes(int64(len(out)))
		})
		b.Run(fmt.Sprintf("walk/%dx%d", shape.ups, shape.tools), func(b *testing.B) {
			var out []byte
			b.ReportAllocs()
			for b.Loop() {
				var params json.RawMessage
				for {
					var next string
					r.Dispatch(ctx, &Request{Method: mcp.MethodToolsList, Params: params}, func(res json.RawMessage, err error) {
						if err != nil {
							b.Fatal(err)
						}
						out, _ = jsonrpc.NewResult(id, res).Append(out[:0])
						next = nextCursorOf(res)
					})
					if next == "" {
						break
					}
					params = json.RawMessage(`{"cursor":` + string(jsonrpc.AppendString(nil, next)) + `}`)
				}
			}
		})
	}
}

// nextCursorOf finds a legacy page's nextCursor, which the router writes last,
// without scanning the items as a JSON decoder would (the client's cost, not the proxy's).
func nextCursorOf(page []byte) string {
	page = page[max(0, len(page)-64):] // the cursor is 20 characters, at the end
	i := bytes.LastIndex(page, []byte(`,"nextCursor":"`))
	if i < 0 {
		return ""
	}
	rest := page[i+len(`,"nextCursor":"`):]
	return string(rest[:bytes.IndexByte(rest, '"')])
}
