// Package plugins is the proxy's host of out-of-process plugins (hashicorp/go-plugin
// over gRPC): it starts each configured plugin's program after checking its sha256,
// learns what it hooks and its config schema (Describe), decodes and passes its config
// block (Configure), and makes it a stage of the router's middleware chain (request
// hooks) and a presenter of the catalogue (catalogue hook). It restarts a plugin that
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
	observer  Observer // see SetObserver
}

// New returns a host for the plugins in specs (in file order); nothing starts yet.
func New(specs []Spec, log zerolog.Logger) *Host {
	return &Host{specs: specs, log: log}
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

// Close stops every plugin and its supervisor and waits for them; safe twice.
func (h *Host) Close() error {
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
	return nil
}

// Validate starts every plugin as Start does, reports what it found, and stops them:
// what `mcp-proxy validate` runs.
func Validate(ctx context.Context, specs []Spec, log zerolog.Logger) hcl.Diagnostics {
	h := New(specs, log)
	diags := h.Start(ctx)
	_ = h.Close()
	return diags
}
