package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// HTTPOptions configures the Streamable HTTP front end.
type HTTPOptions struct {
	Path           string        // the MCP endpoint, e.g. /mcp
	AllowedOrigins []string      // Origin patterns; empty means loopback origins only
	Loopback       bool          // bound to a loopback address: Host must be a loopback name
	MaxBody        int           // bytes of one POST body
	KeepAlive      time.Duration // comment lines on idle event streams
	SessionIdle    time.Duration // idle legacy sessions are ended after this
	MaxSessions    int
}

// HTTPHandler serves MCP over Streamable HTTP: legacy sessions (initialize, then POSTs
// with Mcp-Session-Id, a GET stream, DELETE) and modern stateless requests, on one
// endpoint. Every request's answer is an event stream that carries its progress before
// its response; messages tied to no request go on the session's GET stream.
type HTTPHandler struct {
	s    *Server
	opts HTTPOptions

	mu       sync.RWMutex // guards sessions
	sessions map[string]*httpSession
	modern   *session // serves every modern request (stateless: no state between them but parked calls)
	seq      atomic.Uint64
	stop     chan struct{}
	draining chan struct{} // closed by Drain
	beat     *beat         // keep-alive ticks for every waiting request
	wg       sync.WaitGroup
}

type httpSession struct {
	id        string
	sse       bool                 // a legacy HTTP+SSE session (GET /sse): addressed by /message?sessionId= only
	principal *principal.Principal // authenticated when the session was opened; every later request must be the same
	version   string               // negotiated at initialize
	ss        *session
	get       *eventSink // the client's GET stream sink
	ctx       context.Context
	cancel    context.CancelFunc
	lastUsed  atomic.Int64

	mu         sync.Mutex              // guards the fields below
	streams    map[string]*eventStream // resumable POST answer streams by id
	order      []string                // stream ids, oldest first
	nextStream uint64
}

// NewHTTPHandler returns the handler; Close ends its sessions.
func (s *Server) NewHTTPHandler(ctx context.Context, opts HTTPOptions) *HTTPHandler {
	if opts.Path == "" {
		opts.Path = "/mcp"
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = 4 << 20
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = 30 * time.Minute
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 1000
	}
	s.baseCtx = ctx
	h := &HTTPHandler{s: s, opts: opts, sessions: map[string]*httpSession{}, stop: make(chan struct{}), draining: make(chan struct{}),
		beat: newBeat(opts.KeepAlive)}
	h.modern = newSession(s, transport.NewOutputStream(io.Discard), s.log.With().Str("session", "http-modern").Logger())
	h.modern.corkless = true
	h.wg.Add(1)
	go h.expire()
	return h
}

// Drain prepares a graceful shutdown: event streams that would never end by themselves
// (GET streams, subscriptions) end now, and no new session starts, while requests in
// flight go on; then http.Server.Shutdown can wait for those, and Close end the rest.
func (h *HTTPHandler) Drain() {
	select {
	case <-h.draining:
	default:
		close(h.draining)
	}
}

func (h *HTTPHandler) isDraining() bool {
	select {
	case <-h.draining:
		return true
	default:
		return false
	}
}

// Close ends every session and the idle sweeper.
func (h *HTTPHandler) Close() {
	select {
	case <-h.stop:
		return
	default:
		close(h.stop)
	}
	h.mu.Lock()
	all := make([]*httpSession, 0, len(h.sessions))
	for _, hs := range h.sessions {
		all = append(all, hs)
	}
	h.sessions = map[string]*httpSession{}
	h.mu.Unlock()
	for _, hs := range all {
		hs.close()
	}
	h.modern.shutdown()
	h.beat.close()
	h.wg.Wait()
}

