package plugins

import "time"

// workerIdle is how long a pool worker waits for more work before it exits.
const workerIdle = 30 * time.Second

// pool runs hook crossings on long-lived goroutines: a call that crosses to a plugin
// needs a goroutine of its own (a hook may take up to its timeout and the goroutine that
// hands the call over must not wait), and a fresh one would grow its stack to gRPC's
// depth on every call. Workers exit after workerIdle without work, or at close.
type pool struct {
	jobs chan func()
	done chan struct{}
}

func newPool() *pool { return &pool{jobs: make(chan func()), done: make(chan struct{})} }

// run runs f on an idle worker, or on a new one when none is idle.
func (p *pool) run(f func()) {
	select {
	case p.jobs <- f:
	default:
		go p.work(f)
	}
}

func (p *pool) work(f func()) {
	f()
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		select {
		case f := <-p.jobs:
			f()
			t.Reset(workerIdle)
		case <-t.C:
			return
		case <-p.done:
			return
		}
	}
}

// close makes idle workers exit; busy ones exit when their work is done.
func (p *pool) close() { close(p.done) }
