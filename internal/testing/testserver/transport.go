package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// Framing: one JSON-RPC message per line on stdin and stdout.

const (
	readBufferSize = 64 << 10
	// maxRetainedLine is the largest buffer kept between long lines.
	maxRetainedLine = 1 << 20
)

// lineReader returns the lines of r without a length limit. It is not safe
// for concurrent use.
type lineReader struct {
	br  *bufio.Reader
	buf []byte // assembles lines longer than br's buffer
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, readBufferSize)}
}

// next returns the next line, including its newline if it had one. The
// slice is valid only until the following call. A last line without a
// newline is returned with a nil error; the call after it returns io.EOF.
func (lr *lineReader) next() ([]byte, error) {
	if cap(lr.buf) > maxRetainedLine {
		lr.buf = nil
	}
	line, err := lr.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		lr.buf = append(lr.buf[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = lr.br.ReadSlice('\n')
			lr.buf = append(lr.buf, line...)
		}
		line = lr.buf
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return line, nil
		}
		return nil, err
	}
	return line, nil
}

// errOutputClosed is returned by writes after lineWriter.close.
var errOutputClosed = errors.New("output closed")

// lineWriter writes whole lines to one writer. It is safe for concurrent
// use; each line is flushed before the next one starts.
type lineWriter struct {
	mu     sync.Mutex    // guards bw and closed
	bw     *bufio.Writer // its error is sticky, so a broken stdout stays broken
	closed bool          // set by close; later writes are dropped
}

func newLineWriter(w io.Writer) *lineWriter {
	return newLineWriterSize(w, readBufferSize)
}

func newLineWriterSize(w io.Writer, size int) *lineWriter {
	return &lineWriter{bw: bufio.NewWriterSize(w, size)}
}

// reset points w at dst and reopens it, keeping its buffer: -http mode pools
// one lineWriter per request in flight.
func (w *lineWriter) reset(dst io.Writer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bw.Reset(dst)
	w.closed = false
}

// writeLine writes the concatenation of parts and a newline, then flushes.
func (w *lineWriter) writeLine(parts ...[]byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errOutputClosed
	}
	for _, p := range parts {
		// Errors are sticky in bufio.Writer and reported by Flush.
		_, _ = w.bw.Write(p)
	}
	_ = w.bw.WriteByte('\n')
	return w.bw.Flush()
}

// close drops every later write, as if the process had gone.
func (w *lineWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}

// JSON-RPC error codes.
const (
	codeParseError       = -32700
	codeInvalidRequest   = -32600
	codeMethodNotFound   = -32601
	codeInvalidParams    = -32602
	codeInternalError    = -32603
	codeResourceNotFound = -32002
)

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

var (
	responsePrefix   = []byte(`{"jsonrpc":"2.0","id":`)
	resultInfix      = []byte(`,"result":`)
	errorInfix       = []byte(`,"error":`)
	responseSuffix   = []byte(`}`)
	nullID           = []byte(`null`)
	notificationHead = []byte(`{"jsonrpc":"2.0","method":`)
	paramsInfix      = []byte(`,"params":`)
)

// writeResult writes a response carrying result, with id copied verbatim.
func writeResult(w *lineWriter, id, result []byte) error {
	return w.writeLine(responsePrefix, id, resultInfix, result, responseSuffix)
}

// writeError writes an error response. An empty id is written as null.
func writeError(w *lineWriter, id []byte, e *rpcError) error {
	if len(id) == 0 {
		id = nullID
	}
	body, err := encode(e)
	if err != nil {
		return err
	}
	return w.writeLine(responsePrefix, id, errorInfix, body, responseSuffix)
}

// writeNotification writes a notification with already encoded params.
func writeNotification(w *lineWriter, method string, params []byte) error {
	m, err := encode(method)
	if err != nil {
		return err
	}
	return w.writeLine(notificationHead, m, paramsInfix, params, responseSuffix)
}

// encode marshals v as compact JSON without HTML escaping.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// isAbsent reports whether a raw JSON value is missing or null.
func isAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}
