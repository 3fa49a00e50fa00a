package h1

import (
	"bytes"
	"net/http"
	"net/url"
)

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

// parse reads a request head the fast path serves, or returns nil for net/http to read:
// GET, POST or DELETE in HTTP/1.1 with an origin-form target, one Host, at most one
// Content-Length and no Transfer-Encoding, Expect or Upgrade, every line well formed.
// Strings are copied out of head, which is the connection's buffer.
func (c *conn) parse(head []byte) *http.Request {
	line, rest, ok := cutLine(head)
	if !ok {
		return nil
	}
	var method string
	switch {
	case bytes.HasPrefix(line, []byte("POST ")):
		method, line = http.MethodPost, line[5:]
	case bytes.HasPrefix(line, []byte("GET ")):
		method, line = http.MethodGet, line[4:]
	case bytes.HasPrefix(line, []byte("DELETE ")):
		method, line = http.MethodDelete, line[7:]
	default:
		return nil
	}
	target, ok := bytes.CutSuffix(line, []byte(" HTTP/1.1"))
	if !ok || len(target) == 0 || target[0] != '/' {
		return nil
	}
	u := parseTarget(target, &c.lastPath)
	if u == nil {
		return nil
	}

	// One string holds every field value and one array every value slice, as net/http's
	// reader does: a head costs a handful of allocations, not two per field.
	fields := bytes.Count(rest, []byte("\n"))
	if fields > maxHeaders+1 {
		return nil
	}
	text := string(rest)
	vals := make([]string, 0, fields)
	h := make(http.Header, fields) // the handler may keep it: never reused
	var host string
	var haveHost, haveLength, closeAfter bool
	var length int64
	off := 0 // of rest (and text)
	for {
		line, next, ok := cutLine(rest[off:])
		if !ok {
			return nil
		}
		lineOff := off
		off = len(rest) - len(next)
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return nil
		}
		value := trimOWS(line[colon+1:])
		key, ok := c.canonicalKey(line[:colon])
		if !ok || !validValue(value) {
			return nil
		}
		start := lineOff + colon + 1
		for start < len(text) && (text[start] == ' ' || text[start] == '\t') {
			start++
		}
		v := text[start : start+len(value)]
		switch key {
		case "Host":
			if haveHost || !validHost(value) {
				return nil
			}
			host, haveHost = v, true
			continue // net/http keeps it in Request.Host only
		case "Content-Length":
			if haveLength {
				return nil
			}
			haveLength = true
			if length, ok = parseLength(value); !ok {
				return nil
			}
		case "Transfer-Encoding", "Expect", "Upgrade", "Te", "Trailer":
			return nil
		case "Connection":
			if hasToken(value, "close") {
				closeAfter = true
			}
			if hasToken(value, "upgrade") {
				return nil
			}
		}
		if prev := h[key]; prev != nil {
			h[key] = append(prev, v)
			continue
		}
		vals = append(vals, v)
		h[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if !haveHost {
		return nil
	}
	if p := h["Pragma"]; len(p) > 0 && p[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"} // as net/http's reader does
		}
	}
	if off != len(rest) {
		return nil // bytes after the blank line belong to the body, not the head
	}
	r := &c.tmpl
	*r = http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Host:       host,
		RemoteAddr: c.remote,
		RequestURI: requestURI(u, target),
		Close:      closeAfter,
	}
	c.body = &body{c: c}
	c.body.left.Store(length)
	if length > 0 {
		r.Body = c.body
		r.ContentLength = length
	} else {
		r.Body = http.NoBody
	}
	return r
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

// requestURI is the target as sent: the URL's own Path string when that is all of it.
func requestURI(u *url.URL, target []byte) string {
	if u.RawQuery == "" && !u.ForceQuery && u.Path == string(target) { // no allocation
		return u.Path
	}
	return string(target)
}

