package h1

import "testing"

// BenchmarkParse is the fast path's reading of one request head alone: as a Go client
// sends it (canonical names; traced: with names outside the common list) and as a Node
// client does (lower-case names).
func BenchmarkParse(b *testing.B) {
	for _, tc := range []struct{ name, head string }{
		{"canonical", "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\n" +
			"Content-Length: 99\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\n" +
			"Mcp-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: 0123456789abcdef0123456789abcdef\r\nAccept-Encoding: gzip\r\n\r\n"},
		{"traced", "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\n" +
			"Content-Length: 99\r\nContent-Type: application/json\r\nMcp-Session-Id: 0123456789abcdef\r\n" +
			"Traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nTracestate: a=b\r\nX-Request-Id: 42\r\n\r\n"},
		{"lower", "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:8080\r\nconnection: keep-alive\r\ncontent-type: application/json\r\n" +
			"accept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-06-18\r\n" +
			"mcp-session-id: 0123456789abcdef0123456789abcdef\r\nuser-agent: node\r\naccept-language: *\r\n" +
			"sec-fetch-mode: cors\r\naccept-encoding: gzip, deflate\r\ncontent-length: 99\r\n\r\n"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			head := []byte(tc.head)
			c := &conn{remote: "r"}
			b.ReportAllocs()
			for b.Loop() {
				if c.parse(head) == nil {
					b.Fatal("refused")
				}
			}
		})
	}
}
