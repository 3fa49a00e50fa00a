package server

import (
	"errors"
	"io"
	"sync"
	"time"
)

// DefaultMaxClientBuffer is the default cap on the bytes a client session may leave
// unread (Options.MaxClientBuffer).
const DefaultMaxClientBuffer = 16 << 20

// errClientStuck is what writes to a session whose client stopped reading return.
var errClientStuck = errors.New("the client is not reading what the proxy sends it; disconnected")

// outbox decouples a client session's writers (the router's broadcast of an upstream's
// notifications, answers, relayed requests) from the client's connection: Write queues
// and returns at once, and one goroutine of the outbox's own writes the queue out in
// order. A client that stops reading therefore stalls nobody else, and what it leaves
// unread is bounded: when more than limit bytes are queued (a message arriving at an
// empty queue is always taken, however large), the outbox drops its queue, fails every
// later Write with errClientStuck and calls stuck once, which disconnects the client.
// Memory per client is bounded by limit plus one message.
type outbox struct {
	w     io.Writer
	limit int
	stuck func() // called once, from a writer's goroutine, when the limit is passed

	mu      sync.Mutex // guards the fields below
	queue   [][]byte   // unwritten chunks, in order
	queued  int        // their total size
	dead    bool       // stuck, failed or closed and written out: the queue is dropped and Writes fail
	closing bool       // Close was called: Writes fail, what is queued is still written
	wake    chan struct{}

	done chan struct{} // closed when the writing goroutine has returned
}

// newOutbox starts the writing goroutine; Close stops it.
func newOutbox(w io.Writer, limit int, stuck func()) *outbox {
	if limit <= 0 {
		limit = DefaultMaxClientBuffer
	}
	o := &outbox{w: w, limit: limit, stuck: stuck, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go o.run()
	return o
}

// Write queues a copy of p.
func (o *outbox) Write(p []byte) (int, error) {
	o.mu.Lock()
	if o.dead || o.closing {
		o.mu.Unlock()
		return 0, errClientStuck
	}
	if o.queued > 0 && o.queued+len(p) > o.limit {
		o.dead, o.queue, o.queued = true, nil, 0
		o.mu.Unlock()
		if o.stuck != nil {
			o.stuck()
		}
		return 0, errClientStuck
	}
	o.queue = append(o.queue, append([]byte(nil), p...))
	o.queued += len(p)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default: // already woken
	}
	return len(p), nil
}

// Buffered is the number of bytes queued and not yet written.
func (o *outbox) Buffered() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queued
}

// run writes the queue out until the outbox is stuck, closed and empty, or a write
// fails.
func (o *outbox) run() {
	defer close(o.done)
	for range o.wake {
		for {
			o.mu.Lock()
			if o.dead || (len(o.queue) == 0 && o.closing) {
				o.dead = true
				o.mu.Unlock()
				return
			}
			if len(o.queue) == 0 {
				o.mu.Unlock()
				break // wait to be woken
			}
			chunks := o.queue
			o.queue = nil
			o.mu.Unlock()
			for _, c := range chunks {
				_, err := o.w.Write(c)
				o.mu.Lock()
				if err != nil {
					o.dead, o.queue, o.queued = true, nil, 0
				} else if !o.dead {
					o.queued -= len(c)
				}
				dead := o.dead
				o.mu.Unlock()
				if dead {
					return
				}
			}
		}
	}
}

// Close stops taking writes; the writing goroutine ends once what is queued has been
// written (at once when the client is stuck). It returns when that happened or after
// wait, whichever is first: a write blocked on a client that reads nothing ends only
// when its connection is closed.
func (o *outbox) Close(wait time.Duration) {
	o.mu.Lock()
	o.closing = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-o.done:
	case <-t.C:
	}
}
