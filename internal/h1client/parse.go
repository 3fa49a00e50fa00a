package h1client

import (
	"bytes"
	"net/http"

	"github.com/mcp-proxy/mcp-proxy/internal/httpsyntax"
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

// parseHead reads a response head the fast path serves, or reports false for net/http to
// read: HTTP/1.1, a three-digit status, well-formed fields, at most one Content-Length,
// Transfer-Encoding absent or exactly "chunked" (and then no Content-Length). With
// fields, h.header holds the fields, every string cut out of one copy of b (which is the
// connection's buffer); without, only the status and the framing are read, and nothing
// is allocated (Send's callers read the fields they need from the head's bytes).
func parseHead(b []byte, fields bool) (h head, ok bool) {
	line, rest, ok := httpsyntax.CutLine(b)
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
	if len(line) > 13 && !httpsyntax.ValidValue(line[13:]) {
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
		line, next, ok := httpsyntax.CutLine(b[off:])
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
		value := httpsyntax.TrimOWS(line[colon+1:])
		var key string
		if fields {
			key, ok = httpsyntax.CanonicalKey(text[lineOff : lineOff+colon])
		} else {
			ok = httpsyntax.ValidName(name)
		}
		if !ok || !httpsyntax.ValidValue(value) {
			return h, false
		}
		switch framingField(name) {
		case fieldContentLength:
			if haveLength {
				return h, false
			}
			haveLength = true
			if h.length, ok = httpsyntax.ParseLength(value); !ok {
				return h, false
			}
		case fieldTransferEncoding:
			if haveTE || !httpsyntax.EqualFold(value, "chunked") {
				return h, false
			}
			haveTE, h.chunked = true, true
			continue // net/http moves it to Response.TransferEncoding
		case fieldConnection:
			if httpsyntax.HasToken(value, "close") {
				h.close = true
			}
			if httpsyntax.HasToken(value, "upgrade") {
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
		if httpsyntax.EqualFold(name, "Content-Length") {
			return fieldContentLength
		}
	case len("Transfer-Encoding"):
		if httpsyntax.EqualFold(name, "Transfer-Encoding") {
			return fieldTransferEncoding
		}
	case len("Connection"): // and Keep-Alive
		if httpsyntax.EqualFold(name, "Connection") {
			return fieldConnection
		}
		if httpsyntax.EqualFold(name, "Keep-Alive") {
			return fieldKeepAlive
		}
	case len("Trailer"):
		if httpsyntax.EqualFold(name, "Trailer") {
			return fieldTrailer
		}
	}
	return fieldOther
}

// bodyAllowed reports whether a response with this status may carry a body.
func bodyAllowed(status int) bool {
	return status/100 != 1 && status != 204 && status != 304
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
		item = httpsyntax.TrimOWS(item)
		if len(item) > 8 && httpsyntax.EqualFold(item[:8], "timeout=") {
			if n, ok := httpsyntax.ParseLength(item[8:]); ok && n < 1<<20 {
				return int(n)
			}
		}
	}
	return 0
}
