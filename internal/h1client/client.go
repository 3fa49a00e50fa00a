// Package h1client is a lean HTTP/1.1 client for plain-http upstreams: an
// http.RoundTripper that writes a request head without reflection or sorting, in one
// write with its body, and reads the answer on the calling goroutine (no read and write
// goroutine pair per connection), reusing keep-alive connections from a LIFO pool.
//
// It serves only what it can do exactly as net/http would: "http" URLs, requests whose
// body length is known, and response heads of the common shape (parseHead); any other
// request goes to Fallback, and any other response head is read by net/http's
// http.ReadResponse on the same connection. It does not follow redirects, proxy, pool
// per TLS configuration, compress or speak HTTP/2: the caller sends to Fallback
// whatever needs those. The syntax rules it writes request heads and reads response
// heads by are internal/httpsyntax's, shared with internal/h1.
//
// A request is never sent twice unless it provably never left: the connection was
// reused from the pool, and writing to it failed with not one byte written because the
// server had already closed or reset it. A request that may have reached the server (a
// reused connection that answered nothing, a timeout, a cancellation) fails with an
// error; it is not retried, since a POST (a tool call) need not be idempotent.
package h1client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/httpsyntax"
)

// Defaults of the zero Transport's settings.
const (
	defaultDialTimeout    = 10 * time.Second
	defaultKeepAlive      = 30 * time.Second
	defaultMaxIdlePerHost = 256
	defaultIdleTimeout    = 90 * time.Second

	// probeIdle: a pooled connection idle for longer is checked (one non-blocking peek)
	// before it carries a request, so that one the server has closed meanwhile is
	// dropped instead of failing the request. Under load a connection is reused within
	// microseconds and skips the check; servers close idle connections after seconds.
	probeIdle = 10 * time.Millisecond
	// keepAliveMargin is taken off a server's Keep-Alive timeout: a connection that old
	// is not reused, as the server may be closing it at that very moment.
	keepAliveMargin = time.Second

	readBufSize = 16 << 10
	// maxWriteAttempts bounds the sends of a request that provably never left.
	maxWriteAttempts = 3
	// maxInformational bounds the 1xx answers skipped before the final one.
	maxInformational = 5
	// maxTrailer bounds the trailer of a chunked body.
	maxTrailer = 64 << 10
)

var aLongTimeAgo = time.Unix(1, 0)

// Transport is an http.RoundTripper for plain-http upstreams (see the package doc). The
// zero value is not usable: set Fallback. Its fields must not change after first use;
// its methods are safe for concurrent use.
type Transport struct {
	// Fallback carries every request this transport does not serve itself (https, a
	// body of unknown length). Required.
	Fallback http.RoundTripper
	// DialTimeout bounds a TCP connect; zero: 10s.
	DialTimeout time.Duration
	// MaxIdlePerHost bounds the idle connections kept per host:port; zero: 256.
	MaxIdlePerHost int
	// IdleTimeout closes a connection idle this long; zero: 90s.
	IdleTimeout time.Duration

	mu     sync.Mutex // guards idle, sweep
	idle   map[string][]*conn
	sweep  *time.Timer // closes expired idle connections while any are pooled
	dials  atomic.Int64
	reuses atomic.Int64
}

var _ http.RoundTripper = (*Transport)(nil)

// Stats counts what a transport did since it was made.
type Stats struct {
	Dials  int64 // TCP connections opened
	Reuses int64 // requests sent on a pooled connection
}

// Stats returns the transport's counts.
func (t *Transport) Stats() Stats { return Stats{Dials: t.dials.Load(), Reuses: t.reuses.Load()} }

// conn is one connection; it belongs to the pool while idle, and to one request (and
// then its response body) otherwise.
type conn struct {
	t      *Transport
	key    string
	nc     net.Conn
	br     *bufio.Reader
	since  time.Time // returned to the pool at
	maxAge time.Time // not reused from then on (the server's Keep-Alive timeout); zero: no limit
	reused bool
	raw    syscall.RawConn // nc's, once a probe (alive) has needed it
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" ||
		(req.Body != nil && req.Body != http.NoBody && req.ContentLength <= 0) {
		return t.Fallback.RoundTrip(req)
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err // not sent: a pooled connection's write would race the cancellation
	}
	key := hostPort(req.URL.Host)
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	bp := bufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledBuf { // one large request must not pin its buffer
			bufPool.Put(bp)
		}
	}()
	wire, err := appendRequest((*bp)[:0], req, body)
	*bp = wire
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		c, err := t.getConn(ctx, key)
		if err != nil {
			return nil, t.failure(ctx, err)
		}
		stop := func() bool { return true }
		if ctx.Done() != nil {
			nc := c.nc
			stop = context.AfterFunc(ctx, func() { nc.SetDeadline(aLongTimeAgo) })
		}
		n, err := c.nc.Write(wire)
		if err != nil {
			stop()
			c.nc.Close()
			if c.reused && n == 0 && attempt < maxWriteAttempts && ctx.Err() == nil && peerClosed(err) {
				continue // provably never left: the server had closed the idle connection
			}
			return nil, t.failure(ctx, fmt.Errorf("sending the request: %w", err))
		}
		resp, err := c.readResponse(req, stop)
		if err != nil {
			stop()
			c.nc.Close()
			if c.reused && errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w (on a reused connection; the request may have reached the server, so it is not sent again)", err)
			}
			return nil, t.failure(ctx, err)
		}
		return resp, nil
	}
}

