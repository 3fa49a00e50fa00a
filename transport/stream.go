// Package transport moves JSON-RPC messages between the proxy and its peers: newline
// framing over pipes (the proxy's own stdin/stdout and its child processes), and the
// lifecycle of child processes. Pipe is an in-memory link to a server written in Go.
//
// It does not route, rewrite or interpret MCP: it hands lines and messages up and writes
// what it is given.
package transport

import (
	"io"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// Stream is one newline-delimited JSON-RPC connection over a reader and a writer.
// ReadLine must be called from one goroutine; Write is safe for concurrent use.
type Stream struct {
	r *jsonrpc.LineReader
	w *jsonrpc.LineWriter
}

// NewStream returns a stream reading messages of at most maxMessage bytes from r and
// writing to w.
func NewStream(r io.Reader, w io.Writer, maxMessage int) *Stream {
	return &Stream{r: jsonrpc.NewLineReader(r, maxMessage), w: jsonrpc.NewLineWriter(w)}
}

// NewOutputStream returns a stream that only writes (a session whose messages arrive by
// other means, such as HTTP requests): it holds no read buffer, and ReadLine reports EOF.
func NewOutputStream(w io.Writer) *Stream {
	return &Stream{w: jsonrpc.NewLineWriter(w)}
}

// ReadLine returns the next non-empty line; it is valid until the next call.
func (s *Stream) ReadLine() ([]byte, error) {
	if s.r == nil {
		return nil, io.EOF
	}
	return s.r.ReadLine()
}

// Write sends one message as one line.
func (s *Stream) Write(m *jsonrpc.Message) error { return s.w.Write(m) }

// WriteRaw sends one already encoded single-line JSON value (a batch response).
func (s *Stream) WriteRaw(line []byte) error { return s.w.WriteRaw(line) }

// Buffered returns how many bytes ReadLine can consume without blocking.
func (s *Stream) Buffered() int {
	if s.r == nil {
		return 0
	}
	return s.r.Buffered()
}

// Cork holds writes back until Uncork (see jsonrpc.LineWriter.Cork).
func (s *Stream) Cork() { s.w.Cork() }

// Uncork writes what accumulated since the matching Cork.
func (s *Stream) Uncork() error { return s.w.Uncork() }
