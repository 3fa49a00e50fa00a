package h1

import (
	"bufio"
	"bytes"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/internal/httpsyntax"
)

// FuzzParse checks the fast path against net/http: whatever head it accepts, net/http
// reads the same way (method, target, host, every field, length, close); anything else
// it must leave to net/http.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: abc\r\nContent-Length: 10\r\n\r\n",
		"GET /sse?sessionId=x%20y HTTP/1.1\r\nhost: localhost\r\nLast-Event-ID: 3-4\r\nConnection: keep-alive, close\r\n\r\n",
		"DELETE /mcp HTTP/1.1\r\nHost: [::1]:80\r\nX-Dup: a\r\nx-dup: b\r\n\r\n",
		"POST /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET /a?b#c HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: a\r\nX: \xff\xfe\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		n := httpsyntax.IndexHeadEnd(head)
		if n < 0 {
			return
		}
		head = head[:n]
		c := &conn{remote: "r"}
		ours := c.parse(head)
		if ours == nil {
			return
		}
		theirs, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("fast path accepted what net/http refuses (%v): %q", err, head)
		}
		if ours.Method != theirs.Method || ours.URL.String() != theirs.URL.String() || ours.URL.Path != theirs.URL.Path ||
			ours.URL.RawQuery != theirs.URL.RawQuery || ours.Host != theirs.Host || ours.RequestURI != theirs.RequestURI ||
			ours.ContentLength != theirs.ContentLength || ours.Close != theirs.Close || ours.Proto != theirs.Proto {
			t.Fatalf("differs from net/http on %q:\nours   %s %v %q %d close=%v\ntheirs %s %v %q %d close=%v", head,
				ours.Method, ours.URL, ours.Host, ours.ContentLength, ours.Close,
				theirs.Method, theirs.URL, theirs.Host, theirs.ContentLength, theirs.Close)
		}
		if !maps.EqualFunc(ours.Header, theirs.Header, slices.Equal) {
			t.Fatalf("fields differ from net/http on %q:\nours   %v\ntheirs %v", head, ours.Header, theirs.Header)
		}
	})
}

// TestParseTargetSharesPath: a connection's repeated plain path reuses one string, and a
// different target gets its own, so each request still reads its own path and query.
func TestParseTargetSharesPath(t *testing.T) {
	var last string
	for _, tc := range []struct{ target, path, query string }{
		{"/mcp", "/mcp", ""}, {"/mcp", "/mcp", ""}, {"/other", "/other", ""},
		{"/mcp?x=1", "/mcp", "x=1"}, {"/mcp", "/mcp", ""}, {"/a%20b", "/a b", ""},
	} {
		u := parseTarget([]byte(tc.target), &last)
		if u == nil || u.Path != tc.path || u.RawQuery != tc.query {
			t.Fatalf("parseTarget(%q) = %+v, want path %q query %q", tc.target, u, tc.path, tc.query)
		}
	}
	if n := testing.AllocsPerRun(100, func() { parseTarget([]byte("/mcp"), &last) }); n != 1 {
		t.Errorf("a repeated path: %.0f allocations, want 1 (the URL)", n)
	}
}
