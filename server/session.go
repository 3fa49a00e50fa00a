package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// session is one client connection in the legacy era: initialize, then requests.
type session struct {
	s      *Server
	stream *transport.Stream
	log    zerolog.Logger

	mu          sync.Mutex // guards the fields below
	initialized bool       // initialize has been answered
	inflight    map[string]*router.Canceller
	unsubscribe func()
	closed      bool // serve is returning: no new work may start
	clientCaps  mcp.ClientCapabilities
	meta        *router.ClientMeta              // the client's identity for modern upstreams
	outgoing    map[int64]chan *jsonrpc.Message // relayed server-to-client requests by id
	listens     map[string]*listenSub           // modern subscriptions by listen id key
	bridges     map[uint64]*bridgeCall          // modern calls parked for client input

	nonce    [16]byte        // binds requestState handles to this connection
	replica  string          // names this replica in the handles (HTTPOptions.Replica); set before serving
	clientID router.ClientID // who the session's requests come from, for the router

	corkless bool // an HTTP session (see Corkless)

	// onChange, when set (an adoptable HTTP session), is told of each successful request
	// that changes the state that outlives the session's replica (stateChanging).
	onChange func(method string, params json.RawMessage)

	maxInFlight int // requests in flight at most (0: no cap); set before serving

	// endpoint is the endpoint the session serves ("": the whole catalogue); set before
	// serving, never changed.
	endpoint string
	// active is what the session's searches activated (an endpoint in search mode).
	active router.Active
	// ended is closed when the session's endpoint is no longer served (the modern
	// session of an endpoint: its subscriptions' streams end); nil for the others.
	ended chan struct{}
	// principal is who opened the legacy session (guarded by mu); views are what its
	// subscribers list (views.go), published whole for the router to read without a
	// lock.
	principal *principal.Principal
	views     atomic.Pointer[[]router.View]

	// For the session observer: how the client reaches the session, its id, and what
	// initialize said (opened is zero until then).
	transport, id string
	opened        SessionEvent

	outNext atomic.Int64 // ids of requests the proxy sends to this client

	wg sync.WaitGroup // requests in flight; Add only through track
}

func newSession(s *Server, stream *transport.Stream, log zerolog.Logger) *session {
	ss := &session{s: s, stream: stream, log: log, inflight: map[string]*router.Canceller{},
		outgoing: map[int64]chan *jsonrpc.Message{}, listens: map[string]*listenSub{},
		bridges: map[uint64]*bridgeCall{}}
	_, _ = rand.Read(ss.nonce[:]) // never fails since Go 1.24
	ss.clientID = s.nextClientID()
	return ss
}

// track counts one more piece of work in flight, unless the session is closing.
func (ss *session) track() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return false
	}
	ss.wg.Add(1)
	return true
}

// Notify implements router.Client: proxy-level notifications reach a legacy session as
// they are, and modern subscriptions that asked for their kind tagged with their id.
func (ss *session) Notify(method string, params json.RawMessage) {
	ss.mu.Lock()
	legacy := ss.initialized
	ss.mu.Unlock()
	if legacy {
		ss.notifyRaw(method, params)
	}
	ss.notifyListens(method, params, nil)
}

// notifyRaw writes a notification to the client.
func (ss *session) notifyRaw(method string, params json.RawMessage) {
	if err := ss.stream.Write(jsonrpc.NewNotification(method, params)); err != nil {
		ss.log.Debug().Err(err).Str("method", method).Msg("could not notify client")
	}
}

var _ router.Client = (*session)(nil)

// Cork implements router.Client.
func (ss *session) Cork() { ss.stream.Cork() }

// Corkless implements router.Corkless: an HTTP session's answers go on their requests'
// own streams, so holding its session stream back saves nothing.
func (ss *session) Corkless() bool { return ss.corkless }

// Uncork implements router.Client.
func (ss *session) Uncork() {
	if err := ss.stream.Uncork(); err != nil {
		ss.log.Debug().Err(err).Msg("flushing writes to client")
	}
}

