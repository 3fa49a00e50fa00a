// Package httpsyntax holds the HTTP/1.1 syntax rules (RFC 9110, RFC 9112) that the
// proxy's lean server (internal/h1) and lean client (internal/h1client) both apply to
// the heads they read and write: where a head ends, what a line, a field name, a field
// value, a Content-Length and a connection option are, and the canonical form of a
// field name. One implementation of each rule, so that a fix reaches both parsers:
// request smuggling lives in the differences between two readers of the same bytes.
//
// Every rule is at most as lenient as net/http's reader (both callers hand whatever a
// rule refuses to net/http, which then decides), and none of them allocates except
// CanonicalKey for an uncommon name in a non-canonical case. The package does not read
// requests or responses itself, and holds no state.
package httpsyntax

import (
	"bytes"
	"net/textproto"
)

// IndexHeadEnd returns the length of the head at the start of buf (through the blank
// line ending it), -1 when the head is not all there yet, or -2 when a line of it ends
// in a bare LF (RFC 9112 §2.2 lets a recipient accept that; net/http does, so the
// callers hand such a head to it).
func IndexHeadEnd(buf []byte) int {
	for start := 0; ; {
		i := bytes.IndexByte(buf[start:], '\n')
		if i < 0 {
			return -1
		}
		i += start
		if i == 0 || buf[i-1] != '\r' {
			return -2
		}
		if i == start+1 && start > 0 {
			return i + 1
		}
		start = i + 1
	}
}

// CutLine splits off one CRLF-terminated line of a head; ok is false when b holds no
// CRLF, or the line holds a bare CR.
func CutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 1 || b[i-1] != '\r' {
		return nil, nil, false
	}
	line = b[:i-1]
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, nil, false
	}
	return line, b[i+1:], true
}

// TrimOWS removes optional whitespace (spaces and horizontal tabs, RFC 9110 §5.6.3)
// from both ends of s: what surrounds a field value. Nothing else is whitespace here,
// not even a vertical tab or a no-break space.
func TrimOWS[T string | []byte](s T) T {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// IsTokenChar reports whether c is a tchar of RFC 9110 §5.6.2: what field names,
// methods and connection options are made of (letters, digits and
// "!#$%&'*+-.^_`|~").
func IsTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// ValidName reports whether s is a token (RFC 9110 §5.6.2): a field name or a method.
// The empty string is not.
func ValidName[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if !IsTokenChar(s[i]) {
			return false
		}
	}
	return len(s) > 0
}

// ValidValue reports whether v may be a field value (RFC 9110 §5.5): visible
// characters, obs-text (bytes 0x80 and above), spaces and horizontal tabs. Any other
// control byte, CR, LF and NUL above all, is refused, as net/http refuses it.
func ValidValue[T string | []byte](v T) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// MaxLengthDigits bounds the digits of a Content-Length ParseLength reads: 18 digits
// cannot overflow an int64. A longer one is refused (and left to net/http).
const MaxLengthDigits = 18

// ParseLength reads a Content-Length value (RFC 9110 §8.6): decimal digits only, at
// most MaxLengthDigits of them. No sign, no whitespace (the caller trims OWS first), no
// list: "3, 3" is refused here, although a recipient may accept it.
func ParseLength[T string | []byte](v T) (int64, bool) {
	if len(v) == 0 || len(v) > MaxLengthDigits {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// EqualFold reports whether b and s are the same but for ASCII letter case, the only
// case tokens have. Unlike bytes.EqualFold it folds no other character: "cloſe" (with
// U+017F, which Unicode folds to "s") is not "close".
func EqualFold[T string | []byte](b T, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// HasToken reports whether the comma-separated list v (a Connection field's value, or
// several such values joined by commas) holds token, in any ASCII case (RFC 9110 §5.6.1,
// §7.6.1). Empty items and the OWS around each item are ignored.
func HasToken[T string | []byte](v T, token string) bool {
	for len(v) > 0 {
		item := v
		if i := index(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			v = v[:0]
		}
		if EqualFold(TrimOWS(item), token) {
			return true
		}
	}
	return false
}

func index[T string | []byte](v T, c byte) int {
	for i := 0; i < len(v); i++ {
		if v[i] == c {
			return i
		}
	}
	return -1
}

// CanonicalKey returns field name s in the canonical form net/http keys its header maps
// by (textproto.CanonicalMIMEHeaderKey: the first letter and every letter after a
// hyphen upper case, the others lower case), or false when s is not a token (such a
// field is malformed: RFC 9112 §5 leaves no room for whitespace or any other byte
// before the colon). It does not allocate for a name already canonical (s itself comes
// back: a caller that cut s out of a copy of the head shares that copy), nor for a
// common name in another case (a constant comes back).
func CanonicalKey(s string) (string, bool) {
	var buf [32]byte // the canonical form, built as s is checked
	if len(s) == 0 || len(s) > len(buf) {
		if !ValidName(s) {
			return "", false
		}
		return textproto.CanonicalMIMEHeaderKey(s), true
	}
	b := buf[:len(s)]
	canonical, upper := true, true
	for i := range b {
		c := s[i]
		if !IsTokenChar(c) {
			return "", false
		}
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
			canonical = false
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
			canonical = false
		}
		b[i] = c
		upper = c == '-'
	}
	if canonical {
		return s, true
	}
	if k := commonKey(b); k != "" {
		return k, true
	}
	return string(b), true
}

// commonKey returns the constant for a canonical name MCP clients and servers commonly
// send, or "" (the switch compares without allocating).
func commonKey(b []byte) string {
	switch string(b) {
	case "Accept":
		return "Accept"
	case "Accept-Encoding":
		return "Accept-Encoding"
	case "Accept-Language":
		return "Accept-Language"
	case "Access-Control-Allow-Origin":
		return "Access-Control-Allow-Origin"
	case "Authorization":
		return "Authorization"
	case "Cache-Control":
		return "Cache-Control"
	case "Connection":
		return "Connection"
	case "Content-Length":
		return "Content-Length"
	case "Content-Type":
		return "Content-Type"
	case "Date":
		return "Date"
	case "Expect":
		return "Expect"
	case "Host":
		return "Host"
	case "Keep-Alive":
		return "Keep-Alive"
	case "Last-Event-Id":
		return "Last-Event-Id"
	case "Mcp-Method":
		return "Mcp-Method"
	case "Mcp-Name":
		return "Mcp-Name"
	case "Mcp-Protocol-Version":
		return "Mcp-Protocol-Version"
	case "Mcp-Session-Id":
		return "Mcp-Session-Id"
	case "Origin":
		return "Origin"
	case "Pragma":
		return "Pragma"
	case "Sec-Fetch-Mode":
		return "Sec-Fetch-Mode"
	case "Server":
		return "Server"
	case "Te":
		return "Te"
	case "Trailer":
		return "Trailer"
	case "Transfer-Encoding":
		return "Transfer-Encoding"
	case "Upgrade":
		return "Upgrade"
	case "User-Agent":
		return "User-Agent"
	case "Vary":
		return "Vary"
	case "Www-Authenticate":
		return "Www-Authenticate"
	case "X-Accel-Buffering":
		return "X-Accel-Buffering"
	case "X-Api-Key":
		return "X-Api-Key"
	}
	return ""
}
