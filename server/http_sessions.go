package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// sessionOf finds the legacy session a POST belongs to, or answers the error: 400
// without Mcp-Session-Id or with a bad MCP-Protocol-Version, 404 for an unknown session,
// 403 for another principal's.
func (h *HTTPHandler) sessionOf(w http.ResponseWriter, r *http.Request, id jsonrpc.ID, endpoint string) *httpSession {
	hs, status := h.sessionFor(r, endpoint)
	switch status {
	case http.StatusBadRequest:
		httpError(w, status, id, jsonrpc.CodeInvalidRequest, "Bad Request: exactly one Mcp-Session-Id header is required")
		return nil
	case http.StatusNotFound:
		httpError(w, status, id, jsonrpc.CodeInvalidRequest, "Session not found")
		return nil
	case http.StatusForbidden:
		httpError(w, status, id, jsonrpc.CodeInvalidRequest, "Forbidden: the session belongs to another principal")
		return nil
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !mcp.IsLegacyVersion(v) {
		httpError(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidRequest, "Bad Request: unsupported MCP-Protocol-Version "+v)
		return nil
	}
	return hs
}

// sessionFor finds the Streamable HTTP session of a request on endpoint's path by its
// Mcp-Session-Id header (see session); a request that repeats the header is a 400, like
// one without: the proxy must not check one session and act in another an intermediary
// chose.
func (h *HTTPHandler) sessionFor(r *http.Request, endpoint string) (*httpSession, int) {
	ids := r.Header.Values("Mcp-Session-Id")
	if len(ids) != 1 || ids[0] == "" {
		return nil, http.StatusBadRequest
	}
	return h.session(ids[0], false, r, endpoint)
}

// session finds the session sid for a request r on one transport (sse: the legacy
// HTTP+SSE /message endpoint; otherwise Streamable HTTP) of one endpoint: status 404
// for an unknown session or one opened on the other transport or another endpoint, 403
// when it belongs to another principal, and 200 with the session. Only a request the
// session accepts counts as its use (keeps it from expiring).
func (h *HTTPHandler) session(sid string, sse bool, r *http.Request, endpoint string) (*httpSession, int) {
	h.mu.RLock()
	hs := h.sessions[sid]
	h.mu.RUnlock()
	switch {
	case hs == nil || hs.sse != sse || hs.ss.endpoint != endpoint:
		return nil, http.StatusNotFound
	case !hs.samePrincipal(r):
		return nil, http.StatusForbidden
	}
	hs.lastUsed.Store(time.Now().UnixNano())
	return hs, http.StatusOK
}

// requestSession is the legacy session a request names, for HTTPOptions.Forward: its one
// Mcp-Session-Id header on a Streamable HTTP path, its one sessionId parameter on a
// /message path; "" when it names none (or names it twice: the handler refuses that
// itself).
func (h *HTTPHandler) requestSession(r *http.Request, rt httpRoute) string {
	switch rt.kind {
	case routeStreamable:
		if ids := r.Header.Values("Mcp-Session-Id"); len(ids) == 1 {
			return ids[0]
		}
	case routeMessage:
		if sid, ok := singleQueryValue(r.URL.RawQuery, "sessionId"); ok {
			return sid
		}
	}
	return ""
}

// holds reports whether the handler holds session sid.
func (h *HTTPHandler) holds(sid string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.sessions[sid] != nil
}

// plainSessionError answers a GET or DELETE whose session sessionFor did not find.
func plainSessionError(w http.ResponseWriter, status int) {
	msg := map[int]string{
		http.StatusBadRequest: "exactly one Mcp-Session-Id header is required",
		http.StatusNotFound:   "session not found",
		http.StatusForbidden:  "the session belongs to another principal",
	}[status]
	http.Error(w, msg, status)
}

// samePrincipal reports whether a request comes from the principal that opened the
// session: a session id is no credential of its own. Principals are the same when
// they have the same identity: the same name established the same way, by the same
// issuer (an API key named "alice" is not a token whose subject is "alice").
func (hs *httpSession) samePrincipal(r *http.Request) bool {
	p := principal.From(r.Context())
	if hs.principal == nil || p == nil {
		return hs.principal == nil && p == nil
	}
	return hs.principal.ID() == p.ID()
}

// requestContext is the context the messages of HTTP request r are handled under:
// base (the session's context, or the server's for a modern request) with the
// principal that authenticated r. In a session, that is the principal that opened it
// (session has checked), so policy decides on who really sent each message, whatever
// the transport. HTTPOptions.RequestContext adds the rest.
func (h *HTTPHandler) requestContext(base context.Context, r *http.Request) context.Context {
	ctx := base
	if p := principal.From(r.Context()); p != nil {
		ctx = principal.With(base, p)
	}
	if h.opts.RequestContext != nil {
		ctx = h.opts.RequestContext(ctx, r)
	}
	return ctx
}

// newHTTPSession makes a session of endpoint (not yet registered) with id, or a
// cryptographically random id when id is "", whose output goes to its event sink; nil
// when the cap on sessions is reached. A session with a given id is adoptable
// (HTTPOptions.Share).
func (h *HTTPHandler) newHTTPSession(id, endpoint string) *httpSession {
	return h.newHTTPSessionStreams(id, "", endpoint)
}

// newHTTPSessionStreams is newHTTPSession for a session whose streams' ids start with
// streamPrefix (an adopted one's: see httpSession.streamPrefix).
func (h *HTTPHandler) newHTTPSessionStreams(id, streamPrefix, endpoint string) *httpSession {
	if h.isDraining() {
		return nil
	}
	h.mu.Lock()
	full := len(h.sessions) >= h.opts.MaxSessions
	h.mu.Unlock()
	if full {
		return nil
	}
	var share SessionShare
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:]) // never fails since Go 1.24
		id = h.opts.SessionIDPrefix + hex.EncodeToString(b[:])
	} else {
		share = h.opts.Share
	}
	short := id[:min(len(id), len(h.opts.SessionIDPrefix)+8)]
	hs := &httpSession{id: id, events: h.opts.Events, share: share, streamPrefix: streamPrefix,
		log: h.s.log.With().Str("session", short).Logger()}
	hs.get = newEventSink(newEventStream(hs.getStreamID(), hs.keeper(hs.getStreamID())), h.beat)
	hs.ctx, hs.cancel = context.WithCancel(h.s.baseCtx)
	hs.out = newOutbox(hs.get, h.s.cur().MaxClientBuffer, func() { h.stuck(hs) })
	hs.ss = newSession(h.s, transport.NewOutputStream(hs.out), hs.log)
	hs.ss.maxInFlight = h.s.maxClientInFlight()
	hs.ss.corkless = true
	hs.ss.transport, hs.ss.id, hs.ss.endpoint = TransportStreamableHTTP, id, endpoint
	if share != nil {
		hs.ss.onChange = hs.noteChange
		hs.ss.active.SetOnChange(hs.noteActive)
	}
	hs.lastUsed.Store(time.Now().UnixNano())
	return hs
}