// maxPooledBuf bounds the request buffers kept for reuse.
const maxPooledBuf = 64 << 10

// bufPool holds request buffers (*[]byte): a request's head and body are built in one
// and written in one system call.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// failure prefers the context's reason to the deadline error its cancellation caused.
func (t *Transport) failure(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// peerClosed reports whether a write failed because the server had closed or reset the
// connection.
func peerClosed(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// readBody reads a request's body whole (its length is known) and closes it, as a
// RoundTripper must.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	if b, ok := req.Body.(*Body); ok && b.Len() == len(b.b) && int64(len(b.b)) == req.ContentLength {
		return b.b, nil // unread: its bytes are the body, no copy
	}
	b := make([]byte, req.ContentLength)
	if _, err := io.ReadFull(req.Body, b); err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	return b, nil
}

// Body is a request body held in memory: this transport takes its bytes as they are
// instead of reading them into a copy; any other reader (net/http, for a request sent
// to Fallback) reads it as a bytes.Reader. The bytes must not change until the request
// is done.
type Body struct {
	bytes.Reader
	b []byte
}

// NewBody returns a request body of b, to go with ContentLength len(b).
func NewBody(b []byte) *Body {
	body := &Body{b: b}
	body.Reset(b)
	return body
}

// Close implements io.Closer.
func (*Body) Close() error { return nil }

func hostPort(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	return net.JoinHostPort(host, "80")
}

// appendRequest appends the request's head and body to b; a method, host or field that
// cannot be written as it is (a line break in a value) is refused.
func appendRequest(b []byte, req *http.Request, body []byte) ([]byte, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !httpsyntax.ValidName(method) {
		return b, fmt.Errorf("invalid method %q", method)
	}
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !httpsyntax.ValidValue(host) {
		return b, fmt.Errorf("invalid Host %q", host)
	}
	b = append(b, host...)
	b = append(b, "\r\n"...)
	ua := false
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Trailer", "Te", "Upgrade":
			continue // this transport sets the framing
		case "User-Agent":
			ua = true
		}
		if !httpsyntax.ValidName(k) {
			return b, fmt.Errorf("invalid header field name %q", k)
		}
		for _, v := range vs {
			if !httpsyntax.ValidValue(v) {
				return b, fmt.Errorf("invalid header field value for %q", k)
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, httpsyntax.TrimOWS(v)...)
			b = append(b, "\r\n"...)
		}
	}
	if !ua {
		b = append(b, "User-Agent: Go-http-client/1.1\r\n"...)
	}
	if body != nil || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	if req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...), nil
}

// readResponse reads the answer's head; its body reads on from the connection, which
// goes back to the pool once the body has been read to its end. stop ends the
// cancellation watch.
func (c *conn) readResponse(req *http.Request, stop func() bool) (*http.Response, error) {
	for informational := 0; ; informational++ {
		h, n, err := c.readHead(true)
		if err != nil {
			return nil, err
		}
		if n < 0 { // not the fast path's: net/http reads it
			resp, err := http.ReadResponse(c.br, req)
			if err != nil {
				return nil, fmt.Errorf("reading the response: %w", err)
			}
			if resp.StatusCode/100 == 1 && resp.StatusCode != http.StatusSwitchingProtocols && informational < maxInformational {
				continue
			}
			resp.Body = &fallbackBody{rc: resp.Body, c: c, stop: stop, reusable: !resp.Close && !req.Close && resp.ProtoAtLeast(1, 1)}
			return resp, nil
		}
		if _, err := c.br.Discard(n); err != nil {
			return nil, err
		}
		if h.status/100 == 1 {
			if h.status == http.StatusSwitchingProtocols || informational >= maxInformational {
				return nil, fmt.Errorf("unexpected HTTP %d", h.status)
			}
			continue
		}
		resp := &http.Response{
			Status:        strconv.Itoa(h.status) + " " + h.reason,
			StatusCode:    h.status,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        h.header,
			ContentLength: h.length,
			Close:         h.close,
			Request:       req,
		}
		if h.idleFor > 0 {
			c.maxAge = time.Now().Add(time.Duration(h.idleFor)*time.Second - keepAliveMargin)
		}
		b := &body{c: c, stop: stop, left: h.length, chunked: h.chunked, reusable: !h.close && !req.Close}
		switch {
		case h.status == http.StatusNoContent || h.status == http.StatusNotModified || req.Method == http.MethodHead:
			b.left, b.chunked = 0, false
			resp.ContentLength = 0
			if h.status != http.StatusNoContent && h.status != http.StatusNotModified {
				resp.ContentLength = h.length
			}
		case h.chunked:
			resp.TransferEncoding = []string{"chunked"}
			resp.ContentLength = -1
			b.cr = newChunkedReader(c.br)
		case h.length < 0:
			b.reusable = false // the body runs to the connection's end
			resp.Close = true
		}
		resp.Body = b
		if b.left == 0 && !b.chunked {
			b.err = io.EOF
			b.finish()
			resp.Body = http.NoBody
		}
		return resp, nil
	}
}

