package h1client

import (
	"bytes"
	"net/http"
	"net/textproto"
)

// maxHeaders bounds the fields of a response head the fast path reads.
const maxHeaders = 100

// head is what the fast path reads of a response head: the status, the fields and the
// body's framing.
type head struct {
	status  int
	reason  string
	header  http.Header
	length  int64 // -1: none given
	chunked bool
	close   bool // Connection: close
	idleFor int  // Keep-Alive: timeout=N, in seconds; 0 when not given
}

// indexHeadEnd returns the length of the head at the start of buf (through the blank
// line), -1 when it is not all there yet, or -2 when a line ends in a bare LF (net/http
// reads those).
func indexHeadEnd(buf []byte) int {
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

// parseHead reads a response head the fast path serves, or reports false for net/http to
// read: HTTP/1.1, a three-digit status, well-formed fields, at most one Content-Length,
// Transfer-Encoding absent or exactly "chunked" (and then no Content-Length). With
// fields, h.header holds the fields, every string cut out of one copy of b (which is the
// connection's buffer); without, only the status and the framing are read, and nothing
// is allocated (Send's callers read the fields they need from the head's bytes).
func parseHead(b []byte, fields bool) (h head, ok bool) {
	line, rest, ok := cutLine(b)
	if !ok || len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) || (len(line) > 12 && line[12] != ' ') {
		return h, false
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return h, false
		}
	}
	h.status = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	if h.status < 100 {
		return h, false
	}
	nfields := bytes.Count(rest, []byte("\n"))
	if nfields > maxHeaders+1 {
		return h, false
	}
	if len(line) > 13 && !validValue(line[13:]) {
		return h, false
	}
	var text string
	var vals []string
	if fields {
		text = string(b) // one allocation holds the reason, every name and every value
		if len(line) > 13 {
			h.reason = text[13:len(line)]
		}
		vals = make([]string, 0, nfields)
		h.header = make(http.Header, nfields)
	}
	h.length = -1
	haveLength, haveTE := false, false
	off := len(b) - len(rest)
	for {
		line, next, ok := cutLine(b[off:])
		if !ok {
			return h, false
		}
		lineOff := off
		off = len(b) - len(next)
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return h, false
		}
		name := line[:colon]
		value := trimOWS(line[colon+1:])
		if !validName(name) || !validValue(value) {
			return h, false
		}
		switch framingField(name) {
		case fieldContentLength:
			if haveLength {
				return h, false
			}
			haveLength = true
			if h.length, ok = parseLength(value); !ok {
				return h, false
			}
		case fieldTransferEncoding:
			if haveTE || !asciiEqualFold(value, "chunked") {
				return h, false
			}
			haveTE, h.chunked = true, true
			continue // net/http moves it to Response.TransferEncoding
		case fieldConnection:
			if hasToken(value, "close") {
				h.close = true
			}
			if hasToken(value, "upgrade") {
				return h, false
			}
		case fieldKeepAlive:
			h.idleFor = keepAliveTimeout(value)
		case fieldTrailer:
			return h, false // net/http announces trailers in Response.Trailer: leave them to it
		}
		if !fields {
			continue
		}
		key := canonicalKey(name, text[lineOff:lineOff+colon])
		start := lineOff + colon + 1
		for text[start] == ' ' || text[start] == '\t' {
			start++
		}
		v := text[start : start+len(value)]
		if prev := h.header[key]; prev != nil {
			h.header[key] = append(prev, v)
			continue
		}
		vals = append(vals, v)
		h.header[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if off != len(b) || (haveTE && haveLength) {
		return h, false
	}
	askedClose := h.close
	if !haveTE && !haveLength && bodyAllowed(h.status) {
		h.close = true // the body runs to the connection's end
	}
	if h.status/100 == 1 && h.status != 101 && (haveTE || haveLength) {
		return h, false
	}
	if fields {
		// As net/http's reader does: a Connection field asking to close is taken out (it
		// becomes close), and Pragma: no-cache implies Cache-Control: no-cache.
		if askedClose {
			delete(h.header, "Connection")
		}
		if p := h.header["Pragma"]; len(p) > 0 && p[0] == "no-cache" {
			if _, ok := h.header["Cache-Control"]; !ok {
				h.header["Cache-Control"] = []string{"no-cache"}
			}
		}
	}
	return h, true
}

// The fields parseHead acts on.
const (
	fieldOther = iota
	fieldContentLength
	fieldTransferEncoding
	fieldConnection
	fieldKeepAlive
	fieldTrailer
)

// framingField tells which of the fields parseHead acts on name is, in any case.
func framingField(name []byte) int {
	switch len(name) {
	case len("Content-Length"):
		if asciiEqualFold(name, "Content-Length") {
			return fieldContentLength
		}
	case len("Transfer-Encoding"):
		if asciiEqualFold(name, "Transfer-Encoding") {
			return fieldTransferEncoding
		}
	case len("Connection"): // and Keep-Alive
		if asciiEqualFold(name, "Connection") {
			return fieldConnection
		}
		if asciiEqualFold(name, "Keep-Alive") {
			return fieldKeepAlive
		}
	case len("Trailer"):
		if asciiEqualFold(name, "Trailer") {
			return fieldTrailer
		}
	}
	return fieldOther
}

// cutLine splits off one CRLF-terminated line; a bare CR or LF inside it refuses it.
func cutLine(b []byte) (line, rest []byte, ok bool) {
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

// commonKeys are the canonical names of the fields an MCP server usually sends: a name
// in any other case maps to one of these without an allocation.
var commonKeys = []string{
	"Content-Type", "Content-Length", "Date", "Mcp-Session-Id", "Connection", "Keep-Alive",
	"Transfer-Encoding", "Cache-Control", "Www-Authenticate", "Server", "Vary",
	"X-Accel-Buffering", "Access-Control-Allow-Origin",
}

// canonicalKey returns the canonical form of a field name that is a token (s is the
// same bytes as a string): s itself when it already is canonical, else a shared constant
// or a new string.
func canonicalKey(name []byte, s string) string {
	canonical := true
	upper := true
	for _, c := range name {
		switch {
		case upper && 'a' <= c && c <= 'z', !upper && 'A' <= c && c <= 'Z':
			canonical = false
		}
		upper = c == '-'
	}
	if canonical {
		return s
	}
	for _, k := range commonKeys {
		if asciiEqualFold(name, k) {
			return k
		}
	}
	return textproto.CanonicalMIMEHeaderKey(s)
}

func isTokenChar(c byte) bool {
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

// validValue reports whether a field value holds no control byte but HTAB (what
// net/http accepts).
func validValue(v []byte) bool {
	for _, c := range v {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// parseLength reads a Content-Length: decimal digits only, at most 18 of them.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
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

// hasToken reports whether a comma-separated list holds token (any case).
func hasToken(v []byte, token string) bool {
	for len(v) > 0 {
		item := v
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		if asciiEqualFold(trimOWS(item), token) {
			return true
		}
	}
	return false
}

// keepAliveTimeout reads timeout=N from a Keep-Alive field (seconds); 0 when absent.
func keepAliveTimeout(v []byte) int {
	for len(v) > 0 {
		item := v
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		item = trimOWS(item)
		if len(item) > 8 && asciiEqualFold(item[:8], "timeout=") {
			if n, ok := parseLength(item[8:]); ok && n < 1<<20 {
				return int(n)
			}
		}
	}
	return 0
}

// bodyAllowed reports whether a response with this status may carry a body.
func bodyAllowed(status int) bool {
	return status/100 != 1 && status != 204 && status != 304
}