func (ss *session) serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		ss.shutdown()
	}()
	// Lines are handled on the reading goroutine itself: routing a request writes it
	// upstream without waiting, so there is no hand-off between reading and forwarding;
	// a request whose exchange runs on the reading goroutine (an HTTP upstream) first
	// hands the reading over (see stdioInput). The reader ends when the input does; when
	// ctx ends first, serve returns and the caller closes the input (or the process
	// exits).
	done := make(chan error, 1)
	in := newStdioInput(ss, ctx, done)
	defer in.close()
	in.start()
	select {
	case err := <-done:
		if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	case <-ctx.Done():
		// The reader may stay blocked on input nobody closes; it is not waited for, and
		// whatever it still reads is refused by track.
		return nil
	}
}

// shutdown ends the session: no new work starts, requests in flight are cancelled
// upstream, and it returns once they have finished.
func (ss *session) shutdown() {
	ss.mu.Lock()
	ss.closed = true
	inflight := make([]*router.Canceller, 0, len(ss.inflight))
	for _, c := range ss.inflight {
		inflight = append(inflight, c)
	}
	inflight = ss.parkedCalls(inflight) // bridge.go
	ss.mu.Unlock()
	for _, c := range inflight {
		c.Cancel() // the client is gone: stop its requests upstream
	}
	ss.wg.Wait()
	ss.s.r.Release(ss) // per-client upstream sessions end with the client's
	ss.mu.Lock()
	if ss.unsubscribe != nil {
		ss.unsubscribe()
		ss.unsubscribe = nil
	}
	closed := ss.opened
	ss.opened = SessionEvent{}
	ss.mu.Unlock()
	if closed.Kind == SessionOpened {
		closed.Kind, closed.Duration = SessionClosed, time.Since(closed.Time)
		ss.s.observe(closed)
	}
}

// handleLine decodes one line and acts on it. Nothing a client sends ends the session.
func (ss *session) handleLine(ctx context.Context, line []byte) {
	if t := bytes.TrimLeft(line, " \t"); len(t) > 0 && t[0] == '[' {
		ss.handleBatch(ctx, t)
		return
	}
	msg, err := jsonrpc.Decode(line)
	if err != nil {
		ss.reject(ctx, line, msg, err)
		return
	}
	switch {
	case msg.IsRequest():
		ss.handleRequest(ctx, msg, replier{reply: ss.write})
	case msg.IsNotification():
		ss.handleNotification(msg)
	default:
		ss.deliverResponse(msg)
	}
}

// reject answers a line that is not a valid message: -32700 for bad JSON (id null),
// -32600 for JSON that is not a valid JSON-RPC message.
func (ss *session) reject(ctx context.Context, line []byte, msg *jsonrpc.Message, err error) {
	var id jsonrpc.ID
	if msg != nil {
		id = msg.ID
	}
	ss.log.Warn().Err(err).Msg("invalid message from client")
	je := jsonrpc.DecodeError(err)
	ss.s.refused(ctx, line, je.Message)
	ss.write(jsonrpc.NewErrorResponse(id, je))
}

// write sends m to the client; nil means "no response" and sends nothing.
func (ss *session) write(m *jsonrpc.Message) {
	if m == nil {
		return
	}
	if err := ss.stream.Write(m); err != nil {
		ss.log.Warn().Err(err).Msg("writing to client")
	}
}

// handleRequest answers a request through rp, whose reply is called exactly once (with
// nil when nothing must be sent). initialize and ping are answered at once; everything
// else runs in its own goroutine so a slow upstream blocks nobody.
func (ss *session) handleRequest(ctx context.Context, msg *jsonrpc.Message, rp replier) {
	meta, version := modernMeta(msg.Params)
	if version != "" || msg.Method == mcp.MethodServerDiscover {
		ss.handleModern(ctx, msg, meta, version, rp)
		return
	}
	ss.handleLegacy(ctx, msg, meta, rp.legacy())
}

