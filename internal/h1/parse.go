package h1

import (
	"bytes"
	"net/http"
	"net/url"

	"github.com/mcp-proxy/mcp-proxy/internal/httpsyntax"
)

// parse reads a request head the fast path serves, or returns nil for net/http to read:
// GET, POST or DELETE in HTTP/1.1 with an origin-form target, one Host, at most one
// Content-Length and no Transfer-Encoding, Expect or Upgrade, every line well formed.
// Strings are copied out of head, which is the connection's buffer.
func (c *conn) parse(head []byte) *http.Request {
	line, rest, ok := httpsyntax.CutLine(head)
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
		line, next, ok := httpsyntax.CutLine(rest[off:])
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
		value := httpsyntax.TrimOWS(line[colon+1:])
		key, ok := httpsyntax.CanonicalKey(text[lineOff : lineOff+colon])
		if !ok || !httpsyntax.ValidValue(value) {
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
			if length, ok = httpsyntax.ParseLength(value); !ok {
				return nil
			}
		case "Transfer-Encoding", "Expect", "Upgrade", "Te", "Trailer":
			return nil
		case "Connection":
			if httpsyntax.HasToken(value, "close") {
				closeAfter = true
			}
			if httpsyntax.HasToken(value, "upgrade") {
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
