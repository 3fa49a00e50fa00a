package h1client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http/httputil"
)

// body is a response body read by the fast path: a known length, chunked, or running to
// the connection's end. Its connection goes back to the pool when it has been read to its
// end, and is closed when the body is closed before that. Read and Close must not be
// called concurrently.
type body struct {
	c        *conn
	stop     func() bool // ends the request's cancellation watch; nil: none
	abort    *Abort      // the request's Abort (Send), or nil
	left     int64       // bytes of a length-framed body still to read; -1: to the end
	chunked  bool
	cr       io.Reader // the chunked body's decoder
	reusable bool      // the connection may carry another request after this body
	done     bool      // the connection has been pooled or closed
	err      error     // what Read returns from now on
}

func newChunkedReader(r io.Reader) io.Reader { return httputil.NewChunkedReader(r) }

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	switch {
	case b.chunked:
		n, err := b.cr.Read(p)
		if err == io.EOF {
			if terr := b.readTrailer(); terr != nil {
				return n, b.fail(terr)
			}
			b.err = io.EOF
			b.finish()
			return n, io.EOF
		}
		if err != nil {
			return n, b.fail(err)
		}
		return n, nil
	case b.left >= 0:
		if b.left == 0 {
			b.err = io.EOF
			b.finish()
			return 0, io.EOF
		}
		if int64(len(p)) > b.left {
			p = p[:b.left]
		}
		n, err := b.c.br.Read(p)
		b.left -= int64(n)
		if b.left == 0 {
			b.err = io.EOF
			b.finish()
			return n, io.EOF
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return n, b.fail(err)
		}
		return n, nil
	default:
		n, err := b.c.br.Read(p)
		if err == io.EOF {
			b.err = io.EOF
			b.finish()
			return n, io.EOF
		}
		if err != nil {
			return n, b.fail(err)
		}
		return n, nil
	}
}

// readTrailer reads what follows a chunked body's last chunk: trailer fields (dropped)
// up to the blank line.
func (b *body) readTrailer() error {
	total := 0
	for {
		line, err := b.c.br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading the chunked body's trailer: %w", err)
		}
		total += len(line)
		if total > maxTrailer {
			return errors.New("the chunked body's trailer is too large")
		}
		if bytes.Equal(line, []byte("\r\n")) || bytes.Equal(line, []byte("\n")) {
			return nil
		}
	}
}

// fail ends the body with err (ErrAborted when its Abort cut it short); the connection
// is closed.
func (b *body) fail(err error) error {
	if b.abort != nil && b.abort.Aborted() {
		err = fmt.Errorf("%w (%v)", ErrAborted, err)
	}
	b.err = err
	b.reusable = false
	b.finish()
	return err
}

// finish hands the connection back: to the pool when the body was read to its end
// cleanly, the request's cancellation did not fire, and nothing unasked-for follows.
func (b *body) finish() {
	if b.done {
		return
	}
	b.done = true
	watchStopped := endWatch(b.stop, b.abort)
	c := b.c
	if b.reusable && watchStopped && b.err == io.EOF && c.br.Buffered() == 0 && (b.left <= 0 || b.chunked) {
		c.t.putConn(c)
		return
	}
	c.nc.Close()
}

// Close implements io.Closer: a body not read to its end closes its connection (what
// is left of it would have to be read first).
func (b *body) Close() error {
	if b.err == nil {
		b.err = errors.New("read on a closed response body")
	}
	b.finish()
	return nil
}

// fallbackBody is the body of a response net/http's reader read: the connection goes
// back to the pool when it has been read to its end.
type fallbackBody struct {
	rc       io.ReadCloser
	c        *conn
	stop     func() bool // as body's
	abort    *Abort      //
	reusable bool
	eof      bool
	done     bool
}

func (b *fallbackBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
		b.finish()
	} else if err != nil {
		if b.abort != nil && b.abort.Aborted() {
			err = fmt.Errorf("%w (%v)", ErrAborted, err)
		}
		b.reusable = false
		b.finish()
	}
	return n, err
}

func (b *fallbackBody) finish() {
	if b.done {
		return
	}
	b.done = true
	watchStopped := endWatch(b.stop, b.abort)
	if b.reusable && b.eof && watchStopped && b.c.br.Buffered() == 0 {
		b.c.t.putConn(b.c)
		return
	}
	b.c.nc.Close()
}

// Close implements io.Closer.
func (b *fallbackBody) Close() error {
	b.finish()
	return b.rc.Close()
}

// endWatch ends a request's cancellation watch (stop, a context's) and its Abort's hold
// on the connection, whichever it has, and reports whether neither fired: only then may
// the connection carry another request.
func endWatch(stop func() bool, a *Abort) bool {
	ok := true
	if stop != nil {
		ok = stop()
	}
	if a != nil {
		ok = a.detach() && ok
	}
	return ok
}
