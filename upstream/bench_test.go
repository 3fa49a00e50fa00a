package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// BenchmarkHTTPCall is one tools/call to a Streamable HTTP upstream over loopback TCP,
// from Upstream.Send to its done: the upstream leg of the proxy's HTTP → HTTP and
// stdio → HTTP paths (pending table, link, lean HTTP/1.1 client), without the front end
// and the router. The server is minimal and allocates nothing per request, so allocs/op
// are the proxy's own.
//
//   - inline: the caller lets the exchange run on its goroutine (AllowInline), as the
//     HTTP front end's handler and the stdio front end's reader do;
//   - async: the exchange runs on a goroutine of its own and done is waited for, as for
//     a call nobody waits for inline;
//   - parallel: inline calls from GOMAXPROCS×16 goroutines at once (contention: the pool,
//     the pending table, the link's context).
func BenchmarkHTTPCall(b *testing.B) {
	url := startBenchHTTPServer(b)
	u := New(Spec{Name: "bench", URL: url, Transport: TransportStreamableHTTP, Timeout: time.Minute}, zerolog.Nop(), nopEvents{})
	defer u.Close()
	u.Start(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := u.WaitFirstAttempt(ctx); err != nil {
		b.Fatal(err)
	}
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hello"}}`)
	check := func(m *jsonrpc.Message, err error) {
		if err != nil || m == nil || !bytes.Contains(m.Result, []byte(`"ok"`)) {
			b.Errorf("answer %+v, error %v", m, err)
		}
	}
	b.Run("inline", func(b *testing.B) {
		var ic InlineContext
		req := &Request{Method: mcp.MethodToolsCall}
		b.ReportAllocs()
		for b.Loop() {
			*req = Request{Method: mcp.MethodToolsCall, Params: params}
			answered := false
			u.Send(ic.Init(context.Background(), nil), req, func(m *jsonrpc.Message, err error) { check(m, err); answered = true })
			if !answered {
				b.Fatal("Send returned before done ran")
			}
		}
	})
	b.Run("async", func(b *testing.B) {
		ch := make(chan struct{}, 1)
		done := func(m *jsonrpc.Message, err error) { check(m, err); ch <- struct{}{} }
		b.ReportAllocs()
		for b.Loop() {
			u.Send(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: params}, done)
			<-ch
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			var ic InlineContext
			req := &Request{}
			for pb.Next() {
				*req = Request{Method: mcp.MethodToolsCall, Params: params}
				u.Send(ic.Init(context.Background(), nil), req, check)
			}
		})
	})
}

// startBenchHTTPServer serves a minimal MCP server over HTTP/1.1 keep-alive on loopback
// until the benchmark ends: initialize, notifications (202) and tools/call (a fixed
// result with the request's id), read and written with reused buffers.
func startBenchHTTPServer(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	b.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	var mu sync.Mutex // guards conns
	conns := map[net.Conn]bool{}
	b.Cleanup(func() {
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				serveBenchConn(c)
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/mcp"
}

func serveBenchConn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 8192)
	body := make([]byte, 0, 4096)
	out := make([]byte, 0, 4096)
	answer := make([]byte, 0, 1024)
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
			if len(line) > 15 && bytes.EqualFold(line[:15], []byte("content-length:")) {
				length, _ = strconv.Atoi(string(bytes.TrimSpace(line[15:])))
			}
		}
		body = body[:length]
		if _, err := readFull(br, body); err != nil {
			return
		}
		answer = answer[:0]
		id := rawField(body, `"id":`)
		switch {
		case id == nil: // a notification
		case bytes.Contains(body, []byte(`"method":"initialize"`)):
			answer = append(answer, `{"jsonrpc":"2.0","id":`...)
			answer = append(answer, id...)
			answer = append(answer, `,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"bench","version":"1"}}}`...)
		case bytes.Contains(body, []byte(`"method":"tools/list"`)):
			answer = append(answer, `{"jsonrpc":"2.0","id":`...)
			answer = append(answer, id...)
			answer = append(answer, `,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}`...)
		default:
			answer = append(answer, `{"jsonrpc":"2.0","id":`...)
			answer = append(answer, id...)
			answer = append(answer, `,"result":{"content":[{"type":"text","text":"ok"}]}}`...)
		}
		out = out[:0]
		if len(answer) == 0 {
			out = append(out, "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"...)
		} else {
			out = append(out, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: bench-session\r\nDate: Thu, 03 Dec 2026 10:00:00 GMT\r\nContent-Length: "...)
			out = strconv.AppendInt(out, int64(len(answer)), 10)
			out = append(out, "\r\n\r\n"...)
			out = append(out, answer...)
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func readFull(br *bufio.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := br.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// rawField returns the raw number or string after key in a one-line JSON object, nil
// when key is absent.
func rawField(body []byte, key string) []byte {
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return nil
	}
	v := body[i+len(key):]
	end := bytes.IndexAny(v, ",}")
	if end < 0 {
		return nil
	}
	return v[:end]
}
