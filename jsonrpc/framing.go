package jsonrpc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxMessageSize bounds one framed message when the caller sets no limit.
const DefaultMaxMessageSize = 64 << 20

// ErrMessageTooLarge is matched (errors.Is) by the *TooLargeError LineReader returns for a
// line over the limit. The reader has skipped the rest of that line and can go on reading.
var ErrMessageTooLarge = errors.New("message exceeds the size limit")

// TooLargeError describes a skipped oversized line.
type TooLargeError struct {
	Size  int    // bytes in the line (a lower bound when the input ended first)
	Limit int    // the configured limit
	Head  []byte // the first bytes of the line, so a caller can find the message's id
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("message of %d bytes exceeds the limit of %d bytes", e.Size, e.Limit)
}

// Is makes errors.Is(err, ErrMessageTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrMessageTooLarge }

const headSize = 4 << 10

// LineReader reads newline-delimited messages of any length up to a limit. It is not safe
// for concurrent use.
type LineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// NewLineReader returns a reader of lines up to max bytes (DefaultMaxMessageSize if max<=0).
func NewLineReader(r io.Reader, max int) *LineReader {
	if max <= 0 {
		max = DefaultMaxMessageSize
	}
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// ReadLine returns the next non-empty line without its terminator. The returned slice is
// valid until the next call. At end of input it returns io.EOF (a final unterminated line
// is returned first).
func (lr *LineReader) ReadLine() ([]byte, error) {
	for {
		line, err := lr.readLine()
		if err != nil {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		return line, nil
	}
}

func (lr *LineReader) readLine() ([]byte, error) {
	lr.shrink() // the line returned last time is no longer in use
	frag, err := lr.r.ReadSlice('\n')
	if err == nil && len(frag)-1 <= lr.max {
		return frag[:len(frag)-1], nil // common case: the line fits the buffer, no copy
	}
	lr.buf = append(lr.buf[:0], frag...)
	for errors.Is(err, bufio.ErrBufferFull) {
		if len(lr.buf) > lr.max {
			return nil, lr.skipRest()
		}
		frag, err = lr.r.ReadSlice('\n')
		lr.buf = append(lr.buf, frag...)
	}
	if err == nil {
		if len(lr.buf)-1 > lr.max {
			lr.buf = lr.buf[:len(lr.buf)-1] // keep the newline out of Head
			e := lr.tooLarge(len(lr.buf))
			lr.shrink()
			return nil, e
		}
		return lr.buf[:len(lr.buf)-1], nil
	}
	if errors.Is(err, io.EOF) && len(lr.buf) > 0 {
		if len(lr.buf) > lr.max {
			e := lr.tooLarge(len(lr.buf))
			lr.shrink()
			return nil, e
		}
		return lr.buf, nil
	}
	return nil, err
}

func (lr *LineReader) tooLarge(size int) *TooLargeError {
	head := lr.buf
	if len(head) > headSize {
		head = head[:headSize]
	}
	return &TooLargeError{Size: size, Limit: lr.max, Head: append([]byte(nil), head...)}
}

// skipRest discards input up to and including the next newline.
func (lr *LineReader) skipRest() error {
	e := lr.tooLarge(len(lr.buf))
	lr.shrink()
	for {
		frag, err := lr.r.ReadSlice('\n')
		e.Size += len(frag)
		if err == nil {
			e.Size--
			return e
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) {
				return e
			}
			return err
		}
	}
}

// shrink drops a huge buffer so one big message does not pin memory forever.
func (lr *LineReader) shrink() {
	if cap(lr.buf) > 1<<20 {
		lr.buf = nil
	}
}

// Read reads and decodes the next message. A decoding error is returned together with
// whatever of the message could be read (see Decode); the caller decides whether to
// answer it and go on. I/O errors (including io.EOF) end the stream.
func (lr *LineReader) Read() (*Message, error) {
	line, err := lr.ReadLine()
	if err != nil {
		return nil, err
	}
	return Decode(line)
}

// LineWriter writes one message per line. It is safe for concurrent use: each message is
// written with one Write call, so lines never interleave.
type LineWriter struct {
	mu  sync.Mutex // guards w and buf
	w   io.Writer
	buf []byte
}

// NewLineWriter returns a writer of newline-delimited messages.
func NewLineWriter(w io.Writer) *LineWriter { return &LineWriter{w: w} }

// Write encodes m and writes it followed by a newline.
func (lw *LineWriter) Write(m *Message) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	b, err := m.Append(lw.buf[:0])
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = lw.w.Write(b)
	if cap(b) <= 1<<20 {
		lw.buf = b[:0]
	} else {
		lw.buf = nil
	}
	return err
}

// WriteRaw writes an already encoded single-line message followed by a newline.
func (lw *LineWriter) WriteRaw(line []byte) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	b := append(append(lw.buf[:0], line...), '\n')
	_, err := lw.w.Write(b)
	if cap(b) <= 1<<20 {
		lw.buf = b[:0]
	} else {
		lw.buf = nil
	}
	return err
}
