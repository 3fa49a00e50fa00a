package plugins

import "time"

// An Observer is told about every crossing to a plugin's hook (its latency, whether it
// failed), so that metrics read events instead of reaching into the host. It is called
// synchronously on the pool worker that made the crossing: it must be quick and must not
// call back into the host.
type Observer interface {
	PluginHook(e HookEvent)
}

// Hooks, as HookEvent.Hook names them.
const (
	HookBefore    = "before"
	HookAfter     = "after"
	HookCatalogue = "catalogue"
)

// HookEvent is one hook call of one plugin. A call whose client went away meanwhile is
// not reported.
type HookEvent struct {
	Plugin   string
	Hook     string        // HookBefore, HookAfter, HookCatalogue or HookRank
	Duration time.Duration // from the crossing to the checked answer (or the failure)
	// Err is why the hook failed: the plugin was down, timed out, or answered something
	// the proxy cannot apply (whatever the failure mode then did with the call). Nil
	// when it answered, whatever it decided.
	Err error
}

// SetObserver sets who is told about hook calls; call it before Start. Nil: nobody.
func (h *Host) SetObserver(o Observer) { h.observer = o }

// observe reports one hook call that began at start.
func (in *instance) observe(hook string, start time.Time, err error) {
	if in.observer != nil {
		in.observer.PluginHook(HookEvent{Plugin: in.spec.Name, Hook: hook, Duration: time.Since(start), Err: err})
	}
}
