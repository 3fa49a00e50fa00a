package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// Server-sent events for the HTTP front end: the connection writer (streamOut), the
// resumable stream of a legacy session (eventStream), a POSTed request's answer (answer)
// and a session's GET stream (eventSink).

// streamOut writes events to one HTTP response.
type streamOut struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	f      http.Flusher
	closed bool // the handler has returned or the client is gone: w must not be used
}

// openEventStream answers with an event stream (not buffered by proxies in between).
func openEventStream(w http.ResponseWriter) *streamOut {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	return &streamOut{w: w, f: flusher}
}

// event writes one event; false when it could not be written.
func (o *streamOut) event(id, name string, data []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	var b []byte
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	if _, err := o.w.Write(b); err != nil {
		o.closed = true
		return false
	}
	if o.f != nil {
		o.f.Flush()
	}
	return true
}

// comment writes a keep-alive comment line.
func (o *streamOut) comment() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	if _, err := o.w.Write([]byte(": keep-alive\n\n")); err != nil {
		o.closed = true
		return
	}
	if o.f != nil {
		o.f.Flush()
	}
}

// abort makes a write blocked on a client that reads nothing fail, by setting the
// connection's write deadline in the past; it does not take mu, which that write holds.
func (o *streamOut) abort() {
	_ = http.NewResponseController(o.w).SetWriteDeadline(time.Unix(1, 0))
}

func (o *streamOut) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}

// Replay limits: how many events of a stream a legacy session keeps for a client that
// reconnects with Last-Event-ID (the default MemoryEventStore's bound), and how many
// streams whose connection broke it keeps.
const (
	keepEvents          = 64
	keepDetachedStreams = 32
)

// eventStream is one logical SSE stream of a session: a POST's answer or the GET
// stream. In a legacy session its events carry ids "<stream>-<seq>" and go to the
// session's EventStore, so that a client whose connection broke can GET the rest with
// Last-Event-ID (the stream goes on meanwhile: a disconnect is not a cancellation).
// Modern streams have no ids and keep nothing.
type eventStream struct {
	id string // unique within the session; "" when the stream cannot be resumed

	mu    sync.Mutex
	keep  *streamStore // where its events are kept for replay; nil: nowhere
	seq   uint64
	out   *streamOut // the connection carrying the stream now; nil when none
	sent  uint64     // the last event written to a connection
	ended bool       // its last event has been written or kept
	endCh chan struct{}
}

// streamStore is where one stream's events are kept: the session's EventStore, under
// the session's id and the stream's key.
type streamStore struct {
	events  EventStore
	session string
	stream  string // the stream's key: its id (kept when the id is blanked, see legacySSE)
	log     *zerolog.Logger
}

// newEventStream makes a stream whose events are kept in keep (nil: nowhere).
func newEventStream(id string, keep *streamStore) *eventStream {
	return &eventStream{id: id, keep: keep, endCh: make(chan struct{})}
}

func (es *eventStream) eventID(seq uint64) string {
	if es.id == "" {
		return ""
	}
	return es.id + "-" + strconv.FormatUint(seq, 10)
}

// prime writes the priming event (an id and no data) that lets a client resume the
// stream even before its first message.
func (es *eventStream) prime(out *streamOut) {
	if es.id == "" {
		return
	}
	es.mu.Lock()
	seq := es.seq
	es.mu.Unlock()
	out.event(es.eventID(seq), "", nil)
}

// send writes one message event, and keeps it for replay. last marks the stream's final
// event.
func (es *eventStream) send(data []byte, last bool) {
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.ended {
		return
	}
	es.seq++
	if k := es.keep; k != nil {
		// The store is not bounded by a request: a store that goes over the network
		// bounds its own calls.
		if err := k.events.Append(context.Background(), k.session, k.stream, es.seq, data); err != nil {
			k.log.Warn().Err(err).Str("stream", k.stream).Uint64("seq", es.seq).
				Msg("event store: event not kept for replay; a client that reconnects will miss it")
		}
	}
	if es.out != nil && es.out.event(es.eventID(es.seq), "message", data) {
		es.sent = es.seq
	}
	if last {
		es.ended = true
		close(es.endCh)
	}
}

