package h1client

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkRoundTrip is one keep-alive POST of a tools/call and its JSON answer over
// loopback TCP, sent by this client and by net/http's Transport in the same run, to the
// same minimal server (compare the lines; allocs are the client's and the server's
// together, the server's are the same in all). h1client-send is the same request
// written by hand and sent with Send, as the proxy's HTTP link does.
func BenchmarkRoundTrip(b *testing.B) {
	answer := []byte(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"ok"}]}}`)
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: 0123456789abcdef\r\nDate: Thu, 03 Dec 2026 10:00:00 GMT\r\nContent-Length: " +
		strconv.Itoa(len(answer)) + "\r\n\r\n" + string(answer))
	body := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveFixed(c, resp)
		}
	}()
	url := "http://" + ln.Addr().String() + "/mcp"
	clients := map[string]http.RoundTripper{
		"h1client": &Transport{Fallback: http.DefaultTransport},
		"net-http": &http.Transport{MaxIdleConnsPerHost: 16},
	}
	b.Run("h1client-send", func(b *testing.B) {
		// The same request written by hand (what the proxy's link does) and sent with
		// Send; the answer's fields read in place.
		tr := &Transport{Fallback: http.DefaultTransport}
		host := strings.TrimPrefix(url, "http://")
		host = host[:strings.IndexByte(host, '/')]
		prefix := []byte("POST /mcp HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nUser-Agent: Go-http-client/1.1\r\n")
		wire := make([]byte, 0, 1024)
		b.ReportAllocs()
		for b.Loop() {
			w := append(wire[:0], prefix...)
			w, _ = AppendField(w, "Mcp-Session-Id", "0123456789abcdef")
			w, _ = AppendField(w, "Mcp-Protocol-Version", "2025-06-18")
			w, _ = AppendField(w, "Mcp-Method", "tools/call")
			w, _ = AppendField(w, "Mcp-Name", "echo")
			w = append(w, "Content-Length: "...)
			w = strconv.AppendInt(w, int64(len(body)), 10)
			w = append(append(w, "\r\n\r\n"...), body...)
			r, err := tr.Send(HostPort(host), http.MethodPost, w, nil)
			if err != nil {
				b.Fatal(err)
			}
			if len(r.Field("Mcp-Session-Id")) == 0 {
				b.Fatal("no session")
			}
			got := make([]byte, r.ContentLength)
			if _, err := io.ReadFull(r.Body, got); err != nil {
				b.Fatal(err)
			}
			r.Body.Close()
		}
		tr.CloseIdleConnections()
	})
	for _, name := range []string{"h1client", "net-http"} {
		b.Run(name, func(b *testing.B) {
			rt := clients[name]
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b.ReportAllocs()
			for b.Loop() {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				req.Header["Content-Type"] = []string{"application/json"}
				req.Header["Accept"] = []string{"application/json, text/event-stream"}
				req.Header["Mcp-Session-Id"] = []string{"0123456789abcdef"}
				req.Header["Mcp-Protocol-Version"] = []string{"2025-06-18"}
				req.Header["Mcp-Method"] = []string{"tools/call"}
				req.Header["Mcp-Name"] = []string{"echo"}
				r, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				got := make([]byte, r.ContentLength)
				if _, err := io.ReadFull(r.Body, got); err != nil {
					b.Fatal(err)
				}
				r.Body.Close()
			}
			rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
		})
	}
}

// serveFixed answers every request on c with resp: it reads the head up to the blank
// line and the body of its Content-Length.
func serveFixed(c net.Conn, resp []byte) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		length := 0
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 {
				break
			}
			if v, ok := bytes.CutPrefix(bytes.ToLower(line), []byte("content-length:")); ok {
				length, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
			}
		}
		if _, err := br.Discard(length); err != nil {
			return
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}