// handleLegacy is handleRequest for a request of the legacy era, whose _meta (nil when
// it has none) the caller has read.
func (ss *session) handleLegacy(ctx context.Context, msg *jsonrpc.Message, meta json.RawMessage, rp legacyReplier) {
	switch msg.Method {
	case mcp.MethodPing:
		rp.send(jsonrpc.NewResult(msg.ID, nil))
		return
	case mcp.MethodInitialize:
		if !ss.track() {
			rp.send(nil)
			return
		}
		go func() {
			defer ss.wg.Done()
			rp.send(ss.initializeLocal(ctx, msg, rp.related))
		}()
		return
	}
	key := msg.ID.Key()
	lc := rp.call
	if lc == nil {
		lc = new(legacyCall)
	}
	lc.ss, lc.key, lc.msg, lc.rp = ss, key, msg, rp
	lc.rp.call = nil // lc itself: no cycle through its own replier
	canceller := &lc.cancel
	ss.mu.Lock() // one critical section for every check and the registration
	if !ss.initialized {
		ss.mu.Unlock()
		ss.refuse(ctx, msg, rp, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
			"Invalid Request: %s before initialize; the session must start with initialize", msg.Method))
		return
	}
	if _, dup := ss.inflight[key]; dup {
		ss.mu.Unlock()
		ss.refuse(ctx, msg, rp, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
			"Invalid Request: id %s is already in use by a request in flight", msg.ID))
		return
	}
	if ss.closed {
		ss.mu.Unlock()
		rp.send(nil)
		return
	}
	if ss.maxInFlight > 0 && len(ss.inflight) >= ss.maxInFlight {
		ss.mu.Unlock()
		rp.send(jsonrpc.NewErrorResponse(msg.ID, tooManyInFlight(ss.maxInFlight)))
		return
	}
	ss.wg.Add(1) // under mu, as track does
	ss.inflight[key] = canceller
	ss.mu.Unlock()

	lc.req = router.Request{Method: msg.Method, Params: msg.Params, Cancel: canceller, Input: rp.input(ss), Client: ss.clientID, Session: ss,
		Meta: ss.meta, Principal: principal.From(ctx), ID: rp.idOf(msg)}
	if ss.endpoint != "" {
		lc.req.Endpoint, lc.req.Active = ss.endpoint, &ss.active
	}
	if hasProgressToken(meta) {
		notify := rp.notifier(ss)
		lc.req.Progress = func(p json.RawMessage) { notify(mcp.NotificationProgress, p) }
	}
	ss.s.r.Dispatch(ctx, &lc.req, lc.done)
}

// refuse answers a legacy request refused before routing with e, and tells the audit.
func (ss *session) refuse(ctx context.Context, msg *jsonrpc.Message, rp legacyReplier, e *jsonrpc.Error) {
	ss.s.refusedRequest(ctx, msg, e.Message)
	rp.send(jsonrpc.NewErrorResponse(msg.ID, e))
}

// legacyCall is one request of handleLegacy in flight: what the router is given, what
// its reply needs and its response, in one allocation (or in the caller's, see
// legacyReplier.call).
type legacyCall struct {
	req    router.Request
	cancel router.Canceller
	ss     *session
	key    string // the request's id, its key in ss.inflight
	msg    *jsonrpc.Message
	rp     legacyReplier
	resp   jsonrpc.Message // a successful response
}

// done is the call's router.Reply.
func (lc *legacyCall) done(res json.RawMessage, err error) {
	ss, msg := lc.ss, lc.msg
	defer ss.wg.Done()
	ss.mu.Lock()
	delete(ss.inflight, lc.key)
	ss.mu.Unlock()
	if errors.Is(err, router.ErrCancelled) {
		lc.rp.send(nil) // the client cancelled: it must get no response
		return
	}
	if err == nil && ss.onChange != nil && stateChanging(msg.Method) {
		ss.onChange(msg.Method, msg.Params)
	}
	if err == nil {
		lc.resp = *jsonrpc.NewResult(msg.ID, res) // in lc: no allocation of its own
		lc.rp.send(&lc.resp)
		return
	}
	lc.rp.send(responseFor(msg.ID, nil, err))
}

// initializeLocal answers initialize through the router's local chain (what counts and
// traces the requests the proxy answers itself).
func (ss *session) initializeLocal(ctx context.Context, msg *jsonrpc.Message, rp related) *jsonrpc.Message {
	var out *jsonrpc.Message
	req := &router.Request{Method: msg.Method, Params: msg.Params, Client: ss.clientID, Session: ss,
		Principal: principal.From(ctx), ID: rp.idOf(msg), Endpoint: ss.endpoint}
	answer := func(ctx context.Context, _ *router.Request) (json.RawMessage, error) {
		out = ss.initialize(ctx, msg)
		if out.Error != nil {
			return nil, out.Error
		}
		return out.Result, nil
	}
	done := make(chan *jsonrpc.Message, 1) // a stage may answer later, from another goroutine
	ss.s.r.Local(ctx, req, answer, func(res json.RawMessage, err error) {
		if out == nil { // a stage answered instead
			out = responseFor(msg.ID, res, err)
		}
		done <- out // the answer as initialize made it
	})
	return <-done
}