// parseTarget reads an origin-form request target: visible ASCII only. A path of
// letters, digits and "-._~/" is taken as it is; any other goes through net/url, as
// net/http would parse it. The query is kept raw either way. last is the connection's
// previous plain path without a query: a target equal to it reuses its string (a
// client posts to one endpoint), and a new one replaces it.
func parseTarget(t []byte, last *string) *url.URL {
	plain := true
	q := -1
	for i, b := range t {
		if b <= ' ' || b >= 0x7f || b == '#' {
			return nil
		}
		if q >= 0 {
			continue
		}
		switch {
		case b == '?':
			q = i
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '-', b == '.', b == '_', b == '~', b == '/':
		default:
			plain = false
		}
	}
	if !plain {
		u, err := url.ParseRequestURI(string(t))
		if err != nil {
			return nil
		}
		return u
	}
	if q < 0 {
		if string(t) != *last { // no allocation for the comparison
			*last = string(t)
		}
		return &url.URL{Path: *last}
	}
	s := string(t)
	return &url.URL{Path: s[:q], RawQuery: s[q+1:], ForceQuery: q == len(t)-1}
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

// validValue allows field content: visible characters, obs-text, spaces and tabs.
func validValue(v []byte) bool {
	for _, b := range v {
		if b < ' ' && b != '\t' || b == 0x7f {
			return false
		}
	}
	return true
}

// validHost allows what a host[:port] or [IPv6]:port can hold; anything else goes to
// net/http, which answers 400.
func validHost(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	for _, b := range v {
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case b == '.' || b == '-' || b == ':' || b == '[' || b == ']' || b == '_' || b == '%':
		default:
			return false
		}
	}
	return true
}

// parseLength reads a Content-Length: digits only, at most 18 of them.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, b := range v {
		if b < '0' || b > '9' {
			return 0, false
		}
		n = n*10 + int64(b-'0')
	}
	return n, true
}

// hasToken reports whether the comma-separated list v holds token (ASCII case-insensitive).
func hasToken(v []byte, token string) bool {
	for len(v) > 0 {
		var item []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			item, v = v, nil
		}
		if bytes.EqualFold(trimOWS(item), []byte(token)) {
			return true
		}
	}
	return false
}

// isTokenChar reports the characters of an RFC 9110 token.
func isTokenChar(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	switch b {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// canonicalKey returns name in net/http's canonical form (as textproto would make it),
// without allocating for the names MCP clients send; false when name is not a token.
func (c *conn) canonicalKey(name []byte) (string, bool) {
	buf := c.hbuf[:0]
	upper := true
	for _, b := range name {
		if !isTokenChar(b) {
			return "", false
		}
		if upper && 'a' <= b && b <= 'z' {
			b -= 'a' - 'A'
		} else if !upper && 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		buf = append(buf, b)
		upper = b == '-'
	}
	c.hbuf = buf
	switch string(buf) { // the compiler does not allocate for these comparisons
	case "Host":
		return "Host", true
	case "Content-Type":
		return "Content-Type", true
	case "Content-Length":
		return "Content-Length", true
	case "Accept":
		return "Accept", true
	case "Accept-Encoding":
		return "Accept-Encoding", true
	case "Accept-Language":
		return "Accept-Language", true
	case "User-Agent":
		return "User-Agent", true
	case "Connection":
		return "Connection", true
	case "Authorization":
		return "Authorization", true
	case "Origin":
		return "Origin", true
	case "Mcp-Session-Id":
		return "Mcp-Session-Id", true
	case "Mcp-Protocol-Version":
		return "Mcp-Protocol-Version", true
	case "Mcp-Method":
		return "Mcp-Method", true
	case "Mcp-Name":
		return "Mcp-Name", true
	case "Last-Event-Id":
		return "Last-Event-Id", true
	case "X-Api-Key":
		return "X-Api-Key", true
	case "Sec-Fetch-Mode":
		return "Sec-Fetch-Mode", true
	case "Transfer-Encoding":
		return "Transfer-Encoding", true
	case "Expect":
		return "Expect", true
	case "Upgrade":
		return "Upgrade", true
	case "Te":
		return "Te", true
	case "Trailer":
		return "Trailer", true
	}
	return string(buf), true
}
