package h1client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/httpsyntax"
)

// ErrAborted is what a request ended by its Abort fails with.
var ErrAborted = errors.New("the request was aborted")

// Abort ends a request sent with Send from another goroutine: a request not yet written
// is not sent, and one in flight has its connection's deadline set in the past, so that
// its write, its answer's head or its body fails at once (with ErrAborted) and the
// connection is closed, not reused. The zero value is ready; an Abort serves one request.
type Abort struct {
	mu      sync.Mutex    // guards the fields below
	nc      net.Conn      // the request's connection, from before its write until its answer is read or fails
	aborted bool          //
	done    chan struct{} // made by Done, closed by Abort
}

// Abort ends the request; it is safe to call more than once, and at any time.
func (a *Abort) Abort() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.aborted {
		return
	}
	a.aborted = true
	if a.nc != nil {
		a.nc.SetDeadline(aLongTimeAgo)
	}
	if a.done != nil {
		close(a.done)
	}
}

// Aborted reports whether Abort was called.
func (a *Abort) Aborted() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.aborted
}

// Done returns a channel closed by Abort (made on the first call).
func (a *Abort) Done() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done == nil {
		a.done = make(chan struct{})
		if a.aborted {
			close(a.done)
		}
	}
	return a.done
}

// attach lets Abort reach nc; false when the request is aborted already.
func (a *Abort) attach(nc net.Conn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.aborted {
		return false
	}
	a.nc = nc
	return true
}

// detach takes the connection back out of Abort's reach, and reports whether Abort had
// not touched it.
func (a *Abort) detach() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nc = nil
	return !a.aborted
}

// Reply is the answer to a request sent with Send: its status, its body's length (-1
// when not given) and its body, which must be closed (read to its end first, the
// connection is reused), even when empty.
type Reply struct {
	StatusCode    int
	ContentLength int64
	Body          io.ReadCloser

	head []byte         // the head as read (fast path): in the connection's buffer until Body is first read
	resp *http.Response // the answer net/http read (an unusual head), or nil
	body body           // Body on the fast path: one allocation with the Reply
}

// Field returns the value of the head's first field named name (in any case), without
// the whitespace around it; nil when there is none. It must be called before Body is
// first read or closed: the head's bytes are not copied, and the connection's buffer
// holds them only until then.
func (r *Reply) Field(name string) []byte {
	if r.resp != nil {
		if vs := r.resp.Header.Values(name); len(vs) > 0 {
			return []byte(vs[0])
		}
		return nil
	}
	_, rest, _ := httpsyntax.CutLine(r.head) // the status line
	for {
		line, next, ok := httpsyntax.CutLine(rest)
		if !ok || len(line) == 0 {
			return nil
		}
		rest = next
		if colon := bytes.IndexByte(line, ':'); colon == len(name) && httpsyntax.EqualFold(line[:colon], name) {
			return httpsyntax.TrimOWS(line[colon+1:])
		}
	}
}

// Header returns the head's fields as net/http would (a new map, for the rare answer
// whose fields are needed whole); like Field, before Body is first read or closed.
func (r *Reply) Header() http.Header {
	if r.resp != nil {
		return r.resp.Header
	}
	h, ok := parseHead(r.head, true)
	if !ok { // cannot be: the same bytes parsed before
		return http.Header{}
	}
	return h.header
}

// Send sends wire, a whole request (its head and body, written by the caller; see
// AppendField), to key (host:port) on a pooled connection or a new one, and returns the
// answer once its head is in. method is the request's (the answer to a HEAD has no
// body). a, when not nil, can abort the request from another goroutine.
//
// As with RoundTrip, the request is sent again only when it provably never left (see
// the package doc). Requests that need net/http (https, proxies) must not come here.
func (t *Transport) Send(key, method string, wire []byte, a *Abort) (*Reply, error) {
	for attempt := 1; ; attempt++ {
		if a != nil && a.Aborted() {
			return nil, ErrAborted
		}
		c, err := t.getConn(context.Background(), key)
		if err != nil {
			return nil, err
		}
		if a != nil && !a.attach(c.nc) {
			c.nc.Close()
			return nil, ErrAborted
		}
		n, err := c.nc.Write(wire)
		if err != nil {
			aborted := a != nil && !a.detach()
			c.nc.Close()
			if c.reused && n == 0 && attempt < maxWriteAttempts && !aborted && peerClosed(err) {
				continue // provably never left: the server had closed the idle connection
			}
			return nil, abortFailure(aborted, fmt.Errorf("sending the request: %w", err))
		}
		r, err := c.readReply(method, a)
		if err != nil {
			aborted := a != nil && !a.detach()
			c.nc.Close()
			if c.reused && errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w (on a reused connection; the request may have reached the server, so it is not sent again)", err)
			}
			return nil, abortFailure(aborted, err)
		}
		return r, nil
	}
}

