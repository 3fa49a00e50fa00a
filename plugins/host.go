// Package plugins is the proxy's host of out-of-process plugins (hashicorp/go-plugin
// over gRPC): it starts each configured plugin's program after checking its sha256,
// learns what it hooks and its config schema (Describe), decodes and passes its config
// block (Configure), and makes it a stage of the router's middleware chain (request
// hooks), a presenter of the catalogue (catalogue hook) and a ranker of endpoints'
// searches (rank hook, with the built-in ranker as its fallback). It restarts a plugin that
// exits or hangs, with backoff, and never leaves a plugin process behind: each runs in
// its own process group and dies with the proxy (parent-death signal).
//
// It must not decide anything itself: what a plugin may change is checked here, what a
// failed plugin means is the block's failure mode, and the order of the chain is the
// caller's (see Host.Stages).
package plugins

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/router"
)

// Host runs the configured plugins.
type Host struct {
	log       zerolog.Logger
	specs     []Spec
	instances []*instance
	represent func()
	pool      *pool
	observer  Observer      // see SetObserver
	calls     *inflight     // the calls in its plugins' hooks
	loads     *loads        // the rankers' index loads (rank.go)
	indexSeq  atomic.Uint64 // numbers the rankers' indexes: an index's id is unique in the host
	sockets   bool          // it holds the process's socket directory (acquireSockets)
	closeOnce sync.Once
}

// New returns a host for the plugins in specs (in file order); nothing starts yet.
func New(specs []Spec, log zerolog.Logger) *Host {
	return &Host{specs: specs, log: log, calls: newInflight(), loads: newLoads()}
}

// OnRestart sets what runs when a plugin restarted (pass the router's Represent, so that
// the catalogue is presented again); call it before Start.
func (h *Host) OnRestart(f func()) { h.represent = f }

// Start starts every plugin, in parallel, and returns the problems found: a program that
// is missing or fails its sha256, a failed handshake (another protocol version, not a
// plugin), a bad description, errors in a config block at their file:line, the plugin's
// own configuration errors. With errors nothing is left running. Warnings (an
// unverified program) come with a successful start.
func (h *Host) Start(ctx context.Context) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if err := acquireSockets(h.log); err != nil {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Plugins cannot start", Detail: err.Error()}}
	}
	h.sockets = true
	defer func() {
		if diags.HasErrors() {
			h.sockets = false
			releaseSockets()
		}
	}()
	ins := make([]*instance, len(h.specs))
	for i, s := range h.specs {
		in, err := newInstance(s, h.log)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid plugin matcher",
				Detail: err.Error(), Subject: s.DeclRange.Ptr()})
			continue
		}
		ins[i] = in
	}
	if diags.HasErrors() {
		return diags
	}
	shared := newPool()
	for _, in := range ins {
		in.pool = shared
		in.observer = h.observer
		in.calls = h.calls
	}
	h.pool = shared
	results := make([]hcl.Diagnostics, len(ins))
	var wg sync.WaitGroup
	for i, in := range ins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = in.start(ctx)
		}()
	}
	wg.Wait()
	for _, d := range results {
		diags = append(diags, d...)
	}
	if diags.HasErrors() {
		for i, in := range ins {
			if !results[i].HasErrors() {
				in.close()
			}
		}
		return diags
	}
	for _, in := range ins {
		in.onRestart = h.represent
		go in.supervise()
	}
	h.instances = ins
	return diags
}

// Stages returns the plugins with request hooks as middlewares, in file order: put them
// after the policy's stages (audit → rules → limits → plugins), so that before hooks run
// in file order on what the policy allowed and after hooks in reverse order, and the
// audit record, written last, holds what every plugin decided.
func (h *Host) Stages() []router.Middleware {
	var out []router.Middleware
	for _, in := range h.instances {
		if in.hooks&(hookBefore|hookAfter) != 0 {
			out = append(out, in.stage)
		}
	}
	return out
}

// Presenter returns the catalogue hooks as the router's presenter, nil when no plugin
// has one.
func (h *Host) Presenter() router.Presenter {
	var p presenter
	for _, in := range h.instances {
		if in.hooks&hookCatalogue != 0 {
			p.plugins = append(p.plugins, in)
		}
	}
	if len(p.plugins) == 0 {
		return nil
	}
	return &p
}

// Close stops every plugin and its supervisor and waits for them, and removes their
// sockets' directories; safe twice, and a second call waits for the first.
func (h *Host) Close() error {
	h.closeOnce.Do(h.close)
	return nil
}

// Retire stops the plugins of a host that calls no longer start in (a reload installed
// another), once the calls in their hooks have been answered, at the latest after grace
// (the longest a call may take); it returns at once. Close still stops them at once.
func (h *Host) Retire(grace time.Duration) {
	idle := h.calls.drained()
	go func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-idle:
		case <-t.C:
			h.log.Warn().Dur("grace", grace).Int64("calls", h.calls.n.Load()).
				Msg("stopping replaced plugins with calls still in their hooks")
		}
		_ = h.Close()
	}()
}

func (h *Host) close() {
	h.loads.close() // before the plugins stop: a load under way ends first
	var wg sync.WaitGroup
	for _, in := range h.instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.close()
			<-in.stopped
		}()
	}
	wg.Wait()
	if h.pool != nil {
		h.pool.close()
		h.pool = nil
	}
	if h.sockets {
		h.sockets = false
		releaseSockets()
	}
}

// inflight counts the calls in a host's hooks, so that a host a reload replaced stops as
// soon as none is left (Retire).
type inflight struct {
	n        atomic.Int64
	retiring atomic.Bool
	once     sync.Once
	idle     chan struct{}
}

func newInflight() *inflight { return &inflight{idle: make(chan struct{})} }

func (f *inflight) enter() { f.n.Add(1) }

func (f *inflight) leave() {
	if f.n.Add(-1) == 0 && f.retiring.Load() {
		f.once.Do(func() { close(f.idle) })
	}
}

// drained marks the host retiring and returns what is closed once no call is left.
func (f *inflight) drained() <-chan struct{} {
	f.retiring.Store(true)
	if f.n.Load() == 0 {
		f.once.Do(func() { close(f.idle) })
	}
	return f.idle
}

// Validate starts every plugin as Start does, reports what it found, and stops them:
// what `mcp-proxy validate` runs.
func Validate(ctx context.Context, specs []Spec, log zerolog.Logger) hcl.Diagnostics {
	h := New(specs, log)
	diags := h.Start(ctx)
	_ = h.Close()
	return diags
}
