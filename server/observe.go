package server

import "time"

// A SessionObserver is told when client sessions begin and end, so that metrics and a
// status page read events instead of reaching into the front end. It is called
// synchronously: it must be quick and must not call back into the server.
type SessionObserver interface {
	SessionEvent(e SessionEvent)
}

// SessionEventKind is what happened to a session.
type SessionEventKind uint8

const (
	// SessionOpened: a legacy client finished initialize.
	SessionOpened SessionEventKind = iota + 1
	// SessionClosed: an initialized session ended (the client went, DELETE, expiry,
	// shutdown). Duration is how long it lived.
	SessionClosed
)

func (k SessionEventKind) String() string {
	switch k {
	case SessionOpened:
		return "opened"
	case SessionClosed:
		return "closed"
	}
	return "unknown"
}

// Transports a session can use, as SessionEvent.Transport names them.
const (
	TransportStdio          = "stdio"
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
)

// SessionEvent is one session's beginning or end. Modern (2026-07-28) clients have no
// sessions; their requests are not reported here.
type SessionEvent struct {
	Kind      SessionEventKind
	Time      time.Time
	Transport string // TransportStdio, TransportStreamableHTTP or TransportSSE
	ID        string // the session id (empty on stdio)
	Version   string // the negotiated protocol version
	Client    string // clientInfo.name
	Principal string // who opened it ("" for nobody in particular)
	Duration  time.Duration
}

// observe tells the server's observer, if any, about e.
func (s *Server) observe(e SessionEvent) {
	if o := s.opts.Observer; o != nil {
		e.Time = time.Now()
		o.SessionEvent(e)
	}
}
