package server

import (
	"context"
	"sync"
)

// EventStore keeps what a legacy Streamable HTTP session's event streams said, so that
// a client whose connection broke can resume a stream with Last-Event-ID (and a GET
// stream opened late gets what was said while none was open). The in-memory store
// (MemoryEventStore) serves one process; a store shared by replicas (Redis) keeps the
// events where any of them can read them. Only what must be replayed goes through the
// store: the streams themselves (open connections, their goroutines, the session) live
// in the process that serves them.
//
// A session's streams are named by the session id and a stream key ("g" for the GET
// stream, "p1", "p2", ... for the answers to POSTs); the server numbers each stream's
// events 1, 2, 3, ... and a client sees the event id "<stream>-<seq>". The numbering
// stays with the live stream, so that the ids on a connection only go up whatever the
// store does.
//
// Concurrency: every method is called concurrently, for many sessions; for one stream,
// Append is called in order (seq increasing) and never concurrently with itself.
//
// Errors are never fatal to a live stream. An Append that fails is logged, and the
// event still goes to the connection that carries the stream: a client that reconnects
// later misses it, as it misses an event the store has dropped to stay bounded. An After
// that fails is logged and ends the resuming request's stream without events, so that
// the client reconnects with the same Last-Event-ID. Failed deletes are logged.
//
// Expiry: the server deletes a stream when it has nothing more to say and a session's
// streams when the session ends, but a store cannot rely on it (a process can die
// before): a shared store must also expire a stream nobody appends to (after the idle
// time of a session, HTTPOptions.SessionIdle, nothing will ask for it).
type EventStore interface {
	// Append keeps data as event seq of the stream. It must not keep data itself (the
	// caller's buffer is reused): it copies what it keeps. A store may keep a bounded
	// number of events per stream, dropping the oldest.
	Append(ctx context.Context, session, stream string, seq uint64, data []byte) error
	// After returns the kept events of the stream numbered above after, oldest first;
	// none for a stream it does not know. The caller does not modify the events' Data.
	After(ctx context.Context, session, stream string, after uint64) ([]StreamEvent, error)
	// DeleteStream forgets a stream's events.
	DeleteStream(ctx context.Context, session, stream string) error
	// DeleteSession forgets the events of every stream of a session.
	DeleteSession(ctx context.Context, session string) error
}

// StreamEvent is one kept event of a stream.
type StreamEvent struct {
	Seq  uint64
	Data []byte
}

// MemoryEventStore is the in-memory EventStore: the latest events of each stream (64 by
// default) in a ring. It never fails.
type MemoryEventStore struct {
	keep int

	mu       sync.RWMutex // guards sessions (not what is in them)
	sessions map[string]*memorySession
}

var _ EventStore = (*MemoryEventStore)(nil)

type memorySession struct {
	mu      sync.Mutex // guards streams and their rings
	streams map[string]*eventRing
	deleted bool // DeleteSession has removed it: appends go to a new one
}

// eventRing holds the latest events of a stream, oldest at head once it is full.
type eventRing struct {
	events []StreamEvent
	head   int
}

// NewMemoryEventStore returns a store that keeps the latest keep events of each stream
// (0: 64).
func NewMemoryEventStore(keep int) *MemoryEventStore {
	if keep <= 0 {
		keep = keepEvents
	}
	return &MemoryEventStore{keep: keep, sessions: map[string]*memorySession{}}
}

// session returns the session's streams, making them when create is set (nil when not).
func (m *MemoryEventStore) session(id string, create bool) *memorySession {
	m.mu.RLock()
	s := m.sessions[id]
	m.mu.RUnlock()
	if s != nil || !create {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s = m.sessions[id]; s == nil {
		s = &memorySession{streams: map[string]*eventRing{}}
		m.sessions[id] = s
	}
	return s
}

// Append implements EventStore.
func (m *MemoryEventStore) Append(_ context.Context, session, stream string, seq uint64, data []byte) error {
	for {
		s := m.session(session, true)
		s.mu.Lock()
		if s.deleted { // deleted between the lookup and the lock: start the session again
			s.mu.Unlock()
			continue
		}
		r := s.streams[stream]
		if r == nil {
			r = &eventRing{events: make([]StreamEvent, 0, min(m.keep, 8))}
			s.streams[stream] = r
		}
		ev := StreamEvent{Seq: seq, Data: append([]byte(nil), data...)}
		if len(r.events) < m.keep {
			r.events = append(r.events, ev)
		} else {
			r.events[r.head] = ev
			r.head = (r.head + 1) % len(r.events)
		}
		s.mu.Unlock()
		return nil
	}
}

// After implements EventStore.
func (m *MemoryEventStore) After(_ context.Context, session, stream string, after uint64) ([]StreamEvent, error) {
	s := m.session(session, false)
	if s == nil {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.streams[stream]
	if r == nil {
		return nil, nil
	}
	var out []StreamEvent
	for i := range r.events {
		if ev := r.events[(r.head+i)%len(r.events)]; ev.Seq > after {
			out = append(out, ev)
		}
	}
	return out, nil
}

// DeleteStream implements EventStore.
func (m *MemoryEventStore) DeleteStream(_ context.Context, session, stream string) error {
	if s := m.session(session, false); s != nil {
		s.mu.Lock()
		delete(s.streams, stream)
		s.mu.Unlock()
	}
	return nil
}

// DeleteSession implements EventStore.
func (m *MemoryEventStore) DeleteSession(_ context.Context, session string) error {
	m.mu.Lock()
	s := m.sessions[session]
	delete(m.sessions, session)
	m.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		s.deleted = true
		s.mu.Unlock()
	}
	return nil
}

// Len is the number of sessions with kept events.
func (m *MemoryEventStore) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.sessions)
}
