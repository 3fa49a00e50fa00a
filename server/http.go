package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
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

	mu       sync.Mutex // guards sessions
	sessions map[string]*httpSession
	modern   *session // serves every modern request (stateless: no state between them but parked calls)
	seq      atomic.Uint64
	stop     chan struct{}
	wg       sync.WaitGroup
}

type httpSession struct {
	id       string
	ss       *session
	get      *eventSink // the client's GET stream sink
	ctx      context.Context
	cancel   context.CancelFunc
	lastUsed atomic.Int64
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
	h := &HTTPHandler{s: s, opts: opts, sessions: map[string]*httpSession{}, stop: make(chan struct{})}
	h.modern = newSession(s, transport.NewStream(strings.NewReader(""), io.Discard, 0), s.log.With().Str("session", "http-modern").Logger())
	h.wg.Add(1)
	go h.expire()
	return h
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
	switch {
	case r.URL.Path == legacySSEPath && r.Method == http.MethodGet:
		h.legacySSE(w, r)
		return
	case r.URL.Path == legacyMessagePath && r.Method == http.MethodPost:
		h.legacyMessage(w, r)
		return
	case r.URL.Path != h.opts.Path:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
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
	b, _ := jsonrpc.NewErrorResponse(id, jsonrpc.Errorf(code, "%s", msg)).Encode()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func acceptsBoth(r *http.Request) bool {
	a := strings.Join(r.Header.Values("Accept"), ",")
	return (strings.Contains(a, "application/json") || strings.Contains(a, "*/*")) &&
		(strings.Contains(a, "text/event-stream") || strings.Contains(a, "*/*"))
}

func (h *HTTPHandler) post(w http.ResponseWriter, r *http.Request) {
	if !acceptsBoth(r) {
		httpError(w, http.StatusNotAcceptable, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"Not Acceptable: Accept must list application/json and text/event-stream")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(h.opts.MaxBody)+1))
	if err != nil {
		httpError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "Parse error: "+err.Error())
		return
	}
	if len(body) > h.opts.MaxBody {
		httpError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Request body too large")
		return
	}
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '[' {
		httpError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Invalid Request: batches are not supported over HTTP by mcp-proxy")
		return
	}
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		code := int64(jsonrpc.CodeParseError)
		if errors.Is(err, jsonrpc.ErrInvalidMessage) {
			code = jsonrpc.CodeInvalidRequest
		}
		var id jsonrpc.ID
		if msg != nil {
			id = msg.ID
		}
		httpError(w, http.StatusBadRequest, id, code, err.Error())
		return
	}
	if _, version := modernMeta(msg.Params); msg.IsRequest() && (version != "" || msg.Method == mcp.MethodServerDiscover) {
		if hv := r.Header.Get("MCP-Protocol-Version"); hv != "" && hv != version && version != "" {
			httpError(w, http.StatusBadRequest, msg.ID, mcp.CodeHeaderMismatch, "Header mismatch: MCP-Protocol-Version differs from _meta")
			return
		}
		if hm := r.Header.Get("Mcp-Method"); hm != "" && hm != msg.Method {
			httpError(w, http.StatusBadRequest, msg.ID, mcp.CodeHeaderMismatch, "Header mismatch: Mcp-Method differs from the body")
			return
		}
		h.serveRequest(w, r, h.s.baseCtx, h.modern, msg, true)
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
	if sid == "" {
		httpError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidRequest, "Bad Request: Mcp-Session-Id header is required")
		return
	}
	hs := h.lookup(sid)
	if hs == nil {
		httpError(w, http.StatusNotFound, msg.ID, jsonrpc.CodeInvalidRequest, "Session not found")
		return
	}
	if v := r.Header.Get("MCP-Protocol-Version"); v != "" && !mcp.IsLegacyVersion(v) {
		httpError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidRequest, "Bad Request: unsupported MCP-Protocol-Version "+v)
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
		h.serveRequest(w, r, hs.ctx, hs.ss, msg, false)
	}
}

func (h *HTTPHandler) lookup(id string) *httpSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	hs := h.sessions[id]
	if hs != nil {
		hs.lastUsed.Store(time.Now().UnixNano())
	}
	return hs
}

