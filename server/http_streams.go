package server

import (
	"net/http"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// getStream serves a legacy session's GET stream (messages tied to no request), or
// resumes a stream whose connection broke when Last-Event-ID names one.
func (h *HTTPHandler) getStream(w http.ResponseWriter, r *http.Request, endpoint string) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		http.Error(w, "Accept must include text/event-stream", http.StatusNotAcceptable)
		return
	}
	hs, status := h.sessionFor(r, endpoint)
	if hs == nil {
		plainSessionError(w, status)
		return
	}
	after := int64(-1)
	if last := r.Header.Get("Last-Event-Id"); last != "" {
		if stream, seq, ok := parseEventID(last); ok {
			if stream != hs.getStreamID() {
				if es := hs.findStream(stream); es != nil {
					h.resume(w, r, hs, es, seq)
					return
				}
				if id, ok := hs.lostCall(stream); ok {
					answerLost(w, id) // the stream was on the replica that stopped
					return
				}
			} else {
				after = seq
			}
		}
	}
	hs.get.serve(w, r, hs.ctx, h.draining, after, nil)
}

// resume carries on a POST's answer stream on a GET request: what the client missed,
// then the rest as it comes.
func (h *HTTPHandler) resume(w http.ResponseWriter, r *http.Request, hs *httpSession, es *eventStream, after int64) {
	out := openEventStream(w)
	ended, ok := es.attach(r.Context(), out, after)
	if !ok { // the store failed (logged): the response ends, the client reconnects
		out.close()
		return
	}
	if ended {
		es.detach(out)
		hs.dropStream(es)
		return
	}
	if es.hold(out, h.beat, r.Context().Done(), hs.ctx.Done(), h.draining) && es.delivered() {
		hs.dropStream(es)
	}
}

func (h *HTTPHandler) delete(w http.ResponseWriter, r *http.Request, endpoint string) {
	hs, status := h.sessionFor(r, endpoint)
	if hs == nil {
		plainSessionError(w, status)
		return
	}
	h.mu.Lock()
	removed := h.sessions[hs.id] == hs
	if removed {
		delete(h.sessions, hs.id)
	}
	h.mu.Unlock()
	if !removed { // deleted meanwhile by another request
		plainSessionError(w, http.StatusNotFound)
		return
	}
	hs.close()
	hs.ended()
	w.WriteHeader(http.StatusNoContent)
}

// getStreamID names the GET stream in event ids; POST streams are numbered.
const getStreamID = "g"

// getStreamID names the session's GET stream in its event ids: an adopted session's is
// not the gone replica's, whose event numbers mean nothing here (a client resuming from
// one gets what the session has not sent yet, rather than what follows that number).
func (hs *httpSession) getStreamID() string { return hs.streamPrefix + getStreamID }

// newStream registers a new resumable stream for a POST's answer.
func (hs *httpSession) newStream(req jsonrpc.ID) *eventStream {
	hs.mu.Lock()
	hs.nextStream++
	id := hs.streamIDFor(hs.nextStream, req)
	es := newEventStream(id, hs.keeper(id))
	if hs.streams == nil {
		hs.streams = map[string]*eventStream{}
	}
	hs.streams[es.id] = es
	hs.order = append(hs.order, es.id)
	var forgotten []*eventStream
	for len(hs.order) > keepDetachedStreams { // forget the oldest
		forgotten = append(forgotten, hs.streams[hs.order[0]])
		delete(hs.streams, hs.order[0])
		hs.order = hs.order[1:]
	}
	hs.mu.Unlock()
	for _, old := range forgotten {
		old.forget(true) // outside hs.mu: the store may go over the network
	}
	return es
}

// keeper is where the session's stream named key keeps its events.
func (hs *httpSession) keeper(key string) *streamStore {
	return &streamStore{events: hs.events, session: hs.id, stream: key, log: &hs.log}
}

func (hs *httpSession) findStream(id string) *eventStream {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.streams[id]
}

// dropStream forgets a stream that has nothing more to say.
func (hs *httpSession) dropStream(es *eventStream) {
	hs.mu.Lock()
	if hs.streams[es.id] != es {
		hs.mu.Unlock()
		return // forgotten already
	}
	delete(hs.streams, es.id)
	for i, id := range hs.order {
		if id == es.id {
			hs.order = append(hs.order[:i], hs.order[i+1:]...)
			break
		}
	}
	hs.mu.Unlock()
	es.forget(true)
}

// primes reports whether the session's answer streams start with a priming event
// (2025-11-25 and later; earlier clients may not expect an event without data).
func (hs *httpSession) primes() bool {
	return hs.version >= "2025-11-25"
}
