package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Member is one upstream as Reconfigure adds it: what Add, AddPerClient,
// SetCapabilitySessions and SetFilter say of an upstream before Start.
type Member struct {
	Up        Upstream
	Namespace string
	// PerClient, when set, makes it a per-client upstream (see AddPerClient).
	PerClient *PerClient
	// Capabilities, when set, gives the shared upstream a session per set of client
	// capabilities (see SetCapabilitySessions).
	Capabilities *PerClient
	// Filter selects and presents its tools and prompts; nil: every item as listed.
	Filter *Filter
}

// Change is what Reconfigure does to the upstreams.
type Change struct {
	// Add are upstreams to start. One named like a current upstream replaces it: the new
	// one serves from when it is ready, the old one drains (make before break).
	Add []Member
	// Remove names upstreams to drain and stop.
	Remove []string
	// Filters are new filters of upstreams that stay (nil: every item as listed).
	Filters map[string]*Filter
	// Order names the upstreams in config order: earlier ones win name collisions. An
	// upstream it leaves out keeps its place after those it names.
	Order []string
}

// Retired are the upstreams a Reconfigure took out of service: no new call reaches
// them, and the calls in flight there are answered until Drain stops them.
type Retired struct {
	list []*backend
}

// Names are the retired upstreams' names.
func (t *Retired) Names() []string {
	if t == nil {
		return nil
	}
	out := make([]string, len(t.list))
	for i, b := range t.list {
		out[i] = b.name
	}
	return out
}

// inFlight counts the calls still waiting for an answer on b and its sessions.
func (b *backend) inFlight() int64 {
	n := b.calls.Load()
	for _, p := range []*clientPool{b.pool, b.capsPool} {
		if p == nil {
			continue
		}
		p.mu.Lock()
		for _, inst := range p.byClient {
			n += int64(inst.calls.Load()) // counted from before its session is ready
		}
		p.mu.Unlock()
	}
	return n
}

