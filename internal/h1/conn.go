package h1

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Connection states, for Shutdown: only an idle connection may be closed under its feet.
const (
	stateIdle int32 = iota
	stateActive
	stateClosed
)

var aLongTimeAgo = time.Unix(1, 0)

type conn struct {
	s     *Server
	nc    net.Conn
	cr    connReader
	br    *bufio.Reader
	bw    *bufio.Writer // from writerPool while a response is being written
	state atomic.Int32

	remote string
	hbuf   []byte // canonical header names being built

	// The request in flight: its context and the client-gone watch.
	cancel     context.CancelFunc
	timer      *time.Timer // starts the watch after WatchDelay
	mu         sync.Mutex
	inHandler  bool
	watching   bool
	watchDone  chan struct{}
	gone       bool        // the watch saw the client go away
	bodyDone   atomic.Bool // the body has been read to its end
	pipelined  atomic.Bool // more bytes were buffered after the body (no watch needed)
	bodyLeft   int64
	req        *http.Request
	tmpl       http.Request // parse fills it; each request is a copy with its context
	resp       response
	bodyReader body
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, remote: nc.RemoteAddr().String()}
	c.cr.c = c
	c.br = bufio.NewReaderSize(&c.cr, readBufSize)
	c.bodyReader.c = c
	return c
}

// connReader reads the connection, after the byte a watch may have read ahead.
type connReader struct {
	c          *conn
	pending    byte
	hasPending bool
}

func (r *connReader) Read(p []byte) (int, error) {
	if r.hasPending && len(p) > 0 {
		p[0] = r.pending
		r.hasPending = false
		return 1, nil
	}
	return r.c.nc.Read(p)
}

func (c *conn) serve() {
	handedOff := false
	defer func() {
		if c.timer != nil {
			c.timer.Stop()
		}
		if !handedOff {
			c.nc.Close()
		}
		c.s.forget(c)
	}()
	for {
		c.state.Store(stateIdle)
		if c.s.closing.Load() {
			return
		}
		if c.br.Buffered() == 0 {
			c.nc.SetReadDeadline(time.Now().Add(c.s.IdleTimeout))
			if _, err := c.br.Peek(1); err != nil {
				return
			}
		}
		if !c.state.CompareAndSwap(stateIdle, stateActive) {
			return // Shutdown closed it
		}
		head, slow, ok := c.readHead()
		if !ok {
			return
		}
		var req *http.Request
		if head != nil {
			req = c.parse(head)
		}
		if req == nil {
			// Not ours to read: net/http gets the connection with everything buffered.
			c.nc.SetReadDeadline(time.Time{})
			handedOff = c.s.handoff.give(&replayConn{Conn: c.nc, r: c.br})
			return
		}
		c.br.Discard(len(head))
		c.bodyDone.Store(false)
		c.pipelined.Store(false)
		if c.bodyLeft == 0 {
			c.endBody()
		}
		if slow || c.bodyLeft > int64(c.br.Buffered()) {
			// A body still to come has IdleTimeout to arrive (not the head's deadline).
			c.nc.SetReadDeadline(time.Now().Add(c.s.IdleTimeout))
		}
		if !c.serveRequest(req) {
			return
		}
	}
}

// readHead returns the request head (through its blank line) as it sits in the buffer,
// nil when net/http should read it (too large for the buffer, or lines ending in a bare
// LF); slow when it took more than one read (its deadline was set); ok false on a read
// error or timeout.
func (c *conn) readHead() (head []byte, slow, ok bool) {
	for {
		n := c.br.Buffered()
		buf, _ := c.br.Peek(n)
		switch i := indexHeadEnd(buf); {
		case i >= 0:
			return buf[:i], slow, true
		case i == -2:
			return nil, slow, true
		}
		if n >= readBufSize {
			return nil, slow, true
		}
		if !slow {
			c.nc.SetReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
			slow = true
		}
		if _, err := c.br.Peek(n + 1); err != nil {
			return nil, slow, false
		}
	}
}

// serveRequest runs the handler for req and finishes its response; false when the
// connection must close.
func (c *conn) serveRequest(req *http.Request) (keep bool) {
	ctx, cancel := context.WithCancel(c.s.baseCtx)
	c.cancel = cancel
	req = req.WithContext(ctx) // a copy of the connection's template
	c.req = req
	w := &c.resp
	w.reset(c, req, cancel)

	c.mu.Lock()
	c.inHandler, c.gone = true, false
	c.mu.Unlock()
	if c.timer == nil {
		c.timer = time.AfterFunc(c.s.WatchDelay, c.startWatch)
	} else {
		c.timer.Reset(c.s.WatchDelay)
	}

	panicked := true
	func() {
		defer func() {
			if !panicked {
				return
			}
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				c.s.logf("h1: panic serving %s: %v", c.remote, p)
			}
		}()
		c.s.Handler.ServeHTTP(w, req)
		panicked = false
	}()

	c.timer.Stop()
	c.stopWatch()
	cancel()
	c.cancel = nil
	c.req = nil
	if panicked {
		w.release()
		return false
	}
	keep = w.finish() && !c.gone
	if c.bodyLeft > 0 && keep {
		keep = c.discardBody()
	}
	w.release()
	return keep && !c.s.closing.Load()
}

// discardBody reads the rest of a body the handler left, if small enough to be worth it.
func (c *conn) discardBody() bool {
	if c.bodyLeft > maxDiscard {
		return false
	}
	c.nc.SetReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
	n, err := c.br.Discard(int(c.bodyLeft))
	c.bodyLeft -= int64(n)
	return err == nil
}

// startWatch begins watching the connection for the client going away, once the body
// is read and no pipelined request is buffered (the client is there, then).
func (c *conn) startWatch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.inHandler || c.watching || !c.bodyDone.Load() || c.pipelined.Load() || c.cr.hasPending {
		return
	}
	c.watching = true
	c.watchDone = make(chan struct{})
	c.nc.SetReadDeadline(time.Time{})
	go c.watch()
}

func (c *conn) watch() {
	defer close(c.watchDone)
	var b [1]byte
	n, err := c.nc.Read(b[:])
	c.mu.Lock()
	defer c.mu.Unlock()
	if n == 1 {
		c.cr.pending, c.cr.hasPending = b[0], true // the next request has begun
		return
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return // stopWatch
	}
	c.gone = true
	if c.cancel != nil && c.inHandler {
		c.cancel()
	}
}

// stopWatch ends the watch (if one runs) once the handler has returned.
func (c *conn) stopWatch() {
	c.mu.Lock()
	c.inHandler = false
	watching := c.watching
	if watching {
		c.nc.SetReadDeadline(aLongTimeAgo)
	}
	c.mu.Unlock()
	if watching {
		<-c.watchDone
		c.mu.Lock()
		c.watching = false
		c.mu.Unlock()
	}
}

// body is a request body of known length, read from the connection's buffer.
type body struct {
	c *conn
}

func (b *body) Read(p []byte) (int, error) {
	c := b.c
	if c.bodyLeft <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > c.bodyLeft {
		p = p[:c.bodyLeft]
	}
	n, err := c.br.Read(p)
	c.bodyLeft -= int64(n)
	if c.bodyLeft == 0 {
		c.endBody()
		if err == nil {
			err = io.EOF
		}
	} else if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *body) Close() error { return nil }

// endBody records that the body has been read, and whether a pipelined request follows.
func (c *conn) endBody() {
	c.pipelined.Store(c.br.Buffered() > 0)
	c.bodyDone.Store(true)
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
	}
}