// attach makes out carry the stream from now on, after replaying the kept events after
// seq `after` (all unsent ones when after is negative). An `after` above the last event
// the stream has issued names no event of it (the client cannot have seen it: a made-up
// or stale Last-Event-ID), so it is answered as no Last-Event-ID is, with every unsent
// event and then the live ones: what a client gets never depends on how far ahead of
// the stream its id is. It reports whether the stream had already ended (everything it
// will ever say has now been written); ok is false when the kept events could not be
// read (the store failed: logged), and out is then not attached: the caller ends the
// response, and the client reconnects.
func (es *eventStream) attach(ctx context.Context, out *streamOut, after int64) (ended, ok bool) {
	es.mu.Lock()
	defer es.mu.Unlock()
	from := es.sent
	if after >= 0 && uint64(after) <= es.seq {
		from = uint64(after)
	}
	if k := es.keep; k != nil && from < es.seq { // else there is nothing to replay
		kept, err := k.events.After(ctx, k.session, k.stream, from)
		if err != nil {
			k.log.Error().Err(err).Str("stream", k.stream).Uint64("after", from).
				Msg("event store: cannot replay the stream; the client must reconnect")
			return es.ended, false
		}
		for _, ev := range kept {
			if ev.Seq > from && out.event(es.eventID(ev.Seq), "message", ev.Data) {
				es.sent = ev.Seq
			}
		}
	}
	es.out = out
	return es.ended, true
}

// forget stops keeping the stream's events and, when del is set, deletes what is kept
// (the stream has nothing more to say, or the session is ending).
func (es *eventStream) forget(del bool) {
	es.mu.Lock()
	k := es.keep
	es.keep = nil
	es.mu.Unlock()
	if k == nil || !del {
		return
	}
	if err := k.events.DeleteStream(context.Background(), k.session, k.stream); err != nil {
		k.log.Warn().Err(err).Str("stream", k.stream).Msg("event store: could not delete a stream's events")
	}
}

// hold keeps out carrying the stream, with a keep-alive comment on every beat, until
// the stream ends (ended is true) or client, session or drain is closed; out is detached
// either way.
func (es *eventStream) hold(out *streamOut, tick *beat, client, session, drain <-chan struct{}) (ended bool) {
	defer es.detach(out)
	for {
		select {
		case <-es.endCh:
			return true
		case <-tick.next():
			out.comment()
		case <-client:
			return false
		case <-session:
			return false
		case <-drain:
			return false
		}
	}
}

// detach stops out carrying the stream (its client went away).
func (es *eventStream) detach(out *streamOut) {
	es.mu.Lock()
	if es.out == out {
		es.out = nil
	}
	es.mu.Unlock()
	out.close()
}

// delivered reports whether the stream has ended and its final event reached a client.
func (es *eventStream) delivered() bool {
	es.mu.Lock()
	defer es.mu.Unlock()
	return es.ended && es.sent == es.seq
}

// parseEventID splits a Last-Event-ID into the stream id and sequence number.
func parseEventID(s string) (stream string, seq int64, ok bool) {
	i := strings.LastIndexByte(s, '-')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(s[i+1:], 10, 63)
	if err != nil {
		return "", 0, false
	}
	return s[:i], int64(n), true
}

// requestSink is where the messages related to one request go: the request's own
// answer stream. Without one (stdio) they go to the session's stream.
type requestSink interface {
	notify(method string, params json.RawMessage)
	// request sends a server-to-client request tied to the request.
	request(m *jsonrpc.Message) error
}

// answer is how a POSTed request (or batch of requests) is answered: as JSON when the
// response is all there is to say, as an event stream as soon as something related to
// the request (progress, a log message, a server-to-client request) comes first.
type answer struct {
	w      http.ResponseWriter
	hs     *httpSession // the legacy session whose stream this is; nil for modern requests
	batch  bool         // answer with an array
	modern bool         // a 2026-07-28 request: some errors are HTTP statuses
	prime  bool         // start an event stream with a priming event (2025-11-25 and later)
	opened bool         // set by open
	reqID  jsonrpc.ID   // the request answered (invalid for a batch)
	beat   *beat        // keeps the answer alive while an inline exchange runs; nil: no inline exchange
	inline router.InlineContext

	mu      sync.Mutex
	es      *eventStream // nil until the answer becomes a stream
	out     *streamOut
	finals  []*jsonrpc.Message // responses, while the answer is not a stream
	written bool               // the JSON answer went out from finish
	gone    bool               // the handler has returned (client gone, or draining)
	pending int                // responses still to come
	// done is closed when pending reaches zero; made by wait only when it must block
	// (an answer complete before its handler waits, as when the handler ran the call
	// itself, needs none).
	done chan struct{}
}

func newAnswer(w http.ResponseWriter, hs *httpSession, requests int) *answer {
	return &answer{w: w, hs: hs, pending: requests}
}

