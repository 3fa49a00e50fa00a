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
// unread is bounded: when more than limit bytes are queued while the goroutine is in a
// write (a message arriving at an empty queue is always taken, however large), the
// outbox drops its queue, fails every later Write with errClientStuck and calls stuck
// once, which disconnects the client. A queue that grew before the goroutine ran at all
// may reach twice the limit first. Memory per client is bounded by twice the limit plus
// one message.
//
// With a room check (setRoom; a stdio client's stdout pipe), a Write that finds the
// outbox idle (nothing queued, nothing being written) and room enough in the pipe for
// its bytes writes them itself, without a copy and without waking the outbox's
// goroutine: that write cannot block, so the caller is never held up by the client, and
// what others write meanwhile is queued behind it, in order. Under load the outbox's
// goroutine writes what accumulated in one system call.
type outbox struct {
	w     io.Writer
	limit int
	stuck func() // called once, from a writer's goroutine, when the limit is passed
	// room reports whether n more bytes can be written to w now without blocking; nil:
	// Writes never write to w themselves. Set before the first Write.
	room func(n int) bool

	mu      sync.Mutex // guards the fields below
	queue   [][]byte   // unwritten chunks, in order
	queued  int        // their total size
	writing bool       // a goroutine (the outbox's own, or a Write) is writing to w
	dead    bool       // stuck, failed or closed and written out: the queue is dropped and Writes fail
	closing bool       // Close was called: Writes fail, what is queued is still written
	wake    chan struct{}
	joined  []byte // the outbox goroutine's buffer for writing several chunks at once

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

// setRoom enables direct writes (see outbox); call it before the first Write.
func (o *outbox) setRoom(room func(n int) bool) { o.room = room }

// Write queues a copy of p, or writes p itself when the outbox is idle and w has room.
func (o *outbox) Write(p []byte) (int, error) {
	o.mu.Lock()
	if o.dead || o.closing {
		o.mu.Unlock()
		return 0, errClientStuck
	}
	if o.room != nil && !o.writing && len(o.queue) == 0 {
		o.writing = true // what others write meanwhile queues behind p
		o.mu.Unlock()
		if o.room(len(p)) {
			return o.writeDirect(p)
		}
		o.mu.Lock()
		o.writing = false
		if o.dead || o.closing {
			o.mu.Unlock()
			return 0, errClientStuck
		}
	}
	// Over the limit, the client is stuck if the outbox's goroutine is in a write (the
	// client is not taking it). If the goroutine has not run since the queue began (a
	// burst faster than the scheduler), that proves nothing yet: the queue may reach
	// twice the limit before the client is judged.
	if over := o.queued + len(p); o.queued > 0 && over > o.limit && (o.writing || over > 2*o.limit) {
		o.dead, o.queue, o.queued = true, nil, 0
		o.mu.Unlock()
		if o.stuck != nil {
			o.stuck()
		}
		return 0, errClientStuck
	}
	o.queue = append(o.queue, append([]byte(nil), p...))
	o.queued += len(p)
	idle := !o.writing // a Write writing directly wakes the goroutine when it is done
	o.mu.Unlock()
	if idle {
		o.kick()
	}
	return len(p), nil
}

// writeDirect writes p on the caller's goroutine, which holds the writing; then the
// outbox's goroutine is woken for what was queued meanwhile.
func (o *outbox) writeDirect(p []byte) (int, error) {
	n, err := o.w.Write(p)
	o.mu.Lock()
	o.writing = false
	if err != nil {
		o.dead, o.queue, o.queued = true, nil, 0
	}
	more := len(o.queue) > 0 || o.dead || o.closing
	o.mu.Unlock()
	if more {
		o.kick()
	}
	return n, err
}

// kick wakes the outbox's goroutine.
func (o *outbox) kick() {
	select {
	case o.wake <- struct{}{}:
	default: // already woken
	}
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
			if o.writing {
				o.mu.Unlock()
				break // a direct write is in progress: its writer wakes us when done
			}
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
			o.writing = true
			o.mu.Unlock()
			for len(chunks) > 0 {
				out, k := o.join(chunks)
				chunks = chunks[k:]
				_, err := o.w.Write(out)
				o.mu.Lock()
				if err != nil {
					o.dead, o.queue, o.queued = true, nil, 0
				} else if !o.dead {
					o.queued -= len(out)
				}
				dead := o.dead
				if dead || len(chunks) == 0 {
					o.writing = false
				}
				o.mu.Unlock()
				if dead {
					return
				}
			}
		}
	}
}

// maxJoin bounds the bytes the outbox's goroutine gathers into one write; it keeps a
// buffer of up to maxKeptJoin for the next burst.
const (
	maxJoin     = 64 << 10
	maxKeptJoin = 8 << 10
)

// join returns the first chunks as one buffer (at most maxJoin bytes, or one larger
// chunk) and how many chunks it holds: a burst leaves in one system call. Only for a
// pipe (an outbox with a room check): its buffer is reused, and a writer of another
// kind may keep what it is given.
func (o *outbox) join(chunks [][]byte) ([]byte, int) {
	if o.room == nil || len(chunks) == 1 || len(chunks[0])+len(chunks[1]) > maxJoin {
		return chunks[0], 1
	}
	b := o.joined[:0]
	k := 0
	for k < len(chunks) && len(b)+len(chunks[k]) <= maxJoin {
		b = append(b, chunks[k]...)
		k++
	}
	if cap(b) <= maxKeptJoin {
		o.joined = b // reused next time; a burst's larger buffer is not kept
	}
	return b, k
}

// Close stops taking writes; the writing goroutine ends once what is queued has been
// written (at once when the client is stuck). It returns when that happened or after
// wait, whichever is first: a write blocked on a client that reads nothing ends only
// when its connection is closed.
func (o *outbox) Close(wait time.Duration) {
	o.mu.Lock()
	o.closing = true
	o.mu.Unlock()
	o.kick()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-o.done:
	case <-t.C:
	}
}
