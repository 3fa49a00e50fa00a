package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawHTTP writes raw bytes on a connection of its own and reads HTTP answers from it.
type rawHTTP struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawHTTP {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(60 * time.Second))
	return &rawHTTP{t: t, c: c, br: bufio.NewReader(c)}
}

func (r *rawHTTP) send(raw string) {
	r.t.Helper()
	if _, err := io.WriteString(r.c, raw); err != nil {
		r.t.Fatal(err)
	}
}

// read reads one final answer (skipping 100 Continue) and its body.
func (r *rawHTTP) read() (*http.Response, string) {
	r.t.Helper()
	for {
		resp, err := http.ReadResponse(r.br, nil)
		if err != nil {
			r.t.Fatalf("reading an answer: %v", err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			r.t.Fatal(err)
		}
		if resp.StatusCode != http.StatusContinue {
			return resp, string(b)
		}
	}
}

func postHead(host, sid string, n int, extra string) string {
	h := "POST /mcp HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
	if sid != "" {
		h += "Mcp-Session-Id: " + sid + "\r\nMCP-Protocol-Version: 2025-11-25\r\n"
	}
	if n >= 0 {
		h += fmt.Sprintf("Content-Length: %d\r\n", n)
	}
	return h + extra + "\r\n"
}

// TestHTTPConnections drives the front end's connection handling with raw bytes: what
// the lean HTTP/1.1 server reads (keep-alive, pipelined requests) and what it hands to
// net/http (a chunked body, Expect: 100-continue, HTTP/1.0, a malformed head) serve the
// same session alike, and a bad request harms no one else.
func TestHTTPConnections(t *testing.T) {
	t.Parallel()
	url, stderr := startHTTPProxy(t, testUpstream("t", "t", nil, ""))
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")

	// initialize with a chunked body: net/http reads it.
	a := dialRaw(t, addr)
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	a.send(postHead(addr, "", -1, "Transfer-Encoding: chunked\r\n") + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(init), init))
	resp, body := a.read()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" || !strings.Contains(body, `"protocolVersion"`) {
		t.Fatalf("chunked initialize: %d %q\n%s", resp.StatusCode, body, stderr)
	}

	// The same session on a plain keep-alive connection, two calls pipelined in one write.
	b := dialRaw(t, addr)
	notif := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	b.send(postHead(addr, sid, len(notif), "") + notif)
	if resp, body := b.read(); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d %q", resp.StatusCode, body)
	}
	call := func(id string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"t__echo","arguments":{"who":%q}}}`, id, id)
	}
	c1, c2 := call("p1"), call("p2")
	b.send(postHead(addr, sid, len(c1), "") + c1 + postHead(addr, sid, len(c2), "") + c2)
	for _, id := range []string{"p1", "p2"} {
		resp, body := b.read()
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":"`+id+`"`) || resp.Close {
			t.Fatalf("pipelined %s: %d close=%v %q", id, resp.StatusCode, resp.Close, body)
		}
	}

	// Expect: 100-continue, then HTTP/1.0: both net/http's, same session.
	c3 := call("e1")
	b2 := dialRaw(t, addr)
	b2.send(postHead(addr, sid, len(c3), "Expect: 100-continue\r\n"))
	first, err := http.ReadResponse(b2.br, nil)
	if err != nil || first.StatusCode != http.StatusContinue {
		t.Fatalf("Expect: 100-continue: %v %v", first, err)
	}
	b2.send(c3)
	if resp, body := b2.read(); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":"e1"`) {
		t.Fatalf("after 100 Continue: %d %q", resp.StatusCode, body)
	}
	c4 := call("old")
	b3 := dialRaw(t, addr)
	b3.send(strings.Replace(postHead(addr, sid, len(c4), ""), "HTTP/1.1", "HTTP/1.0", 1) + c4)
	if resp, body := b3.read(); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":"old"`) {
		t.Fatalf("HTTP/1.0: %d %q", resp.StatusCode, body)
	}

	// A malformed head gets net/http's 400; the pipelined connection still works.
	bad := dialRaw(t, addr)
	bad.send("POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}")
	if resp, _ := bad.read(); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("two Content-Lengths: %d, want 400", resp.StatusCode)
	}
	c5 := call("after")
	b.send(postHead(addr, sid, len(c5), "") + c5)
	if resp, body := b.read(); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":"after"`) {
		t.Fatalf("after a bad request elsewhere: %d %q", resp.StatusCode, body)
	}
}
