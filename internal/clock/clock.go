// Package clock is the time the proxy's timers run on: the real clock in production, a
// fake one in tests that must show that something happens, or does not, after a delay
// (a coalesced notification, an idle sweep) without sleeping.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and runs functions later.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed (see time.AfterFunc).
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a function scheduled by AfterFunc.
type Timer interface {
	// Reset schedules it again d from now; it reports whether it was still pending.
	Reset(d time.Duration) bool
	// Stop cancels it; it reports whether it was still pending.
	Stop() bool
}

// Real is the system clock.
type Real struct{}

var _ Clock = Real{}

// Now implements Clock.
func (Real) Now() time.Time { return time.Now() }

// AfterFunc implements Clock.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Or returns c, or the real clock when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}

// Fake is a clock that moves only when Advance is called. Due functions run
// synchronously inside Advance, in order of their due time, so that a test knows they
// are done when Advance returns.
type Fake struct {
	mu     sync.Mutex // guards now and timers
	now    time.Time
	timers []*fakeTimer
}

// NewFake returns a fake clock at a fixed instant.
func NewFake() *Fake { return &Fake{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

var _ Clock = (*Fake)(nil)

type fakeTimer struct {
	c   *Fake
	due time.Time
	f   func()
	on  bool
}

// Now implements Clock.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements Clock.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, due: c.now.Add(d), f: f, on: true}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.on
	t.due, t.on = t.c.now.Add(d), true
	if !was {
		t.c.timers = append(t.c.timers, t)
	}
	return was
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.on
	t.on = false
	t.c.removeLocked(t)
	return was
}

func (c *Fake) removeLocked(t *fakeTimer) {
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return
		}
	}
}

// Advance moves the clock on by d and runs every function that falls due, in order.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].due.Before(c.timers[j].due) })
		if len(c.timers) == 0 || c.timers[0].due.After(end) {
			break
		}
		t := c.timers[0]
		c.timers = c.timers[1:]
		t.on = false
		c.now = t.due
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// Pending is how many functions are scheduled and not yet run: zero proves that nothing
// more will happen however long a test would wait.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