// stream turns the answer into an event stream, if it is not one yet; a.mu is held.
func (a *answer) stream() *eventStream {
	if a.es != nil {
		return a.es
	}
	a.out = openEventStream(a.w)
	if a.hs != nil {
		a.es = a.hs.newStream(a.reqID)
		if a.prime {
			a.es.prime(a.out)
		}
	} else {
		a.es = newEventStream("", nil)
	}
	// A new stream: nothing to replay, so nothing can fail.
	a.es.attach(context.Background(), a.out, -1)
	for _, m := range a.finals { // a batch's responses that came before the first event
		a.sendLocked(m, false)
	}
	a.finals = nil
	return a.es
}

func (a *answer) sendLocked(m *jsonrpc.Message, last bool) {
	b, err := m.Encode()
	if err != nil {
		return
	}
	a.es.send(b, last)
}

func (a *answer) notify(method string, params json.RawMessage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == 0 {
		return // answered: nothing more may go on this stream
	}
	a.stream()
	a.sendLocked(jsonrpc.NewNotification(method, params), false)
}

func (a *answer) request(m *jsonrpc.Message) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == 0 {
		return errAnswered
	}
	a.stream()
	a.sendLocked(m, false)
	return nil
}

var errAnswered = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the request is already answered"}

// finish records one response (nil: the request gets none, e.g. it was cancelled).
func (a *answer) finish(m *jsonrpc.Message) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == 0 {
		return
	}
	a.pending--
	last := a.pending == 0
	switch {
	case a.es != nil && m != nil:
		a.sendLocked(m, last)
	case a.es != nil && last:
		a.es.mu.Lock()
		if !a.es.ended {
			a.es.ended = true
			close(a.es.endCh)
		}
		a.es.mu.Unlock()
	case m != nil && last && !a.batch && len(a.finals) == 0 && !a.gone:
		// The common case: the response is all there is. It is written here, on the
		// goroutine that has it, with its length, so the client has the whole answer
		// without waiting for the handler's goroutine to wake up and end the response.
		a.writeFinalLocked(m)
		a.written = true
	case m != nil:
		a.finals = append(a.finals, m)
	}
	if last && a.done != nil {
		close(a.done)
	}
}

// writeFinalLocked writes a single JSON answer; a.mu is held. Modern-era errors that are
// HTTP statuses get theirs.
func (a *answer) writeFinalLocked(m *jsonrpc.Message) {
	status := http.StatusOK
	if a.modern && m.Error != nil {
		switch m.Error.Code {
		case mcp.CodeHeaderMismatch, mcp.CodeMissingClientCapability, mcp.CodeUnsupportedVersion:
			status = http.StatusBadRequest // the modern transport answers these with 400, whoever raised them
		}
	}
	writeMessage(a.w, status, m)
	if f, ok := a.w.(http.Flusher); ok {
		f.Flush()
	}
}

// InlineStarted implements router.InlineHook: the handler's goroutine runs the call's
// exchange with the upstream, so the beat keeps the answer alive until InlineEnded.
func (a *answer) InlineStarted() { a.beat.watch(a) }

// InlineEnded implements router.InlineHook.
func (a *answer) InlineEnded() { a.beat.unwatch(a) }

// keepAlive writes a comment, opening the stream if the answer is still pending, so
// that load balancers do not cut a long call.
func (a *answer) keepAlive() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == 0 || a.gone {
		return
	}
	a.stream()
	a.out.comment()
}

// complete writes the answer once every response is in (on the handler's goroutine).
func (a *answer) complete() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.written {
		return
	}
	if a.es != nil {
		a.out.close()
		if a.hs != nil && a.es.delivered() {
			a.hs.dropStream(a.es)
		}
		return
	}
	switch {
	case len(a.finals) == 0:
		a.w.WriteHeader(http.StatusAccepted)
	case a.batch:
		var b []byte
		b = append(b, '[')
		for i, m := range a.finals {
			if i > 0 {
				b = append(b, ',')
			}
			b, _ = m.Append(b)
		}
		b = append(b, ']')
		a.w.Header().Set("Content-Type", "application/json")
		a.w.Write(b)
	default:
		a.writeFinalLocked(a.finals[0])
	}
}

// disconnect handles the client going away before the answer is complete: a legacy
// stream is kept for resumption; reports whether the answer was still pending.
func (a *answer) disconnect() (pending bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gone = true // the handler returns: nothing may touch its ResponseWriter now
	if a.es != nil {
		a.es.detach(a.out)
	}
	return a.pending > 0
}

