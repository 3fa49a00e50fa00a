// Package transport moves JSON-RPC messages between the proxy and its peers. Towards
// clients: newline framing over the proxy's own stdin/stdout. Towards upstreams, as
// Links: child processes (newline framing over pipes, process groups, stopping by stdin
// close, SIGTERM, SIGKILL), Streamable HTTP in both eras (sessions, GET and answer event
// streams with resumption, the MCP-Protocol-Version and Mcp-* headers), legacy HTTP+SSE,
// and the OAuth 2.1 client an HTTP upstream may demand. Pipe is an in-memory link to a
// server written in Go (tests, in-process servers).
//
// It does not route, rewrite or interpret MCP beyond what its transport requires: it
// hands lines and messages up and writes what it is given; a request it cannot complete
// is reported through RequestFailer, never disguised as an answer.
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
