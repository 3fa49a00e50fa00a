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
	r       *bufio.Reader
	max     int
	buf     []byte
	partial bool // buf holds the start of a line whose read an error (a deadline) cut short
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
// is returned first). Another error from the reader (a read deadline) loses nothing: the
// part of a line read before it is kept, and the next call completes that line.
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
	var frag []byte
	var err error
	if lr.partial {
		lr.partial = false
		frag, err = lr.r.ReadSlice('\n')
		lr.buf = append(lr.buf, frag...)
	} else {
		lr.shrink() // the line returned last time is no longer in use
		frag, err = lr.r.ReadSlice('\n')
		if err == nil && len(frag)-1 <= lr.max {
			return frag[:len(frag)-1], nil // common case: the line fits the buffer, no copy
		}
		lr.buf = append(lr.buf[:0], frag...)
	}
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
	if len(lr.buf) > 0 && !errors.Is(err, io.EOF) {
		lr.partial = true // interrupted mid-line: the rest comes with the next call
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

// Buffered returns the number of bytes that can be read without blocking: when it is
// zero, the next ReadLine may wait for the peer.
func (lr *LineReader) Buffered() int { return lr.r.Buffered() }

// LineWriter writes one message per line. It is safe for concurrent use and lines never
// interleave. Writes coalesce: while one goroutine is in the write system call, others
// append to a buffer that goes out in the next one (group commit), and while the writer
// is corked (see Cork) lines only accumulate. Under load many messages then share one
// system call; alone, a message is written at once.
type LineWriter struct {
	mu       sync.Mutex // guards the fields below
	w        io.Writer
	buf      []byte // lines waiting to be written
	spare    []byte // the other buffer, reused while buf is being written
	corks    int
	flushing bool  // a goroutine is writing; it will also write what is appended meanwhile
	err      error // sticky: the first write error
}

// NewLineWriter returns a writer of newline-delimited messages.
func NewLineWriter(w io.Writer) *LineWriter { return &LineWriter{w: w} }

// Write encodes m and queues it followed by a newline; unless the writer is corked or
// another goroutine is flushing, it is written before Write returns.
func (lw *LineWriter) Write(m *Message) error {
	lw.mu.Lock()
	if lw.err != nil {
		err := lw.err
		lw.mu.Unlock()
		return err
	}
	n := len(lw.buf)
	b, err := m.Append(lw.buf)
	if err != nil {
		lw.buf = b[:n]
		lw.mu.Unlock()
		return err
	}
	lw.buf = append(b, '\n')
	return lw.kickAndUnlock()
}

// WriteRaw queues an already encoded single-line message followed by a newline.
func (lw *LineWriter) WriteRaw(line []byte) error {
	lw.mu.Lock()
	if lw.err != nil {
		err := lw.err
		lw.mu.Unlock()
		return err
	}
	lw.buf = append(append(lw.buf, line...), '\n')
	return lw.kickAndUnlock()
}

// Cork holds writes back until the matching Uncork. A reader that is about to handle a
// burst of messages already in its buffer corks the writers it feeds, so that the
// messages it produces leave in one system call.
func (lw *LineWriter) Cork() {
	lw.mu.Lock()
	lw.corks++
	lw.mu.Unlock()
}

// Uncork releases one Cork; the last one writes what accumulated.
func (lw *LineWriter) Uncork() error {
	lw.mu.Lock()
	if lw.corks > 0 {
		lw.corks--
	}
	return lw.kickAndUnlock()
}

// kickAndUnlock writes the buffer unless corked or someone else is writing, then unlocks.
func (lw *LineWriter) kickAndUnlock() error {
	if lw.corks > 0 || lw.flushing {
		lw.mu.Unlock()
		return nil
	}
	for len(lw.buf) > 0 && lw.err == nil {
		out := lw.buf
		lw.buf = lw.spare[:0]
		lw.flushing = true
		lw.mu.Unlock()
		_, err := lw.w.Write(out)
		lw.mu.Lock()
		lw.flushing = false
		if err != nil {
			lw.err = err
		}
		if cap(out) <= 1<<20 {
			lw.spare = out[:0]
		} else {
			lw.spare = nil // do not pin the memory of one huge message
		}
	}
	err := lw.err
	lw.mu.Unlock()
	return err
}
