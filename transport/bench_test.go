package transport

import (
	"bufio"
	"bytes"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// BenchmarkHTTPLinkExchange is one tools/call exchange of an HTTP link with an upstream
// over loopback TCP (a minimal server that answers every POST with the same JSON
// response), from Exchange to the answer handed to its callback: what the proxy spends
// per call on the HTTP upstream leg. Allocations are the link's and the server's (the
// server's are few and the same in every version).
func BenchmarkHTTPLinkExchange(b *testing.B) {
	answer := []byte(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"hello"}]}}`)
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Thu, 03 Dec 2026 10:00:00 GMT\r\nContent-Length: " +
		strconv.Itoa(len(answer)) + "\r\n\r\n" + string(answer))
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
			go answerEveryRequest(c, resp)
		}
	}()
	l := DialHTTP(HTTPSpec{URL: "http://" + ln.Addr().String() + "/mcp", Headers: map[string]string{"x-api-key": "k"}})
	defer l.Stop(time.Second)
	l.SetProtocolVersion("2025-06-18")
	m := jsonrpc.NewRequest(jsonrpc.IntID(2), "tools/call", []byte(`{"name":"echo","arguments":{"text":"hello"}}`))
	got := make(chan []byte, 1)
	onMessage := func(line []byte) { got <- line }
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Exchange(m, nil, onMessage, nil); err != nil {
			b.Fatal(err)
		}
		if line := <-got; !bytes.Equal(line, answer) {
			b.Fatalf("answer %s", line)
		}
	}
}

// answerEveryRequest answers every request on c with resp: it reads the head up to the
// blank line and the body of its Content-Length.
func answerEveryRequest(c net.Conn, resp []byte) {
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