// wait serves the answer until it is complete or the client goes away; gone reports the
// latter. A closed drain or ended ends the wait as if the client went away (for streams
// that never end by themselves, such as subscriptions, when the proxy shuts down or the
// subscription's endpoint is no longer served). tick
// beats every keep-alive interval (shared by all requests: no timer per request).
func (a *answer) wait(ctx context.Context, tick *beat, drain, ended <-chan struct{}) (gone bool) {
	a.mu.Lock()
	if a.pending == 0 {
		a.mu.Unlock()
		// Complete already (the call ran on this goroutine, see AllowInline): no need
		// for a done channel, the request context's (allocated on first use) or the beat.
		a.complete()
		return false
	}
	if a.done == nil {
		a.done = make(chan struct{})
	}
	done := a.done
	a.mu.Unlock()
	for {
		select {
		case <-done:
			a.complete()
			return false
		case <-tick.next():
			a.keepAlive()
		case <-ctx.Done():
			return a.disconnect()
		case <-drain:
			return a.disconnect()
		case <-ended:
			return a.disconnect()
		}
	}
}

// beat is a broadcast tick: every interval the current channel is closed and replaced,
// so any number of waiters can wake on it for the price of an atomic load each.
type beat struct {
	ch   atomic.Pointer[chan struct{}]
	stop chan struct{}

	mu     sync.Mutex           // guards inline
	inline map[*answer]struct{} // answers whose handler runs their call (see watch)
}

func newBeat(interval time.Duration) *beat {
	b := &beat{stop: make(chan struct{})}
	ch := make(chan struct{})
	b.ch.Store(&ch)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-t.C:
				next := make(chan struct{})
				close(*b.ch.Swap(&next))
				b.keepInlineAlive()
			}
		}
	}()
	return b
}

// next is the channel closed at the next beat.
func (b *beat) next() <-chan struct{} { return *b.ch.Load() }

// watch has the beat keep a alive (see answer.keepAlive) until unwatch, while the
// handler that would otherwise do it in wait is busy running the call itself (an inline
// exchange with an HTTP upstream).
func (b *beat) watch(a *answer) {
	b.mu.Lock()
	if b.inline == nil {
		b.inline = make(map[*answer]struct{})
	}
	b.inline[a] = struct{}{}
	b.mu.Unlock()
}

// unwatch ends watch: once it returns, the beat no longer touches a.
func (b *beat) unwatch(a *answer) {
	b.mu.Lock()
	delete(b.inline, a)
	b.mu.Unlock()
}

// keepInlineAlive keeps every watched answer alive; b.mu is held throughout, so that
// unwatch waits for it.
func (b *beat) keepInlineAlive() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for a := range b.inline {
		a.keepAlive()
	}
}

func (b *beat) close() { close(b.stop) }

// eventSink is a session's GET stream: the session writes lines to it (as to stdout);
// they go out as events on the client's open GET request, and are kept (a bounded
// number) while none is open.
type eventSink struct {
	es   *eventStream
	beat *beat // keep-alive ticks

	mu  sync.Mutex
	out *streamOut // the newest GET request's connection
}

func newEventSink(es *eventStream, tick *beat) *eventSink {
	return &eventSink{es: es, beat: tick}
}

// Write implements io.Writer for the session's line writer: one line per message.
func (e *eventSink) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		e.es.send(line, false)
	}
	return len(p), nil
}

// abort aborts the connection carrying the GET stream, if any (see streamOut.abort).
func (e *eventSink) abort() {
	e.mu.Lock()
	out := e.out
	e.mu.Unlock()
	if out != nil {
		out.abort()
	}
}

// serve carries the GET stream on this request until the client or the session ends
// it; lastID is the Last-Event-ID the client resumes from (-1: none). first, when
// set, writes an event before anything else.
func (e *eventSink) serve(w http.ResponseWriter, r *http.Request, ctx context.Context, drain <-chan struct{}, lastID int64, first func(*streamOut)) {
	out := openEventStream(w)
	if first != nil {
		first(out)
	}
	e.es.prime(out)
	e.mu.Lock()
	prev := e.out
	e.out = out // the newest GET stream wins: each message goes on exactly one stream
	e.mu.Unlock()
	if prev != nil {
		e.es.detach(prev)
	}
	if _, ok := e.es.attach(r.Context(), out, lastID); !ok {
		out.close()
		return
	}
	e.es.hold(out, e.beat, r.Context().Done(), ctx.Done(), drain)
}
