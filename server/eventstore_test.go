package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// TestMemoryEventStoreContract checks the in-memory store against EventStore's contract.
func TestMemoryEventStoreContract(t *testing.T) {
	ctx := context.Background()
	type op struct {
		kind            string // append, after, delstream, delsession
		session, stream string
		seq             uint64 // to append, or after
		want            string // after: the kept events, "seq:data" joined by spaces
	}
	for _, tc := range []struct {
		name string
		keep int
		ops  []op
	}{
		{"unknown session and stream", 0, []op{
			{kind: "after", session: "s", stream: "g"},
			{kind: "append", session: "s", stream: "g", seq: 1},
			{kind: "after", session: "s", stream: "p1"},
		}},
		{"in order, after a seq", 0, []op{
			{kind: "append", session: "s", stream: "g", seq: 1},
			{kind: "append", session: "s", stream: "g", seq: 2},
			{kind: "append", session: "s", stream: "g", seq: 3},
			{kind: "after", session: "s", stream: "g", seq: 0, want: "1:s/g/1 2:s/g/2 3:s/g/3"},
			{kind: "after", session: "s", stream: "g", seq: 2, want: "3:s/g/3"},
			{kind: "after", session: "s", stream: "g", seq: 3},
			{kind: "after", session: "s", stream: "g", seq: 9},
		}},
		{"bounded: the oldest go", 3, []op{
			{kind: "append", session: "s", stream: "g", seq: 1},
			{kind: "append", session: "s", stream: "g", seq: 2},
			{kind: "append", session: "s", stream: "g", seq: 3},
			{kind: "append", session: "s", stream: "g", seq: 4},
			{kind: "append", session: "s", stream: "g", seq: 5},
			{kind: "after", session: "s", stream: "g", seq: 0, want: "3:s/g/3 4:s/g/4 5:s/g/5"},
			{kind: "append", session: "s", stream: "g", seq: 6},
			{kind: "after", session: "s", stream: "g", seq: 4, want: "5:s/g/5 6:s/g/6"},
		}},
		{"streams and sessions apart", 0, []op{
			{kind: "append", session: "s", stream: "g", seq: 1},
			{kind: "append", session: "s", stream: "p1", seq: 1},
			{kind: "append", session: "t", stream: "g", seq: 1},
			{kind: "after", session: "s", stream: "p1", want: "1:s/p1/1"},
			{kind: "after", session: "t", stream: "g", want: "1:t/g/1"},
		}},
		{"delete a stream", 0, []op{
			{kind: "append", session: "s", stream: "g", seq: 1},
			{kind: "append", session: "s", stream: "p1", seq: 1},
			{kind: "delstream", session: "s", stream: "p1"},
			{kind: "after", session: "s", stream: "p1"},
			{kind: "after", session: "s", stream: "g", want: "1:s/g/1"},
			{kind: "delstream", session: "nope", stream: "p1"},
		}},
		{"delete a session", 0, []op{
			{kind: "append", session: "s", stream: "g", seq: 1},
			{kind: "append", session: "s", stream: "p1", seq: 1},
			{kind: "append", session: "t", stream: "g", seq: 1},
			{kind: "delsession", session: "s"},
			{kind: "after", session: "s", stream: "g"},
			{kind: "after", session: "s", stream: "p1"},
			{kind: "after", session: "t", stream: "g", want: "1:t/g/1"},
			{kind: "append", session: "s", stream: "g", seq: 2}, // a session id used again starts afresh
			{kind: "after", session: "s", stream: "g", want: "2:s/g/2"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemoryEventStore(tc.keep)
			for i, o := range tc.ops {
				var err error
				switch o.kind {
				case "append":
					buf := []byte(fmt.Sprintf("%s/%s/%d", o.session, o.stream, o.seq))
					err = m.Append(ctx, o.session, o.stream, o.seq, buf)
					copy(buf, "XXXX") // the caller reuses its buffer: the store kept a copy
				case "after":
					var evs []StreamEvent
					evs, err = m.After(ctx, o.session, o.stream, o.seq)
					var got []string
					for _, ev := range evs {
						got = append(got, fmt.Sprintf("%d:%s", ev.Seq, ev.Data))
					}
					if strings.Join(got, " ") != o.want {
						t.Errorf("op %d: after %d = %q, want %q", i, o.seq, strings.Join(got, " "), o.want)
					}
				case "delstream":
					err = m.DeleteStream(ctx, o.session, o.stream)
				case "delsession":
					err = m.DeleteSession(ctx, o.session)
				}
				if err != nil {
					t.Fatalf("op %d: %v", i, err)
				}
			}
		})
	}
}

// recordingEvents is an EventStore that records what the server asks, keeps events in
// memory, and fails when told to.
type recordingEvents struct {
	*MemoryEventStore
	mu         sync.Mutex
	calls      []string
	failAppend error
	failAfter  error
}

var _ EventStore = (*recordingEvents)(nil)

func (s *recordingEvents) record(format string, args ...any) {
	s.mu.Lock()
	s.calls = append(s.calls, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *recordingEvents) fail(appendErr, afterErr error) {
	s.mu.Lock()
	s.failAppend, s.failAfter = appendErr, afterErr
	s.mu.Unlock()
}

func (s *recordingEvents) Append(ctx context.Context, session, stream string, seq uint64, data []byte) error {
	s.record("append %s-%d", stream, seq)
	s.mu.Lock()
	err := s.failAppend
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.MemoryEventStore.Append(ctx, session, stream, seq, data)
}

func (s *recordingEvents) After(ctx context.Context, session, stream string, after uint64) ([]StreamEvent, error) {
	s.record("after %s-%d", stream, after)
	s.mu.Lock()
	err := s.failAfter
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.MemoryEventStore.After(ctx, session, stream, after)
}

func (s *recordingEvents) DeleteStream(ctx context.Context, session, stream string) error {
	s.record("delete %s", stream)
	return s.MemoryEventStore.DeleteStream(ctx, session, stream)
}

func (s *recordingEvents) DeleteSession(ctx context.Context, session string) error {
	s.record("delete session")
	return s.MemoryEventStore.DeleteSession(ctx, session)
}

func (s *recordingEvents) took() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := strings.Join(s.calls, ", ")
	s.calls = nil
	return out
}

// syncBuffer is a log sink the test reads while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestEventStoreThroughHTTP: a legacy session's streams keep their events in the
// HTTPOptions.Events store under the ids clients see, a resuming GET replays from it,
// and when the store fails the live stream goes on while the replay is refused (logged).
func TestEventStoreThroughHTTP(t *testing.T) {
	var logs syncBuffer
	log := zerolog.New(&logs).Level(zerolog.WarnLevel)
	r := router.New(router.Options{}, log)
	defer r.Close()
	store := &recordingEvents{MemoryEventStore: NewMemoryEventStore(0)}
	h := New(r, Options{}, log).NewHTTPHandler(context.Background(), HTTPOptions{Events: store})
	defer h.Close()
	hs := h.newHTTPSession("", "")
	h.mu.Lock()
	h.sessions[hs.id] = hs
	h.mu.Unlock()

	// get serves the session's GET stream until stop is closed (nil: it returns at once,
	// after the replay) and returns what the client read.
	get := func(lastID string, stop <-chan struct{}) string {
		ctx, cancel := context.WithCancel(context.Background())
		if stop == nil {
			cancel()
		} else {
			go func() { <-stop; cancel() }()
		}
		defer cancel()
		req := httptest.NewRequest(http.MethodGet, "/mcp", nil).WithContext(ctx)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", hs.id)
		if lastID != "" {
			req.Header.Set("Last-Event-Id", lastID)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Body.String()
	}

	// While no GET stream is open, what the session says is kept.
	hs.get.Write([]byte("{\"n\":1}\n{\"n\":2}\n"))
	if got := store.took(); got != "append g-1, append g-2" {
		t.Errorf("store calls: %s", got)
	}
	body := get("g-1", nil)
	if !strings.Contains(body, "id: g-2\nevent: message\ndata: {\"n\":2}\n\n") || strings.Contains(body, `"n":1`) {
		t.Errorf("resumed after g-1:\n%s", body)
	}
	if got := store.took(); got != "after g-1" {
		t.Errorf("store calls: %s", got)
	}
	// Nothing newer than the client's last event: the store is not asked.
	get("g-2", nil)
	if got := store.took(); got != "" {
		t.Errorf("store asked with nothing to replay: %s", got)
	}

	// The store cannot replay: the response ends without events, and the log says why.
	store.fail(nil, errors.New("redis: connection reset"))
	body = get("g-0", nil)
	if strings.Contains(body, "event: message") || !strings.Contains(logs.String(), "redis: connection reset") {
		t.Errorf("a failed replay:\n%s\nlog: %s", body, logs.String())
	}
	store.took()

	// The store cannot keep an event: the open stream gets it all the same, with the
	// next id; a client that resumes later misses it.
	store.fail(errors.New("redis: connection reset"), nil)
	stop := make(chan struct{})
	done := make(chan string)
	go func() { done <- get("g-2", stop) }()
	deadline := time.Now().Add(5 * time.Second)
	for attached := false; !attached; {
		hs.get.es.mu.Lock()
		attached = hs.get.es.out != nil
		hs.get.es.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("the GET stream did not attach")
		}
		time.Sleep(time.Millisecond)
	}
	hs.get.Write([]byte("{\"n\":3}\n"))
	close(stop)
	if body := <-done; !strings.Contains(body, "id: g-3\nevent: message\ndata: {\"n\":3}\n\n") {
		t.Errorf("live event while the store fails:\n%s", body)
	}
	store.fail(nil, nil)
	if evs, _ := store.MemoryEventStore.After(context.Background(), hs.id, "g", 2); len(evs) != 0 {
		t.Errorf("kept %v although the store failed", evs)
	}
	store.took()

	// POST answer streams: the oldest beyond keepDetachedStreams, and those delivered,
	// are deleted from the store.
	var streams []*eventStream
	for range keepDetachedStreams + 1 {
		streams = append(streams, hs.newStream(jsonrpc.ID{}))
	}
	if got := store.took(); got != "delete p1" {
		t.Errorf("store calls on trimming: %s", got)
	}
	streams[0].send([]byte(`{"late":true}`), true) // forgotten: keeps nothing
	hs.dropStream(streams[5])
	if got := store.took(); got != "delete p6" {
		t.Errorf("store calls: %s", got)
	}

	// The session ends: its events go.
	h.mu.Lock()
	delete(h.sessions, hs.id)
	h.mu.Unlock()
	hs.close()
	if got := store.took(); got != "delete session" || store.Len() != 0 {
		t.Errorf("store calls on close: %s (%d sessions kept)", got, store.Len())
	}
	hs.get.Write([]byte("{\"n\":4}\n")) // a late message keeps nothing
	if got := store.took(); got != "" || store.Len() != 0 {
		t.Errorf("a message after the end: %s", got)
	}
}
