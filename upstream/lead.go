package upstream

import (
	"errors"
	"os"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// Leader/follower read of a child's output.
//
// A caller that waits for its answer anyway and has nothing else to do meanwhile (the
// HTTP front end's handler of one request, see AllowInline) need not have the answer
// read by the reader goroutine and handed back to it: on a link whose reads can be cut
// short (transport.ReadInterrupter: a child's stdout), it reads the link itself while
// nobody else does. At concurrency 1 the answer is then read by the goroutine that wants
// it: no wake-up of a reader goroutine and no hand-off back.
//
// One goroutine at a time holds the read role: the reader goroutine (readLoop), or the
// goroutine of one such call, the leader, which reads until its own call is finished.
// Whatever the holder reads is handled as the reader goroutine would handle it, except
// that the answer to another waiting caller (a follower) is handed to that caller's
// goroutine, which passes it to done itself (so that many answers are written to their
// clients in parallel, not one after another by the reader). A leader whose call is
// answered passes the role to the newest follower, or to the reader goroutine when calls
// nobody waits for are in flight (their answers need a reader), or else leaves it free.
// A leader whose call is finished by another path (a timeout, a cancellation, the
// connection failing) is interrupted in its read and passes the role on likewise.
//
// While the role is free something must still read promptly what the child says on its
// own (notifications, requests, the end of its output): after idleReadGrace with the
// role free, the reader goroutine takes it, and keeps it until it has read everything
// available and only waiting callers (or none, after an inline call) are left.
// idleReadGrace is short enough to be prompt and longer than the gap between one call's
// answer and the next call of a busy client, so that a steady caller keeps leading.

// idleReadGrace is how long the read role may stay free before the reader goroutine
// takes it (each connection copies it when it starts; tests change it).
var idleReadGrace = time.Millisecond

// signal wakes the one goroutine waiting on ch (buffered, capacity 1; nil: nobody waits
// yet) without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// ensureReaderLocked gives the read role to the reader goroutine if nobody holds it:
// something was sent whose answer no caller will read itself. c.mu is held.
func (c *conn) ensureReaderLocked() {
	if c.holder == nil && !c.bgHolds {
		c.bgHolds = true
		signal(c.bgWake)
	}
}

// releaseLocked passes the read role on from its holder: to the newest follower, or to
// the reader goroutine when calls nobody waits for are in flight or the link's output
// ended (it ends the connection's reading), or leaves it free (the reader goroutine
// takes it after idleReadGrace). c.mu is held.
func (c *conn) releaseLocked() {
	c.holder, c.bgHolds = nil, false
	if c.interrupted {
		c.interrupted = false
		c.ri.ResumeRead()
	}
	if c.readErr == nil {
		if n := len(c.waiters); n > 0 {
			// The newest follower: its answer is likely the last to come, so it reads
			// (and hands over) the most answers before it passes the role on again.
			pc := c.waiters[n-1]
			c.waiters[n-1] = nil
			c.waiters = c.waiters[:n-1]
			pc.waiting = false
			c.holder = pc
			signal(pc.wake)
			return
		}
		if c.ownerless == 0 && c.closed == nil {
			// Free. The timer is armed lazily, not per release: re-arming a timer may
			// wake the runtime's poller (a system call), and a steady caller releases
			// the role after every call.
			c.freeSince = time.Now()
			if !c.idleArmed {
				c.idleArmed = true
				c.idle.Reset(c.idleGrace)
			}
			return
		}
	}
	c.bgHolds = true
	signal(c.bgWake)
}

// finishLocked records that pc left the pending table. A caller waiting in the conn is
// told: a leader is interrupted when its call was taken from elsewhere (abort), or passes
// the role on at once when it read its own outcome (it is the goroutine running this);
// a follower is woken, with the outcome (msg, err) to pass to done itself when hand is
// set. It reports whether the outcome was handed over (the taker must not call done).
// c.mu is held.
func (c *conn) finishLocked(pc *pendingCall, abort, hand bool, msg *jsonrpc.Message, err error) (handed bool) {
	if !pc.owned {
		c.ownerless--
		return false
	}
	pc.finished = true
	if pc.waiting {
		for i, w := range c.waiters {
			if w == pc {
				c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
				break
			}
		}
		pc.waiting = false
	}
	if c.holder == pc {
		if abort {
			if !c.interrupted {
				c.interrupted = true
				c.ri.InterruptRead()
			}
		} else {
			c.releaseLocked()
		}
		return false
	}
	if hand {
		pc.handed, pc.outMsg, pc.outErr = true, msg, err
	}
	signal(pc.wake)
	return hand
}

// await is where the caller of pc waits once its request is written: it takes the read
// role if it is free, or waits as a follower until its outcome is handed to it, the role
// is passed to it, or the call is finished elsewhere. It returns once pc is finished and
// its done has run, or is running on another goroutine.
func (c *conn) await(pc *pendingCall) {
	c.mu.Lock()
	switch {
	case pc.finished:
	case c.holder == nil && !c.bgHolds && c.readErr == nil:
		c.holder = pc
	default:
		c.waiters = append(c.waiters, pc)
		pc.waiting = true
	}
	for {
		if pc.handed {
			m, err := pc.outMsg, pc.outErr
			pc.handed, pc.outMsg, pc.outErr = false, nil, nil
			c.mu.Unlock()
			pc.done(m, err)
			return
		}
		if c.holder == pc {
			if pc.finished {
				c.releaseLocked()
				c.mu.Unlock()
				return
			}
			c.mu.Unlock()
			c.lead(pc)
			c.mu.Lock()
			continue
		}
		if pc.finished {
			c.mu.Unlock()
			return
		}
		if pc.wake == nil {
			pc.wake = make(chan struct{}, 1) // under c.mu, as every signal is
		}
		wake := pc.wake
		c.mu.Unlock()
		<-wake
		c.mu.Lock()
	}
}

// lead reads the link on the goroutine of pc's caller, which holds the read role, and
// handles what comes, until the role has passed on (its own answer came) or pc is
// finished, or the link's output ended.
func (c *conn) lead(pc *pendingCall) {
	for {
		if c.readOne(nil) == readEnded {
			return
		}
		// A message handled, or the read interrupted: pc was finished elsewhere.
		c.mu.Lock()
		switch {
		case c.holder != pc:
			c.mu.Unlock()
			return
		case pc.finished:
			c.releaseLocked()
			c.mu.Unlock()
			return
		case c.interrupted: // not for pc (cannot happen): go on reading
			c.interrupted = false
			c.ri.ResumeRead()
		}
		c.mu.Unlock()
	}
}

// readStep is what one read of the link came to (readOne).
type readStep uint8

const (
	readHandled     readStep = iota // a message was handled, or an oversized one reported
	readInterrupted                 // the read was cut short (transport.ReadInterrupter)
	readEnded                       // the link's output ended: c.readErr is set
)

// readOne reads one message from the link and handles it, for whoever holds the read
// role: the leader (lead) or the reader goroutine (readWhileHolding, which passes its
// burst hold: taken, unless it is already, before a message is handled with more
// already buffered; nil for the leader). It is the one place a read's error is told
// apart. When the link's output ended, the role goes to the reader goroutine, which
// ends the connection's reading (the reader goroutine itself keeps it).
func (c *conn) readOne(hold *func()) readStep {
	line, err := c.proc.ReadLine()
	switch {
	case err == nil:
		if hold != nil && *hold == nil && c.proc.Buffered() > 0 {
			*hold = c.u.events.Hold()
		}
		c.handleLine(line, 0)
	case errors.Is(err, jsonrpc.ErrMessageTooLarge):
		c.tooLarge(err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return readInterrupted
	default:
		c.mu.Lock()
		c.readErr = err
		c.releaseLocked()
		c.mu.Unlock()
		return readEnded
	}
	return readHandled
}

// readLoop is the reader goroutine: it reads the link while it holds the read role
// (always, on a link that cannot be led), and ends when the link's output ends.
func (c *conn) readLoop() {
	defer close(c.readerDone)
	for {
		c.mu.Lock()
		holds, ended := c.bgHolds, c.readErr != nil
		c.mu.Unlock()
		if ended {
			return
		}
		if holds {
			c.readWhileHolding()
			continue
		}
		select {
		case <-c.bgWake:
		case <-c.idle.C:
			c.mu.Lock()
			c.idleArmed = false
			if c.holder == nil && !c.bgHolds {
				if free := time.Since(c.freeSince); free >= c.idleGrace {
					c.bgHolds = true
				} else {
					c.idleArmed = true // freed again since the timer was armed
					c.idle.Reset(c.idleGrace - free)
				}
			}
			c.mu.Unlock()
		}
	}
}

// readWhileHolding reads the link, dispatching each message, until the reader goroutine
// passes the read role on or the link's output ends.
func (c *conn) readWhileHolding() {
	var release func() // set while a burst of buffered messages is being handled
	defer func() {
		if release != nil {
			release()
		}
	}()
	for {
		if release != nil && c.proc.Buffered() == 0 {
			release() // about to wait for the upstream: let what the burst produced go
			release = nil
		}
		switch c.readOne(&release) {
		case readEnded:
			return
		case readInterrupted:
			// Not interrupted itself (only a leader is): a leader's interruption outlived
			// its role (cannot happen). Go on reading.
			c.mu.Lock()
			if c.interrupted && c.holder == nil {
				c.interrupted = false
				c.ri.ResumeRead()
			}
			c.mu.Unlock()
			continue
		}
		if !c.leadable || c.proc.Buffered() > 0 {
			continue
		}
		// Everything available is read: pass the role on if only waiting callers are
		// left (one of them reads its own answer), or none after an inline call (the next
		// such call leads).
		c.mu.Lock()
		if c.ownerless == 0 && c.readErr == nil && c.closed == nil && (len(c.waiters) > 0 || c.lastInline) {
			c.releaseLocked()
			if !c.bgHolds {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
	}
}
