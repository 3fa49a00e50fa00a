package h1

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
)

// BenchmarkRoundTrip is one keep-alive POST and its JSON answer over loopback TCP, served
// by h1 and by net/http in the same run (compare the two lines; allocs are the server's
// and the client's together).
func BenchmarkRoundTrip(b *testing.B) {
	answer := []byte(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"ok"}]}}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = []string{"application/json"}
		w.Header()["Content-Length"] = []string{strconv.Itoa(len(answer))}
		w.Write(answer)
		w.(http.Flusher).Flush()
	})
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
	req := "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\nAccept: application/json, text/event-stream\r\n" +
		"Content-Type: application/json\r\nMcp-Protocol-Version: 2025-06-18\r\n" +
		"Mcp-Session-Id: 0123456789abcdef0123456789abcdef\r\nAccept-Encoding: gzip\r\n\r\n" + body
	for _, name := range []string{"h1", "net-http"} {
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			var closeServer func()
			if name == "h1" {
				s := &Server{Handler: h}
				go s.Serve(ln)
				closeServer = func() { s.Close() }
			} else {
				s := &http.Server{Handler: h}
				go s.Serve(ln)
				closeServer = func() { s.Close() }
			}
			defer closeServer()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := io.WriteString(c, req); err != nil {
					b.Fatal(err)
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
