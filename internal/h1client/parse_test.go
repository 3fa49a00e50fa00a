package h1client

import (
	"bufio"
	"bytes"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/internal/httpsyntax"
)

// FuzzParseHead checks the fast path against net/http: whatever response head it
// accepts, http.ReadResponse reads the same way (status, every field, length, framing,
// close); anything else it must leave to net/http.
func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: abc\r\nContent-Length: 10\r\n\r\n",
		"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nKeep-Alive: timeout=5\r\n\r\n",
		"HTTP/1.1 202 Accepted\r\nDate: x\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 401\r\nWWW-Authenticate: Bearer resource_metadata=\"http://a/b\"\r\nConnection: close\r\n\r\n",
		"HTTP/1.1 404 Not Found\r\nX-Dup: a\r\nx-dup: b\r\nContent-Length: 3\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: \xff\xfe\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := httpsyntax.IndexHeadEnd(b)
		if n < 0 {
			return
		}
		b = b[:n]
		ours, ok := parseHead(b, true)
		lean, leanOK := parseHead(b, false)
		if leanOK != ok || lean.status != ours.status || lean.length != ours.length || lean.chunked != ours.chunked ||
			lean.close != ours.close || lean.idleFor != ours.idleFor || lean.header != nil {
			t.Fatalf("parseHead without fields differs on %q: %v %+v, with: %v %+v", b, leanOK, lean, ok, ours)
		}
		if !ok {
			return
		}
		req, _ := http.NewRequest(http.MethodPost, "http://a/mcp", nil)
		theirs, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), req)
		if err != nil {
			t.Fatalf("fast path accepted what net/http refuses (%v): %q", err, b)
		}
		if ours.status != theirs.StatusCode || ours.close != theirs.Close ||
			ours.chunked != slices.Equal(theirs.TransferEncoding, []string{"chunked"}) {
			t.Fatalf("differs from net/http on %q:\nours   %d close=%v chunked=%v\ntheirs %d close=%v te=%v", b,
				ours.status, ours.close, ours.chunked, theirs.StatusCode, theirs.Close, theirs.TransferEncoding)
		}
		if theirs.Status != itoa3(ours.status)+" "+ours.reason && !(ours.reason == "" && theirs.Status == itoa3(ours.status)) {
			t.Fatalf("status text differs on %q: ours %q theirs %q", b, ours.reason, theirs.Status)
		}
		// net/http reports no length for a chunked body, and none for bodiless statuses.
		if !ours.chunked && ours.status/100 != 1 && ours.status != 204 && ours.status != 304 && ours.length != theirs.ContentLength {
			t.Fatalf("length differs on %q: ours %d theirs %d", b, ours.length, theirs.ContentLength)
		}
		if !maps.EqualFunc(ours.header, theirs.Header, slices.Equal) {
			t.Fatalf("fields differ from net/http on %q:\nours   %v\ntheirs %v", b, ours.header, theirs.Header)
		}
	})
}

func itoa3(n int) string {
	return string([]byte{byte('0' + n/100), byte('0' + n/10%10), byte('0' + n%10)})
}

func TestParseHeadShapes(t *testing.T) {
	for _, tc := range []struct {
		head    string
		ok      bool
		status  int
		length  int64
		chunked bool
		close   bool
		idleFor int
	}{
		{"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", true, 200, 12, false, false, 0},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nKeep-Alive: timeout=5, max=100\r\n\r\n", true, 200, -1, true, false, 5},
		{"HTTP/1.1 204 No Content\r\nConnection: keep-alive, close\r\n\r\n", true, 204, -1, false, true, 0},
		{"HTTP/1.1 200 OK\r\n\r\n", true, 200, -1, false, true, 0},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", false, 0, 0, false, false, 0},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", false, 0, 0, false, false, 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", false, 0, 0, false, false, 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n", false, 0, 0, false, false, 0},
		{"HTTP/1.0 200 OK\r\n\r\n", false, 0, 0, false, false, 0},
		{"HTTP/1.1 200 OK\r\n folded\r\n\r\n", false, 0, 0, false, false, 0},
		{"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", false, 0, 0, false, false, 0},
		{"HTTP/1.1 2000 OK\r\n\r\n", false, 0, 0, false, false, 0},
	} {
		h, ok := parseHead([]byte(tc.head), true)
		if ok != tc.ok {
			t.Errorf("%q: accepted %v, want %v", tc.head, ok, tc.ok)
			continue
		}
		if ok && (h.status != tc.status || h.length != tc.length || h.chunked != tc.chunked || h.close != tc.close || h.idleFor != tc.idleFor) {
			t.Errorf("%q: got %+v", tc.head, h)
		}
	}
}