// readHead waits for a whole head in the read buffer and parses it (with its fields in
// h.header, or only its status and framing: see parseHead). n is its length,
// or -1 when net/http must read it (an unusual head, which is then in the buffer whole,
// so that net/http's reader, which has no limit of its own, reads no more than the
// buffer's size). A head larger than the buffer is refused.
func (c *conn) readHead(fields bool) (head, int, error) {
	if _, err := c.br.Peek(1); err != nil {
		return head{}, 0, fmt.Errorf("reading the response: %w", err)
	}
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		switch n := httpsyntax.IndexHeadEnd(buf); {
		case n == -2:
			if bytes.Contains(buf, []byte("\n\n")) || bytes.Contains(buf, []byte("\n\r\n")) {
				return head{}, -1, nil // bare LFs, but all there: net/http reads those
			}
		case n > 0:
			h, ok := parseHead(buf[:n], fields)
			if !ok {
				return head{}, -1, nil
			}
			return h, n, nil
		}
		if len(buf) >= c.br.Size() {
			return head{}, 0, fmt.Errorf("the response head exceeds %d bytes", c.br.Size())
		}
		if _, err := c.br.Peek(len(buf) + 1); err != nil {
			return head{}, 0, fmt.Errorf("reading the response head: %w", err)
		}
	}
}

// getConn takes the most recently pooled live connection to key, or dials one.
func (t *Transport) getConn(ctx context.Context, key string) (*conn, error) {
	now := time.Now()
	for {
		t.mu.Lock()
		stack := t.idle[key]
		if len(stack) == 0 {
			t.mu.Unlock()
			break
		}
		c := stack[len(stack)-1]
		stack[len(stack)-1] = nil
		t.idle[key] = stack[:len(stack)-1]
		t.mu.Unlock()
		switch {
		case !c.maxAge.IsZero() && !now.Before(c.maxAge), now.Sub(c.since) >= t.idleTimeout():
			c.nc.Close()
			continue
		case now.Sub(c.since) >= probeIdle && !alive(c):
			c.nc.Close()
			continue
		}
		c.reused = true
		t.reuses.Add(1)
		return c, nil
	}
	d := net.Dialer{Timeout: t.dialTimeout(), KeepAlive: defaultKeepAlive}
	nc, err := d.DialContext(ctx, "tcp", key)
	if err != nil {
		return nil, err
	}
	t.dials.Add(1)
	return &conn{t: t, key: key, nc: nc, br: bufio.NewReaderSize(nc, readBufSize)}, nil
}

// putConn pools c for the next request to its host, or closes it when the pool is full.
func (t *Transport) putConn(c *conn) {
	c.since = time.Now()
	c.reused = false
	t.mu.Lock()
	if t.idle == nil {
		t.idle = make(map[string][]*conn)
	}
	stack := t.idle[c.key]
	if len(stack) >= t.maxIdlePerHost() {
		t.mu.Unlock()
		c.nc.Close()
		return
	}
	t.idle[c.key] = append(stack, c)
	if t.sweep == nil {
		t.sweep = time.AfterFunc(t.idleTimeout()/2, t.sweepIdle)
	}
	t.mu.Unlock()
}

// sweepIdle closes the pooled connections idle for longer than IdleTimeout (the oldest
// are at the bottom of each stack) and runs again while any remain.
func (t *Transport) sweepIdle() {
	now := time.Now()
	var expired []*conn
	t.mu.Lock()
	for key, stack := range t.idle {
		i := 0
		for i < len(stack) && now.Sub(stack[i].since) >= t.idleTimeout() {
			i++
		}
		expired = append(expired, stack[:i]...)
		rest := append(stack[:0], stack[i:]...)
		clear(stack[len(rest):])
		if len(rest) == 0 {
			delete(t.idle, key)
		} else {
			t.idle[key] = rest
		}
	}
	if len(t.idle) > 0 {
		t.sweep.Reset(t.idleTimeout() / 2)
	} else {
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, c := range expired {
		c.nc.Close()
	}
}

// CloseIdleConnections closes every pooled connection.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, stack := range idle {
		for _, c := range stack {
			c.nc.Close()
		}
	}
	if ci, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

func (t *Transport) dialTimeout() time.Duration {
	if t.DialTimeout > 0 {
		return t.DialTimeout
	}
	return defaultDialTimeout
}

func (t *Transport) maxIdlePerHost() int {
	if t.MaxIdlePerHost > 0 {
		return t.MaxIdlePerHost
	}
	return defaultMaxIdlePerHost
}

func (t *Transport) idleTimeout() time.Duration {
	if t.IdleTimeout > 0 {
		return t.IdleTimeout
	}
	return defaultIdleTimeout
}
