package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

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
	// Events keeps what legacy sessions' streams said, for clients that resume them
	// (Last-Event-ID); nil keeps it in memory (NewMemoryEventStore: the latest 64 events
	// of each stream). Replicas share one store so that any of them can replay a stream.
	// A store given here belongs to the caller.
	Events EventStore
	// RequestContext, when set, adds what the proxy reads from an HTTP request besides
	// its principal to the context its messages are handled under: the W3C trace context
	// of its traceparent header, for tracing. Nil adds nothing.
	RequestContext func(ctx context.Context, r *http.Request) context.Context
	// SessionIDPrefix starts the id of every session the handler opens ("": none). In a
	// cluster it names the replica that holds the session, so that Forward can find it.
	SessionIDPrefix string
	// Forward, when set, is offered each request for a legacy session this handler does
	// not hold (by Mcp-Session-Id, or the sessionId of the HTTP+SSE /message endpoint),
	// before the handler answers it 404, with the request untouched (its body unread).
	// It returns true when it has answered the request (by forwarding it to the replica
	// that holds the session); false lets the handler answer as without it. Nil: no
	// forwarding.
	Forward func(w http.ResponseWriter, r *http.Request, sessionID string) bool
	// Replica is this replica's id in a cluster ("": none). The requestState of a modern
	// call the proxy parks for its client's input names it, since the call waits in this
	// process only.
	Replica string
	// ForwardTo, when set, is offered each request that another replica must serve: a
	// modern retry whose requestState names another replica, since its call is parked
	// there; a task's request (tasks/get, tasks/result, tasks/cancel) whose task the
	// router's store says another replica holds. body is the request's body, already
	// read. It returns true when it has answered the request; false lets the handler
	// answer as without it (a retry then gets a -32602 error saying the call is gone, a
	// task's request an error saying its replica cannot be reached). Nil: no forwarding.
	ForwardTo func(w http.ResponseWriter, r *http.Request, replica string, body []byte) bool
	// Forwarded reports whether another replica forwarded r to this one with ForwardTo.
	// A task's request forwarded here names a session of the sending replica's; it is
	// served without one (the task's store and the policy need no session). Nil: none is.
	Forwarded func(r *http.Request) bool
	// Endpoints are the endpoints served besides the listen path's whole catalogue: their
	// paths, by endpoint name (see SetEndpoints). Nil: none.
	Endpoints map[string]string
	// Share, when set with Forward, makes legacy Streamable HTTP sessions adoptable: a
	// session's id seals its description, its later state is recorded through Share,
	// and a session whose replica is gone, which Forward declined for this replica to
	// adopt, is rebuilt here under the same id (adopt.go). Nil: no adoption.
	Share SessionShare
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
	adoptMu  sync.Mutex                     // one adoption at a time (adopt.go)
	modern   *session                       // serves every modern request on the listen path (stateless: no state between them but parked calls)
	routes   atomic.Pointer[endpointRoutes] // the endpoints' paths (SetEndpoints); nil: none
	modernMu sync.Mutex                     // guards moderns
	moderns  map[string]*session            // the modern session of each endpoint (modernFor)
	seq      atomic.Uint64
	stop     chan struct{}
	draining chan struct{} // closed by Drain
	beat     *beat         // keep-alive ticks for every waiting request
	wg       sync.WaitGroup
}