// abortFailure prefers ErrAborted to the deadline error an abort caused.
func abortFailure(aborted bool, err error) error {
	if aborted {
		return fmt.Errorf("%w (%v)", ErrAborted, err)
	}
	return err
}

// readReply is readResponse for Send: the head's fields are not parsed into a map (the
// caller reads what it needs with Field), and the Reply is one allocation with its body.
func (c *conn) readReply(method string, a *Abort) (*Reply, error) {
	for informational := 0; ; informational++ {
		h, n, err := c.readHead(false)
		if err != nil {
			return nil, err
		}
		if n < 0 { // not the fast path's: net/http reads it
			resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
			if err != nil {
				return nil, fmt.Errorf("reading the response: %w", err)
			}
			if resp.StatusCode/100 == 1 && resp.StatusCode != http.StatusSwitchingProtocols && informational < maxInformational {
				continue
			}
			resp.Body = &fallbackBody{rc: resp.Body, c: c, abort: a, reusable: !resp.Close && resp.ProtoAtLeast(1, 1)}
			return &Reply{StatusCode: resp.StatusCode, ContentLength: resp.ContentLength, Body: resp.Body, resp: resp}, nil
		}
		if h.status/100 == 1 {
			if _, err := c.br.Discard(n); err != nil {
				return nil, err
			}
			if h.status == http.StatusSwitchingProtocols || informational >= maxInformational {
				return nil, fmt.Errorf("unexpected HTTP %d", h.status)
			}
			continue
		}
		r := &Reply{StatusCode: h.status, ContentLength: h.length}
		r.head, _ = c.br.Peek(n)
		if _, err := c.br.Discard(n); err != nil {
			return nil, err
		}
		if h.idleFor > 0 {
			c.maxAge = time.Now().Add(time.Duration(h.idleFor)*time.Second - keepAliveMargin)
		}
		b := &r.body
		*b = body{c: c, abort: a, left: h.length, chunked: h.chunked, reusable: !h.close}
		switch {
		case h.status == http.StatusNoContent || h.status == http.StatusNotModified || method == http.MethodHead:
			b.left, b.chunked = 0, false
			if h.status == http.StatusNoContent || h.status == http.StatusNotModified {
				r.ContentLength = 0
			}
		case h.chunked:
			r.ContentLength = -1
			b.cr = newChunkedReader(c.br)
		case h.length < 0:
			b.reusable = false // the body runs to the connection's end
		}
		r.Body = b // even when empty: the connection is pooled only once Field can no longer be called
		return r, nil
	}
}

// AppendField appends one field line "name: value\r\n" of a request head to b, or
// reports an error for a name that is not a token or a value holding a line break or
// another control byte. The value's surrounding whitespace is left out.
func AppendField[T string | []byte](b []byte, name string, value T) ([]byte, error) {
	if !httpsyntax.ValidName(name) {
		return b, fmt.Errorf("invalid header field name %q", name)
	}
	if !httpsyntax.ValidValue(value) {
		return b, fmt.Errorf("invalid header field value for %q", name)
	}
	b = append(b, name...)
	b = append(b, ": "...)
	b = append(b, httpsyntax.TrimOWS(value)...)
	return append(b, "\r\n"...), nil
}

// HostPort is the pool key of a URL's host (Send's key): host:port, port 80 by default.
func HostPort(host string) string { return hostPort(host) }