// stuck ends a session whose client left more than MaxClientBuffer bytes of its event
// stream unread: the GET stream's connection is aborted (its blocked write fails) and
// the session closed, as a DELETE would. It is called from a writer of the session's,
// which must not wait for it.
func (h *HTTPHandler) stuck(hs *httpSession) {
	hs.log.Error().Int("max_client_buffer", h.s.maxClientBuffer()).
		Msg("the client is not reading its event stream: more than max_client_buffer bytes unread; session ended")
	go func() {
		hs.get.abort()
		h.mu.Lock()
		if h.sessions[hs.id] == hs {
			delete(h.sessions, hs.id)
		}
		h.mu.Unlock()
		hs.close()
		hs.ended()
	}()
}

// expire ends legacy sessions idle for longer than SessionIdle.
func (h *HTTPHandler) expire() {
	defer h.wg.Done()
	t := time.NewTicker(min(h.opts.SessionIdle/4, time.Minute))
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			var idle []*httpSession
			h.mu.Lock()
			for id, hs := range h.sessions {
				if now.Sub(time.Unix(0, hs.lastUsed.Load())) > h.opts.SessionIdle {
					delete(h.sessions, id)
					idle = append(idle, hs)
				}
			}
			h.mu.Unlock()
			for _, hs := range idle {
				h.s.log.Info().Str("session", hs.id).Msg("idle HTTP session ended")
				hs.close()
				hs.ended()
			}
		}
	}
}

// ended removes what the share recorded of a session DELETE, idle expiry or a stuck
// client ended (not one the handler's Close ends: another replica may adopt that one).
func (hs *httpSession) ended() {
	if hs.share == nil {
		return
	}
	hs.stateMu.Lock()
	hs.gone = true // no write of its state starts after this
	hs.stateMu.Unlock()
	hs.saveMu.Lock() // and the one under way, if any, ends before the removal
	defer hs.saveMu.Unlock()
	hs.share.Ended(context.Background(), hs.id)
}

// close ends the session, and forgets what its streams kept for replay.
func (hs *httpSession) close() {
	hs.cancel()
	hs.ss.shutdown()
	hs.mu.Lock()
	streams := make([]*eventStream, 0, len(hs.streams)+1)
	streams = append(streams, hs.get.es)
	for _, es := range hs.streams {
		streams = append(streams, es)
	}
	hs.mu.Unlock()
	for _, es := range streams {
		es.forget(false) // a late event (a notification racing the end) keeps nothing
	}
	if err := hs.events.DeleteSession(context.Background(), hs.id); err != nil {
		hs.log.Warn().Err(err).Msg("event store: could not delete the session's events")
	}
	hs.out.Close(0) // its goroutine ends once the queue is out, or its connection failed
}
