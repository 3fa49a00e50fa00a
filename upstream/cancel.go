package upstream

import (
	"errors"
	"sync"
)

// ErrCancelled completes a call whose Canceller was cancelled.
var ErrCancelled = errors.New("call cancelled")

// Canceller lets the sender of a call cancel it later (a client's
// notifications/cancelled) without a context per request. The zero value is ready to
// use; it is safe for concurrent use and serves one call.
type Canceller struct {
	mu        sync.Mutex // guards the fields below
	cancelled bool
	fn        func() // what cancelling does while the call is in flight
}

// Cancel cancels the call: the upstream is sent notifications/cancelled and the call
// completes with ErrCancelled. Cancelling a finished call, or twice, does nothing.
func (c *Canceller) Cancel() {
	c.mu.Lock()
	c.cancelled = true
	fn := c.fn
	c.fn = nil
	c.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// arm registers fn to run on Cancel; it reports false when Cancel already happened.
func (c *Canceller) arm(fn func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled {
		return false
	}
	c.fn = fn
	return true
}

// disarm forgets the registered function once the call has completed.
func (c *Canceller) disarm() {
	c.mu.Lock()
	c.fn = nil
	c.mu.Unlock()
}