func (hs *httpSession) close() {
	hs.cancel()
	hs.ss.shutdown()
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
			}
		}
	}
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != h.opts.Path && r.URL.Path != legacySSEPath && r.URL.Path != legacyMessagePath {
		http.NotFound(w, r)
		return
	}
	if !h.hostAllowed(r.Host) {
		httpError(w, http.StatusForbidden, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Forbidden: Host is not a loopback name")
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !h.originAllowed(o) {
		httpError(w, http.StatusForbidden, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Forbidden: Origin not allowed")
		return
	}
	if r.URL.Path != h.opts.Path { // the configured endpoint wins, even at /sse or /message
		switch {
		case r.URL.Path == legacySSEPath && r.Method == http.MethodGet:
			h.legacySSE(w, r)
		case r.URL.Path == legacyMessagePath && r.Method == http.MethodPost:
			h.legacyMessage(w, r)
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.getStream(w, r)
	case http.MethodDelete:
		h.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (h *HTTPHandler) hostAllowed(host string) bool {
	if !h.opts.Loopback {
		return true
	}
	name := host
	if hn, _, err := net.SplitHostPort(host); err == nil {
		name = hn
	}
	name = strings.Trim(name, "[]")
	return name == "localhost" || name == "127.0.0.1" || name == "::1"
}

func (h *HTTPHandler) originAllowed(origin string) bool {
	patterns := h.opts.AllowedOrigins
	if len(patterns) == 0 {
		patterns = []string{"http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*", "https://localhost:*"}
	}
	for _, p := range patterns {
		if p == "*" || p == origin {
			return true
		}
		if prefix, ok := strings.CutSuffix(p, ":*"); ok {
			if origin == prefix || strings.HasPrefix(origin, prefix+":") {
				return true
			}
		}
	}
	return false
}

func httpError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, msg string) {
	writeMessage(w, status, jsonrpc.NewErrorResponse(id, jsonrpc.Errorf(code, "%s", msg)))
}

// jsonContentType is shared by every JSON answer's header; nothing appends to it.
var jsonContentType = []string{"application/json"}

// writeMessage answers with one JSON-RPC message as application/json, with its length.
func writeMessage(w http.ResponseWriter, status int, m *jsonrpc.Message) {
	b, err := m.Encode()
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType // canonical keys set directly: no copy, no lookup
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	w.Write(b)
}

func acceptsBoth(r *http.Request) bool {
	var json, sse bool
	for _, a := range r.Header.Values("Accept") {
		any := strings.Contains(a, "*/*")
		json = json || any || strings.Contains(a, "application/json")
		sse = sse || any || strings.Contains(a, "text/event-stream")
	}
	return json && sse
}

func (h *HTTPHandler) post(w http.ResponseWriter, r *http.Request) {
	if !acceptsBoth(r) {
		httpError(w, http.StatusNotAcceptable, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"Not Acceptable: Accept must list application/json and text/event-stream")
		return
	}
	body, err := readBody(r, h.opts.MaxBody)
	if err != nil {
		httpError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "Parse error: "+err.Error())
		return
	}
	if len(body) > h.opts.MaxBody {
		httpError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Request body too large")
		return
	}
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '[' {
		hs := h.sessionOf(w, r, jsonrpc.ID{})
		if hs != nil {
			h.serveBatch(w, r, hs, t)
		}
		return
	}
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		var id jsonrpc.ID
		if msg != nil {
			id = msg.ID
		}
		je := jsonrpc.DecodeError(err)
		httpError(w, http.StatusBadRequest, id, je.Code, je.Message)
		return
	}
	meta, version := modernMeta(msg.Params)
	if msg.IsRequest() && (version != "" || msg.Method == mcp.MethodServerDiscover) {
		// The headers first: a version header that disagrees with _meta is a mismatch
		// (-32020) before it is an unsupported version (-32022).
		var jerr *jsonrpc.Error
		if version != "" {
			jerr = h.checkHeaders(r, msg, version)
		}
		var rm requestMeta
		if jerr == nil {
			rm, jerr = h.modern.modernPrecheck(msg, meta, version)
		}
		if jerr != nil {
			status := http.StatusBadRequest
			if jerr.Code == jsonrpc.CodeMethodNotFound {
				status = http.StatusNotFound
			}
			writeMessage(w, status, jsonrpc.NewErrorResponse(msg.ID, jerr))
			return
		}
		h.serveRequest(w, r, h.s.baseCtx, nil, h.modern, msg, meta, &rm)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if msg.IsRequest() && msg.Method == mcp.MethodInitialize {
		if sid != "" {
			httpError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidRequest, "Invalid Request: initialize inside a session")
			return
		}
		h.initialize(w, r, msg)
		return
	}
	hs := h.sessionOf(w, r, msg.ID)
	if hs == nil {
		return
	}
	switch {
	case msg.IsNotification():
		hs.ss.handleNotification(msg)
		w.WriteHeader(http.StatusAccepted)
	case msg.IsResponse():
		hs.ss.deliverResponse(msg)
		w.WriteHeader(http.StatusAccepted)
	default:
		h.serveRequest(w, r, hs.ctx, hs, hs.ss, msg, meta, nil)
	}
}

// sessionOf finds the legacy session a POST belongs to, or answers the error: 400
// without Mcp-Session-Id or with a bad MCP-Protocol-Version, 404 for an unknown session,
// 403 for another principal's.
func (h *HTTPHandler) sessionOf(w http.ResponseWriter, r *http.Request, id jsonrpc.ID) *httpSession {
	hs, status := h.sessionFor(r)
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

// sessionFor finds the Streamable HTTP session of a request by its Mcp-Session-Id
// header (see session); a request that repeats the header is a 400, like one without:
// the proxy must not check one session and act in another an intermediary chose.
func (h *HTTPHandler) sessionFor(r *http.Request) (*httpSession, int) {
	ids := r.Header.Values("Mcp-Session-Id")
	if len(ids) != 1 || ids[0] == "" {
		return nil, http.StatusBadRequest
	}
	return h.session(ids[0], false, r)
}

// session finds the session sid for a request r on one transport (sse: the legacy
// HTTP+SSE /message endpoint; otherwise Streamable HTTP): status 404 for an unknown
// session or one opened on the other transport, 403 when it belongs to another
// principal, and 200 with the session. Only a request the session accepts counts as
// its use (keeps it from expiring).
func (h *HTTPHandler) session(sid string, sse bool, r *http.Request) (*httpSession, int) {
	h.mu.RLock()
	hs := h.sessions[sid]
	h.mu.RUnlock()
	switch {
	case hs == nil || hs.sse != sse:
		return nil, http.StatusNotFound
	case !hs.samePrincipal(r):
		return nil, http.StatusForbidden
	}
	hs.lastUsed.Store(time.Now().UnixNano())
	return hs, http.StatusOK
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
// they have the same name, established the same way (an API key named "alice" is not
// a token whose subject is "alice").
func (hs *httpSession) samePrincipal(r *http.Request) bool {
	p := principal.From(r.Context())
	if hs.principal == nil || p == nil {
		return hs.principal == nil && p == nil
	}
	return hs.principal.Name == p.Name && hs.principal.Via == p.Via
}

// requestContext is the context the messages of HTTP request r are handled under:
// base (the session's context, or the server's for a modern request) with the
// principal that authenticated r. In a session, that is the principal that opened it
// (session has checked), so policy decides on who really sent each message, whatever
// the transport.
func requestContext(base context.Context, r *http.Request) context.Context {
	if p := principal.From(r.Context()); p != nil {
		return principal.With(base, p)
	}
	return base
}

// readBody reads a request body of at most max bytes (one more tells it was longer),
// sized from Content-Length when the client gave one.
func readBody(r *http.Request, max int) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= int64(max) {
		// The usual case: one buffer of the announced length, filled in place.
		buf := make([]byte, n)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	buf := bytes.NewBuffer(make([]byte, 0, 512))
	_, err := buf.ReadFrom(io.LimitReader(r.Body, int64(max)+1))
	return buf.Bytes(), err
}

// newHTTPSession makes a session (not yet registered) with a cryptographically random
// id, whose output goes to its event sink; nil when the cap on sessions is reached.
func (h *HTTPHandler) newHTTPSession() *httpSession {
	if h.isDraining() {
		return nil
	}
	h.mu.Lock()
	full := len(h.sessions) >= h.opts.MaxSessions
	h.mu.Unlock()
	if full {
		return nil
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	id := hex.EncodeToString(b[:])
	hs := &httpSession{id: id}
	hs.get = newEventSink(newEventStream(getStreamID, keepEvents), h.beat)
	hs.ctx, hs.cancel = context.WithCancel(h.s.baseCtx)
	hs.ss = newSession(h.s, transport.NewOutputStream(hs.get), h.s.log.With().Str("session", id[:8]).Logger())
	hs.ss.corkless = true
	hs.lastUsed.Store(time.Now().UnixNano())
	return hs
}

// initialize creates a legacy session and answers its handshake as JSON.
func (h *HTTPHandler) initialize(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) {
	hs := h.newHTTPSession()
	if hs == nil {
		reason := "Too many sessions"
		if h.isDraining() {
			reason = "The proxy is shutting down"
		}
		httpError(w, http.StatusServiceUnavailable, msg.ID, jsonrpc.CodeInternalError, reason)
		return
	}
	id := hs.id
	hs.principal = principal.From(r.Context())
	done := make(chan *jsonrpc.Message, 1)
	hs.ss.handleRequest(hs.ctx, msg, func(m *jsonrpc.Message) { done <- m })
	resp := <-done
	if resp == nil || resp.Error != nil {
		writeJSON(w, resp)
		hs.close()
		return
	}
	hs.version, _, _ = jsonx.GetString(resp.Result, "protocolVersion")
	h.mu.Lock()
	h.sessions[id] = hs
	h.mu.Unlock()
	w.Header().Set("Mcp-Session-Id", id)
	writeJSON(w, resp)
}

func writeJSON(w http.ResponseWriter, m *jsonrpc.Message) {
	if m == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	writeMessage(w, http.StatusOK, m)
}

// serveRequest answers one request: as JSON, or as an event stream carrying its related
// messages before its response. For a modern request a closed stream cancels it; a
// legacy request goes on (the spec's rule) and its stream can be resumed.
// meta is the request's _meta, read once by the caller.
func (h *HTTPHandler) serveRequest(w http.ResponseWriter, r *http.Request, base context.Context, hs *httpSession, ss *session, msg *jsonrpc.Message, meta json.RawMessage, rm *requestMeta) {
	a := newAnswer(w, hs, 1)
	if hs != nil {
		a.prime = hs.primes()
	}
	a.modern = rm != nil
	clientID := msg.ID
	inner := *msg
	if rm != nil {
		// Many clients share the modern session: give the request an id of its own.
		inner.ID = jsonrpc.StringID("h" + strconv.FormatUint(h.seq.Add(1), 10))
	}
	reply := func(m *jsonrpc.Message) {
		if m != nil {
			c := *m
			c.ID = clientID
			m = &c
		}
		a.finish(m)
	}
	ctx := withRequestSink(requestContext(base, r), a)
	if rm != nil {
		ss.serveModern(ctx, &inner, *rm, reply)
	} else {
		ss.handleLegacy(ctx, &inner, meta, reply)
	}
	var drain <-chan struct{}
	if msg.Method == mcp.MethodSubscriptionsListen {
		drain = h.draining // a subscription only ends when someone ends it
	}
	if a.wait(r.Context(), h.beat, drain) && rm != nil {
		key := inner.ID.Key()
		if !ss.endListen(key) {
			ss.mu.Lock()
			c := ss.inflight[key]
			ss.mu.Unlock()
			if c != nil {
				c.Cancel() // closing the stream cancels a modern request
			}
		}
	}
}

// serveBatch answers a JSON-RPC batch in a legacy session (2025-03-26 allowed them;
// later versions did not, but clients still send them): notifications and responses
// are taken, and the requests answered together as an array or one event stream.
func (h *HTTPHandler) serveBatch(w http.ResponseWriter, r *http.Request, hs *httpSession, body []byte) {
	b, jerr := hs.ss.planBatch(body)
	if jerr != nil {
		httpError(w, http.StatusBadRequest, jsonrpc.ID{}, jerr.Code, jerr.Message)
		return
	}
	if len(b.requests)+len(b.refusals) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	a := newAnswer(w, hs, len(b.requests)+len(b.refusals))
	a.batch, a.prime = true, hs.primes()
	for _, m := range b.refusals {
		a.finish(m)
	}
	ctx := withRequestSink(requestContext(hs.ctx, r), a)
	for _, m := range b.requests {
		hs.ss.handleRequest(ctx, m, a.finish)
	}
	a.wait(r.Context(), h.beat, nil)
}

// getStream serves a legacy session's GET stream (messages tied to no request), or
// resumes a stream whose connection broke when Last-Event-ID names one.
func (h *HTTPHandler) getStream(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		http.Error(w, "Accept must include text/event-stream", http.StatusNotAcceptable)
		return
	}
	hs, status := h.sessionFor(r)
	if hs == nil {
		plainSessionError(w, status)
		return
	}
	after := int64(-1)
	if last := r.Header.Get("Last-Event-Id"); last != "" {
		if stream, seq, ok := parseEventID(last); ok {
			if stream != getStreamID {
				if es := hs.findStream(stream); es != nil {
					h.resume(w, r, hs, es, seq)
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
	if es.attach(out, after) {
		es.detach(out)
		hs.dropStream(es)
		return
	}
	if es.hold(out, h.beat, r.Context().Done(), hs.ctx.Done(), h.draining) && es.delivered() {
		hs.dropStream(es)
	}
}

func (h *HTTPHandler) delete(w http.ResponseWriter, r *http.Request) {
	hs, status := h.sessionFor(r)
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
	w.WriteHeader(http.StatusNoContent)
}

// getStreamID names the GET stream in event ids; POST streams are numbered.
const getStreamID = "g"

// newStream registers a new resumable stream for a POST's answer.
func (hs *httpSession) newStream() *eventStream {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.nextStream++
	es := newEventStream("p"+strconv.FormatUint(hs.nextStream, 10), keepEvents)
	if hs.streams == nil {
		hs.streams = map[string]*eventStream{}
	}
	hs.streams[es.id] = es
	hs.order = append(hs.order, es.id)
	for len(hs.order) > keepDetachedStreams { // forget the oldest
		delete(hs.streams, hs.order[0])
		hs.order = hs.order[1:]
	}
	return es
}

func (hs *httpSession) findStream(id string) *eventStream {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.streams[id]
}

// dropStream forgets a stream that has nothing more to say.
func (hs *httpSession) dropStream(es *eventStream) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.streams[es.id] != es {
		return
	}
	delete(hs.streams, es.id)
	for i, id := range hs.order {
		if id == es.id {
			hs.order = append(hs.order[:i], hs.order[i+1:]...)
			break
		}
	}
}

// primes reports whether the session's answer streams start with a priming event
// (2025-11-25 and later; earlier clients may not expect an event without data).
func (hs *httpSession) primes() bool {
	return hs.version >= "2025-11-25"
}

// The legacy HTTP+SSE transport (2024-11-05), for old clients: GET /sse opens the stream
// of everything the server says, its first event names where to POST messages.
const (
	legacySSEPath     = "/sse"
	legacyMessagePath = "/message"
)

// legacySSE opens a legacy HTTP+SSE session: the session's whole output is this stream.
// The session belongs to the principal that opened it, as a Streamable HTTP session
// belongs to the one that initialized it.
func (h *HTTPHandler) legacySSE(w http.ResponseWriter, r *http.Request) {
	hs := h.newHTTPSession()
	if hs == nil {
		http.Error(w, "too many sessions", http.StatusServiceUnavailable)
		return
	}
	hs.sse = true
	hs.principal = principal.From(r.Context())
	id := hs.id
	h.mu.Lock()
	h.sessions[id] = hs
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.sessions, id)
		h.mu.Unlock()
		hs.close()
	}()
	hs.get.es.id = "" // no resumption in the 2024-11-05 transport
	hs.get.serve(w, r, hs.ctx, h.draining, -1, func(out *streamOut) {
		out.event("", "endpoint", []byte(legacyMessagePath+"?sessionId="+id))
	})
}

// legacyMessage takes one message (or batch) for a legacy HTTP+SSE session; the answer
// goes on the session's stream. The session is found as a Streamable HTTP one is: 404
// when unknown (or not an HTTP+SSE session), 403 when another principal opened it; and
// the message is handled under the principal of this request.
func (h *HTTPHandler) legacyMessage(w http.ResponseWriter, r *http.Request) {
	sid, ok := singleQueryValue(r.URL.RawQuery, "sessionId")
	if !ok {
		http.Error(w, "exactly one sessionId query parameter is required", http.StatusBadRequest)
		return
	}
	hs, status := h.session(sid, true, r)
	if hs == nil {
		plainSessionError(w, status)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(h.opts.MaxBody)+1))
	if err != nil || len(body) > h.opts.MaxBody {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	hs.ss.handleLine(requestContext(hs.ctx, r), bytes.TrimSpace(body))
	w.WriteHeader(http.StatusAccepted)
}

// singleQueryValue returns the value of the query parameter key when the query is well
// formed and names it exactly once: a repeated or unparsable parameter is refused
// rather than read one way here and another by an intermediary.
func singleQueryValue(rawQuery, key string) (string, bool) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil || len(q[key]) != 1 || q[key][0] == "" {
		return "", false
	}
	return q[key][0], true
}

// checkHeaders validates the request headers a modern POST must carry against its body
// (2026-07-28): MCP-Protocol-Version, Mcp-Method, Mcp-Name, and the Mcp-Param-* mirrors
// of a tool's annotated arguments. A mismatch is -32020 HeaderMismatch: intermediaries
// may route on the headers, so the proxy must not act on a body that says otherwise.
func (h *HTTPHandler) checkHeaders(r *http.Request, msg *jsonrpc.Message, version string) *jsonrpc.Error {
	mismatch := func(format string, args ...any) *jsonrpc.Error {
		return jsonrpc.Errorf(mcp.CodeHeaderMismatch, "Header mismatch: "+format, args...)
	}
	// One value per header: with two, the proxy would check one and an intermediary
	// might route on the other.
	var repeated []string
	for name, v := range r.Header {
		if len(v) > 1 && strings.HasPrefix(name, "Mcp-") {
			repeated = append(repeated, name)
		}
	}
	if len(repeated) > 0 {
		slices.Sort(repeated)
		return mismatch("the %s header is repeated", repeated[0])
	}
	get := func(name string) (string, bool) {
		v := r.Header.Values(name)
		if len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
	switch hv, ok := get("Mcp-Protocol-Version"); {
	case !ok:
		return mismatch("the MCP-Protocol-Version header is required")
	case hv != version:
		return mismatch("MCP-Protocol-Version header %q does not match the body's %q", hv, version)
	}
	switch hm, ok := get("Mcp-Method"); {
	case !ok:
		return mismatch("the Mcp-Method header is required")
	case hm != msg.Method:
		return mismatch("Mcp-Method header %q does not match the body's %q", hm, msg.Method)
	}
	var key string
	switch msg.Method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		key = "name"
	case mcp.MethodResourcesRead:
		key = "uri"
	default:
		return nil
	}
	want, _, _ := jsonx.GetString(msg.Params, key)
	raw, ok := get("Mcp-Name")
	if !ok {
		return mismatch("the Mcp-Name header is required for %s", msg.Method)
	}
	got, err := mcp.DecodeHeaderValue(raw)
	if err != nil {
		return mismatch("Mcp-Name header: %v", err)
	}
	if got != want {
		return mismatch("Mcp-Name header value %q does not match the body's %q", got, want)
	}
	if msg.Method == mcp.MethodToolsCall {
		if phs, _ := h.s.r.ToolHeaders(want); len(phs) > 0 {
			if err := mcp.CheckParamHeaders(phs, msg.Params, get); err != nil {
				return mismatch("%v", err)
			}
		}
	}
	return nil
}