// tooManyInFlight is the refusal of a request over the session's cap.
func tooManyInFlight(limit int) *jsonrpc.Error {
	e := mcp.ProxyError(mcp.CodeRateLimited, "", fmt.Sprintf(
		"mcp-proxy: this session already has %d requests in flight (max_client_in_flight); retry when some have been answered", limit))
	e.Data, _ = jsonx.Marshal(map[string]any{"origin": "mcp-proxy", "limit": "max_client_in_flight", "retryAfterMs": 100})
	return e
}

// responseFor turns a Dispatch outcome into the response message.
func responseFor(id jsonrpc.ID, res json.RawMessage, err error) *jsonrpc.Message {
	if err == nil {
		return jsonrpc.NewResult(id, res)
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return jsonrpc.NewErrorResponse(id, je)
	}
	return jsonrpc.NewErrorResponse(id, mcp.ProxyError(jsonrpc.CodeInternalError, "", err.Error()))
}

// hasProgressToken reports whether a request's _meta (nil when it has none) carries a
// progress token.
func hasProgressToken(meta json.RawMessage) bool {
	if len(meta) == 0 {
		return false
	}
	_, ok, _ := jsonx.Get(meta, mcp.MetaProgressToken)
	return ok
}

func (ss *session) handleNotification(msg *jsonrpc.Message) {
	switch msg.Method {
	case mcp.NotificationInitialized:
	case mcp.NotificationCancelled:
		raw, ok, _ := jsonx.Get(msg.Params, "requestId")
		if !ok {
			return
		}
		var id jsonrpc.ID
		if err := id.UnmarshalJSON(raw); err != nil || !id.IsValid() {
			return
		}
		if ss.endListen(id.Key()) {
			ss.log.Debug().Str("id", id.String()).Msg("client ended a subscription")
			return
		}
		ss.mu.Lock()
		c := ss.inflight[id.Key()]
		ss.mu.Unlock()
		if c != nil {
			ss.log.Debug().Str("id", id.String()).Msg("client cancelled request")
			c.Cancel()
		}
	case mcp.NotificationRootsListChanged:
		ss.s.r.NotifyAll(ss, msg.Method, msg.Params)
	default:
		ss.log.Debug().Str("method", msg.Method).Msg("ignoring client notification")
	}
}

