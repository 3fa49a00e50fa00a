// Package h1 is a lean HTTP/1.1 server for the proxy's hot path: keep-alive POSTs with a
// Content-Length body, GET event streams and DELETEs, served to an ordinary http.Handler
// without net/http's per-request costs (a background read goroutine per request, a
// deadline set three times, a header map built from a general MIME parser).
//
// It serves only what it can read without doubt. A connection whose next request is
// anything else (HTTP/1.0, a chunked or Expect body, an Upgrade, other methods, a folded,
// malformed or unusually large head, a missing or doubled Host or Content-Length) is
// handed, with every byte read so far, to a net/http server with the same handler, which
// serves it from then on. The two never share a connection, so a request is always read by
// exactly one parser, and nothing the fast path cannot vouch for reaches the handler
// through it.
//
// The syntax rules it reads heads by (line ends, tokens, field values, Content-Length,
// connection options, canonical names) are internal/httpsyntax's, which internal/h1client
// reads response heads by too.
//
// A request's context ends when the handler returns, when the server closes, and when the
// client goes away: that is watched as soon as the handler streams (flushes before the end
// of its body) or after WatchDelay, whichever comes first, so a call answered in
// microseconds costs no watch at all.
package h1

import (
	"bufio"
	"context"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

const (
	readBufSize  = 4 << 10 // a head must fit in it, or the connection goes to net/http
	writeBufSize = 4 << 10
	// maxDiscard is how much of a body the handler did not read is read and dropped to keep
	// the connection; past it, the connection closes after the response.
	maxDiscard = 256 << 10
	maxHeaders = 64
)

// Server serves HTTP/1.1 on a listener; the zero value of each option takes its default.
type Server struct {
	Handler http.Handler
	// ReadHeaderTimeout bounds the time to read a request's head once it has begun.
	ReadHeaderTimeout time.Duration // default 10s
	// IdleTimeout closes a keep-alive connection without a request for this long.
	IdleTimeout time.Duration // default 2m
	// WatchDelay is how long a request that has not streamed runs before the server
	// starts watching its connection for the client going away.
	WatchDelay time.Duration // default 20ms
	// ErrorLog receives net/http's own errors for handed-over connections (nil: stderr).
	ErrorLog *log.Logger
	// IdleGrace is how long Shutdown leaves the idle keep-alive connections open (0:
	// it closes them at once). Closing one races with a request its client may be
	// sending on it, which is then lost without an answer (a POST is not retried); in the
	// grace each connection that gets a request is answered, with Connection: close, and
	// closes after it. A load balancer that reuses connections (HAProxy) takes a stopping
	// server out of rotation meanwhile: it refuses new connections.
	IdleGrace time.Duration

	fallback *http.Server
	handoff  *handoffListener

	mu       sync.Mutex
	ln       net.Listener
	conns    map[*conn]struct{}
	closing  atomic.Bool
	closed   chan struct{}
	initOnce sync.Once
	baseCtx  context.Context
	cancel   context.CancelFunc
}

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = http.ErrServerClosed

func (s *Server) init() {
	s.initOnce.Do(func() {
		if s.ReadHeaderTimeout <= 0 {
			s.ReadHeaderTimeout = 10 * time.Second
		}
		if s.IdleTimeout <= 0 {
			s.IdleTimeout = 2 * time.Minute
		}
		if s.WatchDelay <= 0 {
			s.WatchDelay = 20 * time.Millisecond
		}
		s.conns = map[*conn]struct{}{}
		s.closed = make(chan struct{})
		s.baseCtx, s.cancel = context.WithCancel(context.Background())
		s.handoff = &handoffListener{conns: make(chan net.Conn), done: s.closed}
		s.fallback = &http.Server{Handler: s.Handler, ReadHeaderTimeout: s.ReadHeaderTimeout, IdleTimeout: s.IdleTimeout}
		s.fallback.ErrorLog = s.ErrorLog
	})
}

// Serve accepts connections on ln until Shutdown or Close; it always returns an error,
// ErrServerClosed after those.
func (s *Server) Serve(ln net.Listener) error {
	s.init()
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.ln = ln
	s.handoff.addr = ln.Addr()
	s.mu.Unlock()
	go s.fallback.Serve(s.handoff) // returns once the server closes

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			// EMFILE and friends: net reports them as Temporary, the only way to tell.
			if te, ok := err.(interface{ Temporary() bool }); ok && te.Temporary() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := newConn(s, nc)
		s.mu.Lock()
		if s.closing.Load() {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		go c.serve()
	}
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Shutdown stops accepting, closes idle connections, and waits until the requests in
// flight have finished (their connections then close) or ctx ends, which it returns.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.stopAccepting()
	ferr := make(chan error, 1)
	go func() { ferr <- s.fallback.Shutdown(ctx) }()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	graceEnd := time.Now().Add(s.IdleGrace)
	for {
		if s.closeIdle(time.Now().Before(graceEnd)) == 0 {
			return <-ferr
		}
		select {
		case <-ctx.Done():
			<-ferr
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Close closes the listener and every connection at once.
func (s *Server) Close() error {
	s.init()
	s.stopAccepting()
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	return s.fallback.Close()
}

func (s *Server) stopAccepting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Swap(true) {
		return
	}
	close(s.closed)
	if s.ln != nil {
		s.ln.Close()
	}
}

// closeIdle closes the connections waiting for a request (none in the grace) and
// returns how many remain.
func (s *Server) closeIdle(grace bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if grace {
		return len(s.conns)
	}
	for c := range s.conns {
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.nc.Close()
		}
	}
	return len(s.conns)
}

// handoffListener is the listener the net/http fallback serves: it yields the
// connections the fast path hands over.
type handoffListener struct {
	conns chan net.Conn
	done  <-chan struct{}
	addr  net.Addr
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error { return nil }
func (l *handoffListener) Addr() net.Addr {
	if l.addr == nil {
		return &net.TCPAddr{}
	}
	return l.addr
}

// give hands c to net/http; false when the server is closing (c is then closed).
func (l *handoffListener) give(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		c.Close()
		return false
	}
}

// replayConn is a handed-over connection: what the fast path had buffered, then the rest.
type replayConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *replayConn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p)
		}
		c.r = nil
	}
	return c.Conn.Read(p)
}

// CloseWrite lets net/http half-close a handed-over connection before closing it, as
// it does its own (so a response is not lost to a reset).
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