// Drain waits until the retired upstreams have answered the calls in flight there, or
// until ctx ends, then stops them (their sessions too). It returns how many calls were
// still in flight when it stopped waiting (they are answered with an error by the
// upstream as it closes) and the errors of closing.
func (t *Retired) Drain(ctx context.Context) (abandoned int64, err error) {
	if t == nil || len(t.list) == 0 {
		return 0, nil
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int64
		for _, b := range t.list {
			n += b.inFlight()
		}
		if n == 0 || ctx.Err() != nil {
			abandoned = n
			break
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(t.list))
	for i, b := range t.list {
		b.stopped.Store(true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, p := range []*clientPool{b.pool, b.capsPool} {
				if p != nil {
					p.close()
				}
			}
			errs[i] = b.up.Close()
		}()
	}
	wg.Wait()
	return abandoned, errors.Join(errs...)
}

// started reports whether Start has run.
func (r *Router) started() bool {
	r.memberMu.Lock()
	defer r.memberMu.Unlock()
	return r.ctx != nil
}

// Reconfigure changes the upstreams while the router serves (a configuration reload).
// Client sessions, the calls in flight and the upstreams it does not name are left as
// they are. In order:
//
//  1. every filter is compiled first: an error changes nothing;
//  2. the added upstreams start (when the router has started) with what the current
//     client told the others (its capabilities, its era), and Reconfigure waits for
//     their first start attempt or ctx, so that an upstream replaced by a new
//     configuration goes on serving until its successor is ready;
//  3. the new set is published in one step, the catalogue is rebuilt, and clients get
//     one list_changed per kind whose merged list changed.
//
// The replaced and removed upstreams come back retired: the caller drains them.
func (r *Router) Reconfigure(ctx context.Context, ch Change) (*Retired, error) {
	type compiled struct{ tools, prompts *selection }
	compile := func(name string, f *Filter) (compiled, error) {
		if f == nil {
			return compiled{}, nil
		}
		t, err := compileSelection(&f.Tools)
		if err != nil {
			return compiled{}, fmt.Errorf("filtering the tools of upstream %q: %w", name, err)
		}
		p, err := compileSelection(&f.Prompts)
		if err != nil {
			return compiled{}, fmt.Errorf("filtering the prompts of upstream %q: %w", name, err)
		}
		return compiled{t, p}, nil
	}
	var errs []error
	added := make([]*backend, 0, len(ch.Add))
	for _, m := range ch.Add {
		c, err := compile(m.Up.Name(), m.Filter)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b := &backend{name: m.Up.Name(), namespace: m.Namespace, up: m.Up, filters: [2]*selection{c.tools, c.prompts}}
		if m.PerClient != nil {
			b.pool = newPool(r, b, *m.PerClient, false)
		} else if m.Capabilities != nil {
			b.capsPool = newPool(r, b, *m.Capabilities, true)
		}
		added = append(added, b)
	}
	filters := map[string]compiled{}
	for name, f := range ch.Filters {
		c, err := compile(name, f)
		if err != nil {
			errs = append(errs, err)
		}
		filters[name] = c
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	// Start the new upstreams as their peers were started, and wait for their first
	// attempt (bounded by each one's own start-up timeout, and by ctx).
	r.memberMu.Lock()
	started := r.ctx
	r.memberMu.Unlock()
	for _, b := range added {
		if cs, ok := b.up.(clientShaped); ok {
			if caps := r.clientCaps.Load(); caps != nil {
				cs.SetClientCapabilities(caps.caps)
			}
			if legacy := r.preferLegacy.Load(); legacy != nil {
				cs.SetPreferLegacy(*legacy)
			}
		}
		if started != nil {
			b.up.Start(started)
		}
	}
	if started != nil {
		var wg sync.WaitGroup
		for _, b := range added {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := b.up.WaitFirstAttempt(ctx); err != nil && ctx.Err() == nil {
					r.log.Warn().Err(err).Str("upstream", b.name).Msg("upstream added by a reload did not start; it keeps trying")
				}
			}()
		}
		wg.Wait()
	}

	// Publish the new set in one step.
	r.memberMu.Lock()
	r.rebuildMu.Lock()
	cur := r.members.Load()
	gone := map[string]bool{}
	for _, name := range ch.Remove {
		gone[name] = true
	}
	for _, b := range added {
		gone[b.name] = true // replaced
	}
	var retired []*backend
	list := make([]*backend, 0, len(cur.list)+len(added))
	for _, b := range cur.list {
		if gone[b.name] {
			retired = append(retired, b)
			continue
		}
		if c, ok := filters[b.name]; ok {
			b.filters = [2]*selection{c.tools, c.prompts}
			b.prepared = [2]preparedList{}
		}
		list = append(list, b)
	}
	list = append(list, added...)
	rank := make(map[string]int, len(ch.Order))
	for i, name := range ch.Order {
		rank[name] = i
	}
	pos := func(b *backend) int {
		if i, ok := rank[b.name]; ok {
			return i
		}
		return len(ch.Order)
	}
	slices.SortStableFunc(list, func(a, b *backend) int { return pos(a) - pos(b) })
	next := &members{list: list, byUp: make(map[Upstream]*backend, len(list))}
	for _, b := range list {
		next.byUp[b.up] = b
	}
	r.members.Store(next)
	if started != nil {
		for _, b := range added {
			b.startSweepers()
		}
	}
	r.rebuildMu.Unlock()
	r.memberMu.Unlock()
	r.rebuild()
	return &Retired{list: retired}, nil
}

// Reguard installs another visibility guard while the router serves (a reload changed
// the policy): the lists built for principals with the old one are dropped, and the
// lists of the given kinds (those the policy change may have changed: the merged list
// is the same, what each principal sees of it may not be) are compared, view by view,
// before and after: each subscriber is told of those that changed for it, a client that
// is not a Viewer of all of them.
func (r *Router) Reguard(g Guard, kinds ...TargetKind) {
	var maybe upstream.Kinds
	for _, k := range kinds {
		switch k {
		case TargetTool:
			maybe |= upstream.KindTools
		case TargetPrompt:
			maybe |= upstream.KindPrompts
		case TargetResource:
			maybe |= upstream.KindResources | upstream.KindTemplates
		}
	}
	r.rebuildWith(0, maybe, func() { r.SetGuard(g) })
}