type initializeParams struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ClientInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"clientInfo"`
}

// initialize answers the legacy handshake once the upstreams have had their chance to
// start (at most the ready grace), with the negotiated version and the merged
// capabilities.
func (ss *session) initialize(ctx context.Context, msg *jsonrpc.Message) *jsonrpc.Message {
	var p initializeParams
	if err := json.Unmarshal(msg.Params, &p); err != nil || p.ProtocolVersion == "" {
		return jsonrpc.NewErrorResponse(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams,
			"Invalid params: initialize needs protocolVersion, capabilities and clientInfo"))
	}
	ss.mu.Lock()
	if ss.initialized {
		ss.mu.Unlock()
		return jsonrpc.NewErrorResponse(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
			"Invalid Request: the session is already initialized"))
	}
	ss.mu.Unlock()

	var caps mcp.ClientCapabilities
	if len(p.Capabilities) > 0 {
		if err := json.Unmarshal(p.Capabilities, &caps); err != nil {
			return jsonrpc.NewErrorResponse(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams,
				"Invalid params: capabilities: %v", err))
		}
	}
	info, _ := jsonx.Marshal(p.ClientInfo)
	ss.mu.Lock()
	ss.clientCaps = caps
	ss.meta = &router.ClientMeta{Capabilities: mcp.NarrowClientCapabilities(p.Capabilities), Info: info}
	ss.mu.Unlock()
	// Upstreams are told no more than this client can do; they start now unless they
	// are already running.
	ss.s.startUpstreams(mcp.NarrowClientCapabilities(p.Capabilities), true)

	ss.s.awaitStart(ctx, &ss.log, "answering initialize")

	version := mcp.NegotiateLegacy(p.ProtocolVersion)
	result := map[string]any{
		"protocolVersion": version,
		"capabilities":    ss.s.capabilitiesFor(ss.endpoint),
		"serverInfo":      serverInfo(ss.s.cur()),
	}
	if ins := ss.s.instructionsFor(ss.endpoint); ins != "" {
		result["instructions"] = ins
	}
	b, err := jsonx.Marshal(result)
	if err != nil {
		return jsonrpc.NewErrorResponse(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInternalError, "encoding initialize result: %v", err))
	}
	ss.markOpened(ctx, version, p.ClientInfo.Name)
	ev := ss.log.Info().Str("client", p.ClientInfo.Name).Str("client_version", p.ClientInfo.Version).
		Str("requested_version", p.ProtocolVersion).Str("protocol_version", version)
	if ss.endpoint != "" {
		ev = ev.Str("endpoint", ss.endpoint)
	}
	ev.Msg("client initialized")
	return jsonrpc.NewResult(msg.ID, b)
}

// replier is how the messages of one request go back to the client: its response
// through reply, and what is related to it (related). Every replier has a reply:
// handleRequest and the modern paths call it directly.
type replier struct {
	reply func(*jsonrpc.Message) // called once, with nil for "no response"; never nil
	related
}

// legacyReplier is what handleLegacy answers through: a replier's reply, or, for a
// legacy request over HTTP, the request's answer itself (its response needs no
// rewriting, so no reply closure is made). It is a type of its own so that a replier
// without a reply func cannot reach the paths that call reply: only send answers.
type legacyReplier struct {
	to responder // never nil
	related
	// call, when set, is where handleLegacy keeps the request in flight, allocated with
	// the caller's own state; nil: handleLegacy allocates one.
	call *legacyCall
}

// responder takes a request's response (nil: none), once: an *answer, or a replyFunc.
type responder interface{ finish(*jsonrpc.Message) }

// replyFunc is a replier's reply as a responder (a func is stored in an interface
// without an allocation).
type replyFunc func(*jsonrpc.Message)

func (f replyFunc) finish(m *jsonrpc.Message) { f(m) }

var (
	_ responder = (*answer)(nil)
	_ responder = replyFunc(nil)
)

// legacy is rp for handleLegacy.
func (rp replier) legacy() legacyReplier {
	return legacyReplier{to: replyFunc(rp.reply), related: rp.related}
}

// send sends the request's response (nil: none).
func (rp legacyReplier) send(m *jsonrpc.Message) { rp.to.finish(m) }

// related is where the messages related to one request go (progress, logs,
// server-to-client requests): on the request's own answer stream over HTTP, or on the
// session's stream when stream is nil (stdio, and initialize).
type related struct {
	stream requestSink
	// clientID is the id the client knows the request by, when the session handles it
	// under another (a modern request over HTTP gets an id of its own); zero: the
	// request's own id.
	clientID jsonrpc.ID
}

// idOf is the id the client knows msg by.
func (rp related) idOf(msg *jsonrpc.Message) jsonrpc.ID {
	if rp.clientID.IsValid() {
		return rp.clientID
	}
	return msg.ID
}

// notifier returns where the notifications related to the request go.
func (rp related) notifier(ss *session) func(method string, params json.RawMessage) {
	if rp.stream != nil {
		return rp.stream.notify
	}
	return ss.notifyRaw
}

// input returns how a server-to-client request tied to the request reaches the client.
func (rp related) input(ss *session) router.InputFunc {
	if sink := rp.stream; sink != nil {
		return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
			return ss.requestVia(ctx, sink.request, method, params)
		}
	}
	return ss.Request
}

// markOpened marks the session initialized (by its initialize, or rebuilt by an
// adopting replica): it starts receiving the router's notifications and is reported
// opened to the observer.
func (ss *session) markOpened(ctx context.Context, version, client string) {
	opened := SessionEvent{Kind: SessionOpened, Transport: ss.transport, ID: ss.id, Version: version,
		Client: client}
	if p := principal.From(ctx); p != nil {
		opened.Principal = p.Name
	}
	ss.mu.Lock()
	ss.initialized = true
	if p := principal.From(ctx); p != nil {
		ss.principal = p
	}
	ss.refreshViewsLocked() // before it subscribes: the router may read them from then on
	if ss.unsubscribe == nil {
		ss.unsubscribe = ss.s.r.Subscribe(ss)
	}
	ss.opened = opened
	ss.opened.Time = time.Now()
	ss.mu.Unlock()
	ss.s.observe(opened)
}
