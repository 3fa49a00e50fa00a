package h1client

import "testing"

// BenchmarkParseHead is the fast path's reading of one response head alone, with and
// without its fields, as a Go server sends it (canonical names) and as a Node one does
// (lower-case names).
func BenchmarkParseHead(b *testing.B) {
	for _, tc := range []struct{ name, head string }{
		{"canonical", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: 0123456789abcdef\r\n" +
			"Date: Thu, 03 Dec 2026 22:00:00 GMT\r\nContent-Length: 99\r\n\r\n"},
		{"lower", "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n" +
			"mcp-session-id: 0123456789abcdef\r\nconnection: keep-alive\r\nkeep-alive: timeout=5\r\n" +
			"date: Thu, 03 Dec 2026 22:00:00 GMT\r\ntransfer-encoding: chunked\r\n\r\n"},
	} {
		for _, fields := range []bool{true, false} {
			name := tc.name + "/framing"
			if fields {
				name = tc.name + "/fields"
			}
			b.Run(name, func(b *testing.B) {
				head := []byte(tc.head)
				b.ReportAllocs()
				for b.Loop() {
					if _, ok := parseHead(head, fields); !ok {
						b.Fatal("refused")
					}
				}
			})
		}
	}
}
