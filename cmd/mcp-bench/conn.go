package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// errTimeout is returned by a call whose response did not arrive in time.
var errTimeout = errors.New("timed out waiting for the response")

// maxResponseSize bounds one message read from a child.
const maxResponseSize = 16 << 20

// conn is a lean pipelined JSON-RPC client over one stdio connection: any number of
// callers write requests through one concurrency-safe LineWriter, and one reader
// goroutine hands each response to the caller waiting for its id.
type conn struct {
	w      *jsonrpc.LineWriter
	nextID atomic.Int64

	mu      sync.Mutex                      // guards pending and err
	pending map[int64]chan *jsonrpc.Message // id -> the waiting caller's channel (capacity 1)
	err     error                           // why the connection ended; set once

	badMessages atomic.Int64 // undecodable lines from the child
	readerDone  chan struct{}

	onNotify atomic.Pointer[func(method string)] // told of each notification from the child, if set
}

func newConn(w io.Writer, r io.Reader) *conn {
	c := &conn{
		w:          jsonrpc.NewLineWriter(w),
		pending:    make(map[int64]chan *jsonrpc.Message, 1024),
		readerDone: make(chan struct{}),
	}
	go c.read(jsonrpc.NewLineReader(r, maxResponseSize))
	return c
}

// read is the one reader goroutine. It exits when the stream ends (the child exited or
// Close closed our end) and then fails every waiting call.
func (c *conn) read(lr *jsonrpc.LineReader) {
	defer close(c.readerDone)
	for {
		m, err := lr.Read()
		if err != nil {
			var se *json.SyntaxError
			if errors.Is(err, jsonrpc.ErrInvalidMessage) || errors.Is(err, jsonrpc.ErrMessageTooLarge) || errors.As(err, &se) {
				c.badMessages.Add(1)
				continue
			}
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
				err = io.ErrUnexpectedEOF
			}
			c.fail(fmt.Errorf("connection closed: %w", err))
			return
		}
		if m.Method != "" {
			if m.ID.IsValid() { // a request from the server: we offer nothing
				_ = c.w.Write(jsonrpc.NewErrorResponse(m.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "mcp-bench does not serve %s", m.Method)))
			}
			if f := c.onNotify.Load(); f != nil && !m.ID.IsValid() {
				(*f)(m.Method)
			}
			continue // notifications are otherwise ignored
		}
		id, ok := m.ID.Int64()
		if !ok {
			continue // not one of ours
		}
		c.mu.Lock()
		ch, ok := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ok {
			ch <- m // never blocks: capacity 1 and one response per registration
		}
	}
}

// fail ends the connection: later calls fail with err and every waiting caller is woken
// with a nil message.
func (c *conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	for id, ch := range c.pending {
		delete(c.pending, id)
		ch <- nil
	}
}

func (c *conn) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// wait blocks until the reader goroutine has exited.
func (c *conn) wait() { <-c.readerDone }

// notify sends a notification.
func (c *conn) notify(method string, params json.RawMessage) error {
	return c.w.Write(jsonrpc.NewNotification(method, params))
}

// caller issues calls one at a time over a conn, reusing its response channel and timer.
// A caller is used by one goroutine; many callers share a conn.
type caller struct {
	c       *conn
	ch      chan *jsonrpc.Message
	timer   *time.Timer
	timeout time.Duration
}

func newCaller(c *conn, timeout time.Duration) *caller {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &caller{c: c, ch: make(chan *jsonrpc.Message, 1), timer: t, timeout: timeout}
}

// call sends one request and waits for its response, the timeout or ctx. A JSON-RPC error
// response is returned as a message, not as an error.
func (k *caller) call(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	c := k.c
	id := c.nextID.Add(1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.pending[id] = k.ch
	c.mu.Unlock()
	if err := c.w.Write(jsonrpc.NewRequest(jsonrpc.IntID(id), method, params)); err != nil {
		k.abandon(id)
		return nil, fmt.Errorf("sending %s: %w", method, err)
	}
	k.timer.Reset(k.timeout)
	select {
	case m := <-k.ch:
		k.timer.Stop()
		if m == nil {
			return nil, c.closedErr()
		}
		return m, nil
	case <-k.timer.C:
		k.abandon(id)
		return nil, errTimeout
	case <-ctx.Done():
		k.timer.Stop()
		k.abandon(id)
		return nil, ctx.Err()
	}
}

// abandon withdraws the registration of id. If the reader (or fail) already took it, the
// message is on its way into k.ch: receive it so the channel is empty for the next call.
func (k *caller) abandon(id int64) {
	c := k.c
	c.mu.Lock()
	_, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if !ok {
		<-k.ch
	}
}
