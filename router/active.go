package router

import (
	"slices"
	"sync"
)

// Active is the set of tools a client session activated by searching an endpoint in
// search mode: they join that session's tools/list. It is bounded (the endpoint's
// MaxActive): a search that finds new tools when it is full pushes out those found
// least recently. The front end keeps one per session (Request.Active) and may persist
// it (SetOnChange): it is session state, like a log level or a subscription. Its zero
// value is empty and ready; it is safe for concurrent use.
type Active struct {
	mu       sync.Mutex // guards the fields below
	names    []string   // most recently found first
	onChange func(names []string)
}

// Names returns the activated tools, most recently found first.
func (a *Active) Names() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.names)
}

// Restore replaces the set with names (a session rebuilt from what was persisted),
// without telling the change hook.
func (a *Active) Restore(names []string) {
	a.mu.Lock()
	a.names = slices.Clone(names)
	a.mu.Unlock()
}

// SetOnChange installs f, told of the whole set each time it changes (not when only its
// order does). f runs on the request's goroutine: it must not block.
func (a *Active) SetOnChange(f func(names []string)) {
	a.mu.Lock()
	a.onChange = f
	a.mu.Unlock()
}

// activate puts found first, in their order, keeps at most limit names, and reports
// whether the set (not only its order) changed.
func (a *Active) activate(found []string, limit int) bool {
	a.mu.Lock()
	next := make([]string, 0, min(len(found)+len(a.names), limit))
	for _, n := range found {
		if len(next) < limit && !slices.Contains(next, n) {
			next = append(next, n)
		}
	}
	for _, n := range a.names {
		if len(next) < limit && !slices.Contains(next, n) {
			next = append(next, n)
		}
	}
	changed := len(next) != len(a.names)
	for _, n := range next {
		if changed {
			break
		}
		changed = !slices.Contains(a.names, n)
	}
	a.names = next
	f := a.onChange
	var snapshot []string
	if changed && f != nil {
		snapshot = slices.Clone(next)
	}
	a.mu.Unlock()
	if snapshot != nil {
		f(snapshot)
	}
	return changed
}

// list returns the activated names without copying; the caller must not keep or
// change it (activate replaces the slice, never edits it).
func (a *Active) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.names
}
