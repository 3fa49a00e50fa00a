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
	call      *pendingCall // the call in flight, cancelled by Cancel (no closure per call)
}

// Cancel cancels the call: the upstream is sent notifications/cancelled and the call
// completes with ErrCancelled. Cancelling a finished call, or twice, does nothing.
func (c *Canceller) Cancel() {
	c.mu.Lock()
	c.cancelled = true
	call := c.call
	c.call = nil
	c.mu.Unlock()
	if call != nil {
		call.cancel()
	}
}

// arm registers the call that Cancel cancels; it reports false when Cancel already
// happened.
func (c *Canceller) arm(call *pendingCall) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled {
		return false
	}
	c.call = call
	return true
}

// disarm forgets the registered function once the call has completed.
func (c *Canceller) disarm() {
	c.mu.Lock()
	c.call = nil
	c.mu.Unlock()
}
