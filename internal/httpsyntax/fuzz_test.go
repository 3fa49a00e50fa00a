package httpsyntax

import (
	"bufio"
	"bytes"
	"net/textproto"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// FuzzFieldRules checks each field rule against the one net/http applies to the same
// bytes (textproto, httpguts, strconv): they must agree exactly, or this package must
// be the stricter (the callers hand what it refuses to net/http).
func FuzzFieldRules(f *testing.F) {
	for _, s := range [][2]string{
		{"Content-Type", "application/json"},
		{"content-length", " 12 "},
		{"connection", "keep-alive, Close"},
		{"mcp-session-id", "abc\xff"},
		{"x-a_b", "cloſe"},
		{"Bad Name", "a\x00b"},
		{"keep-alive", "\u212aeep-alive"},
		{"", "99999999999999999999"},
		{"-", "+5"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		// Names: a token, canonicalized as net/http keys its header maps.
		valid := ValidName(name)
		if valid != httpguts.ValidHeaderFieldName(name) {
			t.Fatalf("ValidName(%q) = %v, httpguts says otherwise", name, valid)
		}
		if valid != ValidName([]byte(name)) {
			t.Fatalf("ValidName(%q): the two forms differ", name)
		}
		key, ok := CanonicalKey(name)
		if ok != valid {
			t.Fatalf("CanonicalKey(%q) ok = %v, ValidName = %v", name, ok, valid)
		}
		if ok && key != textproto.CanonicalMIMEHeaderKey(name) {
			t.Fatalf("CanonicalKey(%q) = %q, textproto: %q", name, key, textproto.CanonicalMIMEHeaderKey(name))
		}

		// Values.
		if got := ValidValue(value); got != httpguts.ValidHeaderFieldValue(value) || got != ValidValue([]byte(value)) {
			t.Fatalf("ValidValue(%q) = %v, disagrees with httpguts or its []byte form", value, got)
		}
		if !strings.ContainsAny(value, "\r\n") {
			// textproto also trims CR and LF, which a value cut from a line never holds.
			if got := TrimOWS(value); got != textproto.TrimString(value) || string(TrimOWS([]byte(value))) != got {
				t.Fatalf("TrimOWS(%q) = %q, textproto: %q", value, got, textproto.TrimString(value))
			}
		}

		// Content-Length: what net/http's strconv.ParseUint(v, 10, 63) reads, within 18
		// digits (a longer one is left to net/http).
		n, ok := ParseLength(value)
		if n2, ok2 := ParseLength([]byte(value)); n2 != n || ok2 != ok {
			t.Fatalf("ParseLength(%q): the two forms differ", value)
		}
		u, err := strconv.ParseUint(value, 10, 63)
		switch {
		case ok && (err != nil || int64(u) != n):
			t.Fatalf("ParseLength(%q) = %d, strconv: %d, %v", value, n, u, err)
		case !ok && err == nil && len(value) <= MaxLengthDigits:
			t.Fatalf("ParseLength(%q) refused what strconv reads as %d", value, u)
		}

		// Connection options: the list in value holds the token name, as httpguts reads
		// it (a token is never empty, never non-ASCII).
		if valid {
			got := HasToken(value, name)
			if got != httpguts.HeaderValuesContainsToken([]string{value}, name) || got != HasToken([]byte(value), name) {
				t.Fatalf("HasToken(%q, %q) = %v, disagrees with httpguts or its []byte form", value, name, got)
			}
			if EqualFold(value, name) != (strings.EqualFold(value, name) && isASCII(value)) {
				t.Fatalf("EqualFold(%q, %q) = %v", value, name, EqualFold(value, name))
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// FuzzHead checks IndexHeadEnd and CutLine against net/http's line reader
// (textproto.Reader, which http.ReadRequest and http.ReadResponse use): a head they
// accept is read as the same lines, ending at the same blank line; a head holding a bare
// LF is left to net/http whole; a bare CR inside a line is refused.
func FuzzHead(f *testing.F) {
	for _, s := range []string{
		"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\n",
		"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n",
		"\r\n\r\n",
		"\r\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// The head ends at the first CRLF CRLF, unless a bare LF comes before it.
		want := -1
		end := bytes.Index(b, []byte("\r\n\r\n"))
		for i, c := range b {
			if c == '\n' && (i == 0 || b[i-1] != '\r') {
				if end < 0 || i < end {
					want = -2
				}
				break
			}
		}
		if want == -1 && end >= 0 {
			want = end + 4
		}
		n := IndexHeadEnd(b)
		if n != want {
			t.Fatalf("IndexHeadEnd(%q) = %d, want %d", b, n, want)
		}
		if n < 0 {
			return
		}
		head := b[:n]
		tr := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
		for rest := head; ; {
			line, next, ok := CutLine(rest)
			theirs, err := tr.ReadLineBytes()
			if err != nil {
				t.Fatalf("textproto stopped reading %q: %v", head, err)
			}
			if !ok {
				if bytes.IndexByte(theirs, '\r') < 0 {
					t.Fatalf("CutLine refused line %q of %q", theirs, head)
				}
				return // a bare CR: refused here, left to net/http
			}
			if !bytes.Equal(line, theirs) {
				t.Fatalf("CutLine read %q, textproto %q, in %q", line, theirs, head)
			}
			if len(line) == 0 && len(rest) != len(head) {
				if len(next) != 0 {
					t.Fatalf("the blank line of %q is not at IndexHeadEnd", head)
				}
				return
			}
			rest = next
		}
	})
}
