// Package benchwire is the client side of the Go benchmarks that measure one whole MCP
// call through an HTTP front end (the proxy's, or the floor forwarder's): a Streamable
// HTTP session of the 2025-11-25 style (initialize mints Mcp-Session-Id, then each
// message is one POST) over one keep-alive loopback connection, written and read by hand
// so that, once warm, the client allocates nothing and what a benchmark counts per call
// is the server's. It understands only what those servers answer: a JSON body with a
// Content-Length, or 202 with none. It is for benchmarks and tests, never for serving.
package benchwire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// ProtocolVersion is what the session negotiates and sends in Mcp-Protocol-Version.
const ProtocolVersion = "2025-11-25"

// Session is one MCP session over one connection. It is not safe for concurrent use.
type Session struct {
	conn net.Conn
	br   *bufio.Reader
	host string
	path string
	id   string // Mcp-Session-Id
	next int64

	req  []byte   // the request being written
	body []byte   // the last answer's body
	idb  [20]byte // the request's id, formatted
}

// Open dials addr (host:port), and opens a session at path: initialize, then
// notifications/initialized.
func Open(addr, path string) (*Session, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	s := &Session{conn: c, br: bufio.NewReaderSize(c, 16<<10), host: addr, path: path}
	status, err := s.post([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` +
		ProtocolVersion + `","capabilities":{},"clientInfo":{"name":"benchwire","version":"1"}}}`))
	if err == nil && (status != 200 || s.id == "") {
		err = fmt.Errorf("initialize: HTTP %d, session %q: %s", status, s.id, s.body)
	}
	if err == nil {
		status, err = s.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
		if err == nil && status != 202 {
			err = fmt.Errorf("notifications/initialized: HTTP %d, want 202", status)
		}
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the connection (the session ends when the server notices).
func (s *Session) Close() error { return s.conn.Close() }

// Call sends a request (params: the JSON params object) with the next id and returns its
// answer's body, valid until the next call. An answer that is not 200 with a response
// carrying the request's id and a result is an error.
func (s *Session) Call(method string, params []byte) ([]byte, error) {
	s.next++
	id := strconv.AppendInt(s.idb[:0], s.next, 10)
	body := s.body[:0] // reuse: the request's body is built in the answer's old buffer
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = append(body, id...)
	body = append(body, `,"method":"`...)
	body = append(body, method...)
	body = append(body, `","params":`...)
	body = append(body, params...)
	body = append(body, '}')
	s.body = body
	status, err := s.post(body)
	if err != nil {
		return nil, err
	}
	if status != 200 {
		return nil, fmt.Errorf("%s: HTTP %d: %s", method, status, s.body)
	}
	// The answer is the proxy's encoding: "id" before "result" or "error".
	i := bytes.Index(s.body, []byte(`"id":`))
	if i < 0 || !bytes.HasPrefix(s.body[i+5:], id) || !bytes.Contains(s.body, []byte(`"result":`)) {
		return nil, fmt.Errorf("%s: not the result of request %s: %s", method, id, s.body)
	}
	return s.body, nil
}

// post writes one POST with body and reads its answer into s.body.
func (s *Session) post(body []byte) (status int, err error) {
	r := s.req[:0]
	r = append(r, "POST "...)
	r = append(r, s.path...)
	r = append(r, " HTTP/1.1\r\nHost: "...)
	r = append(r, s.host...)
	r = append(r, "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: "...)
	r = strconv.AppendInt(r, int64(len(body)), 10)
	if s.id != "" {
		r = append(r, "\r\nMcp-Session-Id: "...)
		r = append(r, s.id...)
		r = append(r, "\r\nMcp-Protocol-Version: "+ProtocolVersion...)
	}
	r = append(r, "\r\n\r\n"...)
	r = append(r, body...)
	s.req = r
	if _, err := s.conn.Write(r); err != nil {
		return 0, err
	}
	return s.readAnswer()
}

// readAnswer reads a status line, the headers and a Content-Length body.
func (s *Session) readAnswer() (int, error) {
	line, err := s.br.ReadSlice('\n')
	if err != nil {
		return 0, fmt.Errorf("reading the status line: %w", err)
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12])) // no allocation: the compiler's string(b) in a call
	if err != nil {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	length := -1
	for {
		line, err := s.br.ReadSlice('\n')
		if err != nil {
			return 0, fmt.Errorf("reading the headers: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, fmt.Errorf("bad header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, errors.New("a chunked answer: benchwire reads Content-Length bodies only")
		case bytes.EqualFold(name, []byte("Mcp-Session-Id")) && s.id == "":
			s.id = string(value)
		}
	}
	if length < 0 {
		if status == 202 || status == 204 {
			length = 0
		} else {
			return 0, fmt.Errorf("HTTP %d without Content-Length", status)
		}
	}
	if cap(s.body) < length {
		s.body = make([]byte, length, 2*length)
	}
	s.body = s.body[:length]
	if _, err := io.ReadFull(s.br, s.body); err != nil {
		return 0, fmt.Errorf("reading the body: %w", err)
	}
	return status, nil
}
