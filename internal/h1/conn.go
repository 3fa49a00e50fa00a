package h1

import (
	"bufio"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/httpsyntax"
)

// Connection states, for Shutdown: only an idle connection (between requests, or
// reading the head of the next one) may be closed under its feet.
const (
	stateIdle int32 = iota
	stateActive
	stateClosed
)

var aLongTimeAgo = time.Unix(1, 0)

// lingerTime bounds the wait for the client to read a response before a connection with
// unread input closes (closing at once would reset it, and the response could be lost).
const lingerTime = 500 * time.Millisecond

type conn struct {
	s     *Server
	nc    net.Conn
	ctx   context.Context // the server's, with ServerContextKey and LocalAddrContextKey
	cr    connReader
	br    *bufio.Reader
	bw    *bufio.Writer // from writerPool while a response is being written
	state atomic.Int32

	remote string
	linger bool // unread input at close: close the write side first and wait a little

	// The request in flight: its body, context and the client-gone watch.
	body        *body
	cancel      context.CancelFunc
	timer       *time.Timer // starts the watch after WatchDelay
	mu          sync.Mutex
	inHandler   bool
	watching    bool
	watchWanted bool // the timer fired before the body was read: watch when it is
	watchDone   chan struct{}
	gone        bool        // the watch saw the client go away
	bodyDone    atomic.Bool // the body has been read to its end
	pipelined   atomic.Bool // more bytes were buffered after the body (no watch needed)
	tmpl        http.Request
	lastPath    string // the last plain request target's path: the next one like it shares its string
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, remote: nc.RemoteAddr().String()}
	c.ctx = context.WithValue(context.WithValue(s.baseCtx, http.ServerContextKey, s.fallback),
		http.LocalAddrContextKey, nc.LocalAddr())
	c.cr.c = c
	c.br = bufio.NewReaderSize(&c.cr, readBufSize)
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
			c.close()
		}
		c.s.forget(c)
	}()
	for first := true; ; first = false {
		c.state.Store(stateIdle)
		if c.s.closing.Load() {
			return
		}
		if c.br.Buffered() == 0 {
			wait := c.s.IdleTimeout // between requests
			if first {
				wait = c.s.ReadHeaderTimeout // a new connection must say something soon
			}
			c.nc.SetReadDeadline(time.Now().Add(wait))
			if _, err := c.br.Peek(1); err != nil {
				return
			}
		}
		head, ok := c.readHead()
		if !ok {
			return
		}
		var req *http.Request
		if head != nil {
			req = c.parse(head)
		}
		// Active only once a whole head is read: Shutdown closes a stalled one.
		if !c.state.CompareAndSwap(stateIdle, stateActive) {
			return
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
		if c.body.left.Load() == 0 {
			c.endBody()
		}
		if !c.serveRequest(req) {
			return
		}
	}
}

// close closes the connection; with unread input it first closes the write side and
// drains for a moment, so the kernel does not reset a response the client has yet to read.
func (c *conn) close() {
	if c.linger {
		if cw, ok := c.nc.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			c.nc.SetReadDeadline(time.Now().Add(lingerTime))
			io.CopyN(io.Discard, c.nc, maxDiscard)
		}
	}
	c.nc.Close()
}

// readHead returns the request head (through its blank line) as it sits in the buffer,
// nil when net/http should read it (too large for the buffer, or lines ending in a bare
// LF); ok false on a read error or timeout. A head that takes more than one read has
// ReadHeaderTimeout from then on.
func (c *conn) readHead() (head []byte, ok bool) {
	slow := false
	for {
		n := c.br.Buffered()
		buf, _ := c.br.Peek(n)
		switch i := httpsyntax.IndexHeadEnd(buf); {
		case i >= 0:
			return buf[:i], true
		case i == -2:
			return nil, true
		}
		if n >= readBufSize {
			return nil, true
		}
		if !slow {
			c.nc.SetReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
			slow = true
		}
		if _, err := c.br.Peek(n + 1); err != nil {
			return nil, false
		}
	}
}

// serveRequest runs the handler for req and finishes its response; false when the
// connection must close. The body and the ResponseWriter are the request's own: one kept
// past the handler's return fails instead of touching the next request.
func (c *conn) serveRequest(req *http.Request) (keep bool) {
	ctx, cancel := context.WithCancel(c.ctx)
	req = req.WithContext(ctx) // a copy of the connection's template
	w := &response{c: c, header: make(http.Header, 4), length: -1, closeAfter: req.Close, cancel: cancel}

	c.mu.Lock()
	c.inHandler, c.gone, c.watchWanted, c.cancel = true, false, false, cancel
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
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.s.logf("h1: panic serving %s: %v\n%s", c.remote, p, buf)
			}
		}()
		c.s.Handler.ServeHTTP(w, req)
		panicked = false
	}()

	c.timer.Stop()
	c.stopWatch()
	cancel()
	c.mu.Lock()
	c.cancel = nil
	c.mu.Unlock()
	b := c.body
	b.closed.Store(true)
	if panicked {
		w.abandon()
		return false
	}
	keep = w.finish() && !c.gone
	if b.left.Load() > 0 {
		if keep {
			keep = c.discardBody()
		}
		c.linger = !keep
	}
	return keep && !c.s.closing.Load()
}

// discardBody reads the rest of a body the handler left, if small enough to be worth it.
func (c *conn) discardBody() bool {
	b := c.body
	left := b.left.Load()
	if left > maxDiscard {
		return false
	}
	c.nc.SetReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
	n, err := c.br.Discard(int(left))
	b.left.Add(-int64(n))
	return err == nil
}

// startWatch begins watching the connection for the client going away, once the body
// is read and no pipelined request is buffered (the client is there, then). Called
// before the body is read, it leaves a note for endBody to call it again.
func (c *conn) startWatch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.inHandler || c.watching || c.pipelined.Load() || c.cr.hasPending {
		return
	}
	if !c.bodyDone.Load() {
		c.watchWanted = true
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

// body is a request body of known length, read from the connection's buffer; it is
// closed when its handler returns.
type body struct {
	c      *conn
	left   atomic.Int64 // read by a response written from another goroutine
	closed atomic.Bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	left := b.left.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	c := b.c
	if int64(len(p)) > left {
		p = p[:left]
	}
	if c.br.Buffered() == 0 {
		// From the network: each read may wait IdleTimeout (a steady upload of any
		// length goes through; a stalled one does not hold the connection).
		c.nc.SetReadDeadline(time.Now().Add(c.s.IdleTimeout))
	}
	n, err := c.br.Read(p)
	if b.left.Add(-int64(n)) == 0 {
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

// endBody records that the body has been read, and whether a pipelined request follows;
// a watch asked for before that starts now.
func (c *conn) endBody() {
	c.pipelined.Store(c.br.Buffered() > 0)
	c.bodyDone.Store(true)
	c.mu.Lock()
	wanted := c.watchWanted && c.inHandler
	c.watchWanted = false
	c.mu.Unlock()
	if wanted {
		c.startWatch()
	}
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}