type httpSession struct {
	id        string
	events    EventStore           // where its streams keep their events (HTTPOptions.Events)
	log       zerolog.Logger       // with the session's id
	sse       bool                 // a legacy HTTP+SSE session (GET /sse): addressed by /message?sessionId= only
	principal *principal.Principal // authenticated when the session was opened; every later request must be the same
	version   string               // negotiated at initialize
	share     SessionShare         // HTTPOptions.Share, for a session that can be adopted; else nil
	// streamPrefix starts the ids of its POST answer streams: "" for a session opened
	// here, random for an adopted one (never one of the gone replica's stream ids).
	streamPrefix string
	ss           *session
	get          *eventSink // the client's GET stream sink
	out          *outbox    // between the session's writers and get
	ctx          context.Context
	cancel       context.CancelFunc
	lastUsed     atomic.Int64

	stateMu sync.Mutex   // guards state and gone
	state   sessionState // what share records (adopt.go)
	gone    bool         // share has removed the session: record nothing more
	saveMu  sync.Mutex   // held by each write of state to share, and by its removal

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
	if opts.Events == nil {
		opts.Events = NewMemoryEventStore(keepEvents)
	}
	s.baseCtx = ctx
	h := &HTTPHandler{s: s, opts: opts, sessions: map[string]*httpSession{}, stop: make(chan struct{}), draining: make(chan struct{}),
		beat: newBeat(opts.KeepAlive)}
	h.modern = newSession(s, transport.NewOutputStream(io.Discard), s.log.With().Str("session", "http-modern").Logger())
	h.modern.corkless = true
	h.modern.replica = opts.Replica
	h.SetEndpoints(opts.Endpoints)
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
	for _, ss := range h.endpointModerns() {
		ss.shutdown()
	}
	h.beat.close()
	h.wg.Wait()
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, ok := h.route(r.URL.Path)
	if !ok {
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
	if h.opts.Forward != nil {
		if sid := h.requestSession(r, rt); sid != "" && !h.holds(sid) {
			if h.opts.Forward(w, r, sid) {
				return
			}
			if h.opts.Share != nil && rt.kind == routeStreamable {
				h.adopt(r, sid, rt.endpoint) // when this replica claimed it; else the 404 below
			}
		}
	}
	if rt.kind != routeStreamable { // the configured endpoint wins, even at /sse or /message
		switch {
		case rt.kind == routeSSE && r.Method == http.MethodGet:
			h.legacySSE(w, r, rt.endpoint)
		case rt.kind == routeMessage && r.Method == http.MethodPost:
			h.legacyMessage(w, r, rt.endpoint)
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r, rt.endpoint)
	case http.MethodGet:
		h.getStream(w, r, rt.endpoint)
	case http.MethodDelete:
		h.delete(w, r, rt.endpoint)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func httpError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, msg string) {
	writeMessage(w, status, jsonrpc.NewErrorResponse(id, jsonrpc.Errorf(code, "%s", msg)))
}

// jsonContentType is shared by every JSON answer's header; nothing appends to it.
var jsonContentType = []string{"application/json"}

// lengthSetter is the optional ability of a ResponseWriter (internal/h1's) to take the
// body's length without a Content-Length field built for it.
type lengthSetter interface{ SetContentLength(n int64) }

// encodeBufs hold the encodings writeMessage writes: a Write copies what it is given
// (io.Writer must not retain it), so the buffer is free again once it returns.
var encodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledEncoding bounds the buffers kept in encodeBufs: a rare large answer does not
// pin its memory.
const maxPooledEncoding = 64 << 10

// writeMessage answers with one JSON-RPC message as application/json, with its length.
func writeMessage(w http.ResponseWriter, status int, m *jsonrpc.Message) {
	bp := encodeBufs.Get().(*[]byte)
	b, err := m.Append((*bp)[:0])
	if err != nil {
		encodeBufs.Put(bp)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType // canonical keys set directly: no copy, no lookup
	if ls, ok := w.(lengthSetter); ok {
		ls.SetContentLength(int64(len(b)))
	} else {
		h["Content-Length"] = []string{strconv.Itoa(len(b))}
	}
	w.WriteHeader(status)
	w.Write(b)
	if cap(b) <= maxPooledEncoding {
		*bp = b[:0]
		encodeBufs.Put(bp)
	}
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

func (h *HTTPHandler) post(w http.ResponseWriter, r *http.Request, endpoint string) {
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
		h.s.refused(r.Context(), body, "Request body too large") // what was read of it: its head
		httpError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Request body too large")
		return
	}
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '[' {
		hs := h.sessionOf(w, r, jsonrpc.ID{}, endpoint)
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
		h.s.refused(r.Context(), body, je.Message)
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
			h.s.refusedRequest(r.Context(), msg, jerr.Message)
			status := http.StatusBadRequest
			if jerr.Code == jsonrpc.CodeMethodNotFound {
				status = http.StatusNotFound
			}
			writeMessage(w, status, jsonrpc.NewErrorResponse(msg.ID, jerr))
			return
		}
		if h.opts.ForwardTo != nil && h.forwardRetry(w, r, msg, body) {
			return
		}
		h.serveRequest(w, r, h.s.baseCtx, nil, h.modernFor(endpoint), msg, meta, &rm)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if msg.IsRequest() && msg.Method == mcp.MethodInitialize {
		if sid != "" {
			httpError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidRequest, "Invalid Request: initialize inside a session")
			return
		}
		h.initialize(w, r, msg, endpoint)
		return
	}
	if h.opts.Forwarded != nil && sid != "" && isTaskRequest(msg) && h.opts.Forwarded(r) && !h.holds(sid) {
		h.serveForwardedTask(w, r, msg) // http_replicas.go
		return
	}
	hs := h.sessionOf(w, r, msg.ID, endpoint)
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
	case h.opts.ForwardTo != nil && isTaskRequest(msg) && h.forwardTask(w, r, msg, body):
		// Answered by the replica that holds the task (http_replicas.go).
	default:
		h.serveRequest(w, r, hs.ctx, hs, hs.ss, msg, meta, nil)
	}
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

// initialize creates a legacy session of endpoint and answers its handshake as JSON.
func (h *HTTPHandler) initialize(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message, endpoint string) {
	var id string
	if h.opts.Share != nil {
		if desc := describe(msg, principal.From(r.Context()), endpoint); desc != nil {
			id = h.opts.Share.NewID(desc)
		}
	}
	hs := h.newHTTPSession(id, endpoint)
	if hs == nil {
		reason := "Too many sessions"
		if h.isDraining() {
			reason = "The proxy is shutting down"
		}
		httpError(w, http.StatusServiceUnavailable, msg.ID, jsonrpc.CodeInternalError, reason)
		return
	}
	id = hs.id
	hs.principal = principal.From(r.Context())
	hs.ss.principal = hs.principal // its initialize runs under the session's context, which names nobody
	done := make(chan *jsonrpc.Message, 1)
	hs.ss.handleRequest(hs.ctx, msg, replier{reply: func(m *jsonrpc.Message) { done <- m }})
	resp := <-done
	if resp == nil || resp.Error != nil {
		writeJSON(w, resp)
		hs.close()
		return
	}
	hs.version, _, _ = jsonx.GetString(resp.Result, "protocolVersion")
	if hs.share != nil {
		hs.share.Opened(r.Context(), id)
	}
	h.mu.Lock()
	served := h.serves(endpoint) // checked under h.mu: SetEndpoints ends what it finds registered after taking it away
	if served {
		h.sessions[id] = hs
	}
	h.mu.Unlock()
	if !served {
		hs.close()
		hs.ended()
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Mcp-Session-Id", id)
	writeJSON(w, resp)
}

// routedCall reports whether method is a call the router sends to one upstream.
func routedCall(method string) bool {
	switch method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead, mcp.MethodCompletionComplete:
		return true
	}
	return false
}

func writeJSON(w http.ResponseWriter, m *jsonrpc.Message) {
	if m == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	writeMessage(w, http.StatusOK, m)
}

// legacyHTTPCall is what serveRequest allocates for a legacy request: its answer and its
// handleLegacy state together.
type legacyHTTPCall struct {
	a  answer
	lc legacyCall
}

// serveRequest answers one request: as JSON, or as an event stream carrying its related
// messages before its response. For a modern request a closed stream cancels it; a
// legacy request goes on (the spec's rule) and its stream can be resumed.
// meta is the request's _meta, read once by the caller.
func (h *HTTPHandler) serveRequest(w http.ResponseWriter, r *http.Request, base context.Context, hs *httpSession, ss *session, msg *jsonrpc.Message, meta json.RawMessage, rm *requestMeta) {
	var a *answer
	clientID := msg.ID
	inner := msg          // a legacy request is handled under its own id: its response needs no copy
	var rp replier        // a modern request's
	var lrp legacyReplier // a legacy request's
	if rm == nil {
		// The answer and the call in flight in one allocation; the response goes to the
		// answer as it is.
		lh := &legacyHTTPCall{a: answer{w: w, hs: hs, pending: 1}}
		a = &lh.a
		lrp = legacyReplier{to: a, related: related{stream: a, clientID: clientID}, call: &lh.lc}
	} else {
		// Many clients share the modern session: give the request an id of its own, and
		// its response the client's back.
		a = newAnswer(w, hs, 1)
		c := *msg
		c.ID = jsonrpc.StringID("h" + strconv.FormatUint(h.seq.Add(1), 10))
		inner = &c
		reply := func(m *jsonrpc.Message) {
			if m != nil {
				c := *m
				c.ID = clientID
				m = &c
			}
			a.finish(m)
		}
		rp = replier{reply: reply, related: related{stream: a, clientID: clientID}}
	}
	a.reqID = msg.ID
	if hs != nil {
		a.prime = hs.primes()
	}
	a.modern = rm != nil
	ctx := h.requestContext(base, r)
	switch {
	case rm != nil:
		ss.serveModern(ctx, inner, *rm, rp)
	case routedCall(msg.Method):
		// A legacy call goes on when its client goes away, so nothing needs this
		// goroutine while the call runs: it may run the exchange with an HTTP upstream
		// itself (no goroutine and no hand-off per call), the beat keeping the answer
		// alive meanwhile (answer.InlineStarted). A modern call is cancelled when its
		// stream closes: its handler stays free to see that (wait).
		a.beat = h.beat
		ss.handleLegacy(a.inline.Init(ctx, a), inner, meta, lrp)
	default:
		ss.handleLegacy(ctx, inner, meta, lrp)
	}
	var drain, ended <-chan struct{}
	if msg.Method == mcp.MethodSubscriptionsListen {
		drain, ended = h.draining, ss.ended // a subscription only ends when someone ends it
	}
	if a.wait(r.Context(), h.beat, drain, ended) && rm != nil {
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
