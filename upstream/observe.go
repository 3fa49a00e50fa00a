package upstream

import "time"

// An Observer is told what happens to an upstream over its life, so that metrics, a
// status page or tests read events instead of reaching into the upstream's state. It is
// called synchronously from the upstream's goroutines: it must be quick and must not
// call back into the upstream.
type Observer interface {
	UpstreamEvent(e Event)
}

// EventKind is what happened.
type EventKind uint8

const (
	// EventStarting: a start attempt begins (a process is spawned, a URL or Spec.Dial
	// dialled).
	EventStarting EventKind = iota + 1
	// EventReady: the handshake and the first catalogue fetch are done. Info holds the
	// era and version; Duration how long the attempt took.
	EventReady
	// EventStartFailed: the attempt failed (Err); another follows after a backoff.
	EventStartFailed
	// EventExited: a ready upstream's process or session ended (Err says why).
	EventExited
	// EventRestarting: the next attempt begins after Backoff.
	EventRestarting
	// EventStopped: the upstream was closed and will not start again.
	EventStopped
	// EventCallTimedOut: a call (Method) got no answer within its timeout.
	EventCallTimedOut
)

var eventNames = [...]string{EventStarting: "starting", EventReady: "ready", EventStartFailed: "start_failed",
	EventExited: "exited", EventRestarting: "restarting", EventStopped: "stopped", EventCallTimedOut: "call_timed_out"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one thing that happened to an upstream.
type Event struct {
	Kind     EventKind
	Upstream string // the configured name
	Time     time.Time
	Err      error         // EventStartFailed, EventExited
	Info     Info          // EventReady
	Duration time.Duration // EventReady: how long the start took
	Backoff  time.Duration // EventRestarting
	Method   string        // EventCallTimedOut
}

// observe tells the spec's observer, if any, about e.
func (u *Upstream) observe(e Event) {
	if o := u.spec.Observer; o != nil {
		e.Upstream, e.Time = u.spec.Name, time.Now()
		o.UpstreamEvent(e)
	}
}