// newHTTPSession makes a session (not yet registered) with a cryptographically random
// id, whose output goes to its event sink; nil when the cap on sessions is reached.
func (h *HTTPHandler) newHTTPSession() *httpSession {
	h.mu.Lock()
	full := len(h.sessions) >= h.opts.MaxSessions
	h.mu.Unlock()
	if full {
		return nil
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	id := hex.EncodeToString(b[:])
	hs := &httpSession{id: id, get: newEventSink(h.opts.KeepAlive)}
	hs.ctx, hs.cancel = context.WithCancel(h.s.baseCtx)
	hs.ss = newSession(h.s, transport.NewStream(strings.NewReader(""), hs.get, 0), h.s.log.With().Str("session", id[:8]).Logger())
	hs.lastUsed.Store(time.Now().UnixNano())
	return hs
}

// initialize creates a legacy session and answers its handshake as JSON.
func (h *HTTPHandler) initialize(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) {
	hs := h.newHTTPSession()
	if hs == nil {
		httpError(w, http.StatusServiceUnavailable, msg.ID, jsonrpc.CodeInternalError, "Too many sessions")
		return
	}
	id := hs.id
	done := make(chan *jsonrpc.Message, 1)
	hs.ss.handleRequest(hs.ctx, msg, func(m *jsonrpc.Message) { done <- m })
	resp := <-done
	if resp == nil || resp.Error != nil {
		writeJSON(w, resp)
		hs.close()
		return
	}
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
	b, err := m.Encode()
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// serveRequest answers one request on an event stream: its related notifications first,
// then its response. For a modern request a closed stream cancels it; a legacy request
// goes on (the spec's rule) but its answer is lost.
func (h *HTTPHandler) serveRequest(w http.ResponseWriter, r *http.Request, base context.Context, ss *session, msg *jsonrpc.Message, modern bool) {
	out := openEventStream(w)
	clientID := msg.ID
	inner := *msg
	if modern {
		// Many clients share the modern session: give the request an id of its own.
		inner.ID = jsonrpc.StringID("h" + strconv.FormatUint(h.seq.Add(1), 10))
	}
	done := make(chan struct{})
	var once sync.Once
	reply := func(m *jsonrpc.Message) {
		once.Do(func() {
			if m != nil {
				c := *m
				c.ID = clientID
				out.send(&c)
			}
			close(done)
		})
	}
	ctx := withRequestSink(base, func(method string, params json.RawMessage) {
		out.send(jsonrpc.NewNotification(method, params))
	})
	ss.handleRequest(ctx, &inner, reply)
	ka := time.NewTicker(h.opts.KeepAlive)
	defer ka.Stop()
	for {
		select {
		case <-done:
			return
		case <-ka.C:
			out.comment()
		case <-r.Context().Done():
			if modern {
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
			out.close()
			return
		}
	}
}

// getStream serves a legacy session's GET stream: messages tied to no request.
func (h *HTTPHandler) getStream(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		http.Error(w, "Accept must include text/event-stream", http.StatusNotAcceptable)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		http.Error(w, "Mcp-Session-Id header is required", http.StatusBadRequest)
		return
	}
	hs := h.lookup(sid)
	if hs == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	hs.get.serve(w, r, hs.ctx)
}

func (h *HTTPHandler) delete(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		http.Error(w, "Mcp-Session-Id header is required", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	hs := h.sessions[sid]
	delete(h.sessions, sid)
	h.mu.Unlock()
	if hs == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	hs.close()
	w.WriteHeader(http.StatusNoContent)
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

// streamOut writes events to one response stream.
type streamOut struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	f      http.Flusher
	closed bool
}

func (o *streamOut) send(m *jsonrpc.Message) {
	if b, err := m.Encode(); err == nil {
		o.event("message", b)
	}
}

func (o *streamOut) event(name string, data []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.w.Write([]byte("event: " + name + "\ndata: "))
	o.w.Write(data)
	o.w.Write([]byte("\n\n"))
	if o.f != nil {
		o.f.Flush()
	}
}

func (o *streamOut) comment() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.w.Write([]byte(": keep-alive\n\n"))
	if o.f != nil {
		o.f.Flush()
	}
}

func (o *streamOut) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}

// eventSink is a session's GET stream: the session writes lines to it (as to stdout);
// they go out as events to the client's open GET request, and are dropped while none is
// open.
type eventSink struct {
	mu        sync.Mutex
	out       *streamOut
	keepAlive time.Duration
}

func newEventSink(keepAlive time.Duration) *eventSink { return &eventSink{keepAlive: keepAlive} }

// Write implements io.Writer for the session's line writer: one line per message.
func (e *eventSink) Write(p []byte) (int, error) {
	e.mu.Lock()
	out := e.out
	e.mu.Unlock()
	if out == nil {
		return len(p), nil
	}
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		out.event("message", line)
	}
	return len(p), nil
}

func (e *eventSink) serve(w http.ResponseWriter, r *http.Request, ctx context.Context) {
	e.serveWith(w, r, ctx, nil)
}

// serveWith is serve with a first event written before anything else.
func (e *eventSink) serveWith(w http.ResponseWriter, r *http.Request, ctx context.Context, first func(*streamOut)) {
	out := openEventStream(w)
	if first != nil {
		first(out)
	}
	e.mu.Lock()
	e.out = out // the newest GET stream wins: each message goes on exactly one stream
	e.mu.Unlock()
	ka := time.NewTicker(e.keepAlive)
	defer ka.Stop()
	for {
		select {
		case <-ka.C:
			out.comment()
		case <-r.Context().Done():
			out.close()
			e.mu.Lock()
			if e.out == out {
				e.out = nil
			}
			e.mu.Unlock()
			return
		case <-ctx.Done():
			out.close()
			return
		}
	}
}

// The legacy HTTP+SSE transport (2024-11-05), for old clients: GET /sse opens the stream
// of everything the server says, its first event names where to POST messages.
const (
	legacySSEPath     = "/sse"
	legacyMessagePath = "/message"
)

// legacySSE opens a legacy HTTP+SSE session: the session's whole output is this stream.
func (h *HTTPHandler) legacySSE(w http.ResponseWriter, r *http.Request) {
	hs := h.newHTTPSession()
	if hs == nil {
		http.Error(w, "too many sessions", http.StatusServiceUnavailable)
		return
	}
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
	hs.get.serveWith(w, r, hs.ctx, func(out *streamOut) {
		out.event("endpoint", []byte(legacyMessagePath+"?sessionId="+id))
	})
}

// legacyMessage takes one message for a legacy HTTP+SSE session; the answer goes on the
// session's stream.
func (h *HTTPHandler) legacyMessage(w http.ResponseWriter, r *http.Request) {
	hs := h.lookup(r.URL.Query().Get("sessionId"))
	if hs == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(h.opts.MaxBody)+1))
	if err != nil || len(body) > h.opts.MaxBody {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	hs.ss.handleLine(hs.ctx, bytes.TrimSpace(body))
	w.WriteHeader(http.StatusAccepted)
}
