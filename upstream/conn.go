package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// conn is one lifetime of the child process: its id space, pending calls and progress
// routes. A restart makes a new conn; ids are never reused within one.
type conn struct {
	u    *Upstream
	proc transport.Link
	log  zerolog.Logger

	nextID   atomic.Int64
	answered atomic.Int64 // responses the upstream sent to the proxy's requests (the restart backoff reads it)
	// answeredAtReady is answered when the connection became current (set before any
	// call can use it, under Upstream.mu): what it answered since were calls.
	answeredAtReady int64

	mu       sync.Mutex // guards pending, progress, closed and the read role's fields below
	pending  map[int64]*pendingCall
	progress map[string]func(json.RawMessage) // upstream progress token (raw JSON) → sink
	closed   error                            // non-nil once the connection is dead

	readerDone chan struct{}

	// The sweeper parks while nothing is pending, so that an idle proxy does not wake
	// several times a second per upstream; the first call sent wakes it (guarded by mu).
	sweepParked bool
	sweepWake   chan struct{} // buffered

	// What the link can do, found once in newConn: ex when every request is an exchange
	// of its own (HTTP), iex when such an exchange can run on the caller's goroutine.
	ex  transport.Exchanger
	iex transport.InlineExchanger

	// The read role (lead.go). leadable, ri, bgWake and idle are set once in newConn.
	leadable    bool                      // waiting callers may read the link themselves
	ri          transport.ReadInterrupter // the link, when leadable
	bgWake      chan struct{}             // buffered: the reader goroutine was given the role
	idle        *time.Timer               // fires when the role may have been free for idleReadGrace
	idleArmed   bool                      // idle is armed
	idleGrace   time.Duration             // idleReadGrace when the connection started
	freeSince   time.Time                 // when the role was last left free
	holder      *pendingCall              // the call whose caller reads the link (the leader), or nil
	bgHolds     bool                      // the reader goroutine holds the role
	waiters     []*pendingCall            // followers: callers waiting in the conn, oldest first
	ownerless   int                       // pending calls whose caller does not wait in the conn
	lastInline  bool                      // the last call sent has its caller waiting in the conn
	interrupted bool                      // the leader's read is interrupted (ri.InterruptRead)
	readErr     error                     // the link's output ended

	ctx    context.Context // ends when the connection dies
	cancel context.CancelFunc

	modern   atomic.Bool // the upstream speaks the stateless 2026-07-28 protocol (read by the reader goroutine too)
	version  string      // the protocol version spoken
	logLevel atomic.Pointer[string]

	resMu      sync.Mutex         // guards resListens
	resListens map[string][]int64 // modern upstream: subscription request ids by resource URI

	asking atomic.Int32 // server-to-client requests being answered by a client right now

	inboundMu sync.Mutex                    // guards inbound
	inbound   map[string]context.CancelFunc // server-to-client requests being relayed, by raw id

	refreshMu    sync.Mutex // guards refreshKinds and refreshing
	refreshKinds Kinds
	refreshing   bool
}

// pendingCall is one request awaiting its response. Exactly one of response, timeout,
// cancellation or connection failure completes it: whoever removes it from the pending
// table calls done.
type pendingCall struct {
	ctx         context.Context // the caller's: its log lines carry the call's trace (see Event.Ctx)
	done        func(*jsonrpc.Message, error)
	method      string
	progressKey string
	timeout     time.Duration
	deadline    int64       // UnixNano after which the sweeper times the call out
	canceller   *Canceller  // the caller's, or nil
	stopCtx     func() bool // unregisters the context watcher, or nil
	input       func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error)
	abort       func() // ends the call's inline exchange (see AllowInline), or nil; guarded by conn.mu
	conn        *conn
	id          int64
	msg         jsonrpc.Message // the request as written (one allocation with the call)

	// Leader/follower read (lead.go): owned is set when the caller waits in the conn for
	// the outcome (await); the rest is guarded by conn.mu. wake is made when the caller
	// first has to block (a leader that reads its own answer never does).
	owned    bool
	wake     chan struct{}
	finished bool             // out of the pending table
	waiting  bool             // in conn.waiters
	handed   bool             // outMsg and outErr are for the caller to pass to done
	outMsg   *jsonrpc.Message //
	outErr   error            //
}

func newConn(ctx context.Context, u *Upstream, proc transport.Link) *conn {
	ctx, cancel := context.WithCancel(ctx)
	c := &conn{
		ctx:        ctx,
		cancel:     cancel,
		u:          u,
		proc:       proc,
		log:        u.log.With().Str("peer", proc.Describe()).Logger(),
		pending:    make(map[int64]*pendingCall),
		progress:   make(map[string]func(json.RawMessage)),
		inbound:    make(map[string]context.CancelFunc),
		resListens: make(map[string][]int64),
		readerDone: make(chan struct{}),
		bgWake:     make(chan struct{}, 1),
		sweepWake:  make(chan struct{}, 1),
		idle:       time.NewTimer(time.Hour),
		bgHolds:    true, // the handshake's answers need a reader
		idleGrace:  idleReadGrace,
	}
	c.idle.Stop()
	c.ex, _ = proc.(transport.Exchanger)
	c.iex, _ = proc.(transport.InlineExchanger)
	if ri, ok := proc.(transport.ReadInterrupter); ok && ri.ReadInterruptible() && c.ex == nil {
		c.leadable, c.ri = true, ri
	}
	if rf, ok := proc.(transport.RequestFailer); ok {
		rf.OnRequestFailure(c.requestFailed)
	}
	return c
}

// requestFailed fails a call whose request the link could not complete (an HTTP POST
// that failed alone) with a proxy error: the upstream said nothing, so nothing may look
// like its answer.
func (c *conn) requestFailed(id jsonrpc.ID, err error) {
	n, ok := id.Int64()
	if !ok {
		return
	}
	pc := c.takeAnswered(n) // the exchange is over
	if pc == nil {
		return
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code != 0 {
		// A failure the link's authorizer made for the client (no usable credential):
		// it is the call's answer as it is.
		c.log.Info().Ctx(pc.ctx).Int64("code", je.Code).Str("method", pc.method).Msg("request not sent upstream: no usable credential")
		pc.done(nil, je)
		return
	}
	code := int64(mcp.CodeUpstreamFailed)
	if errors.Is(err, jsonrpc.ErrMessageTooLarge) {
		code = mcp.CodeMessageTooLarge
	}
	c.log.Warn().Ctx(pc.ctx).Err(err).Str("method", pc.method).Msg("request to the upstream failed")
	pc.done(nil, mcp.ProxyError(code, c.u.spec.Name, fmt.Sprintf("upstream %q: %v", c.u.spec.Name, err)))
}

// setProtocolVersion tells a link that carries the version on every request (HTTP).
func (c *conn) setProtocolVersion(v string) {
	if vc, ok := c.proc.(transport.VersionCarrier); ok {
		vc.SetProtocolVersion(v)
	}
}

// writeRequest writes a request. On a link where each request is an exchange of its
// own (HTTP), the request goes with the Mcp-Param-* headers a modern upstream's tool
// schema asks for, and what its answer carries is handled knowing which call it belongs
// to: a server request on a call's own stream goes to that call's client.
//
// abortable, when set, is given what ends the exchange early; with inline, the exchange
// runs on the calling goroutine (see AllowInline).
func (c *conn) writeRequest(m *jsonrpc.Message, abortable func(abort func()), inline bool) error {
	if c.ex == nil {
		return c.write(m)
	}
	var headers map[string]string
	if c.modern.Load() && m.Method == mcp.MethodToolsCall {
		name, _, _ := jsonx.GetString(m.Params, "name")
		c.u.mu.Lock()
		phs := c.u.catalogue.ParamHeaders[name]
		c.u.mu.Unlock()
		headers = mcp.ParamHeaderValues(phs, m.Params)
	}
	origin, _ := m.ID.Int64()
	onMessage := func(line []byte) { c.handleLine(line, origin) }
	var err error
	if inline {
		err = c.iex.ExchangeInline(m, headers, onMessage, abortable)
	} else {
		err = c.ex.Exchange(m, headers, onMessage, abortable)
	}
	if err != nil {
		return fmt.Errorf("writing to upstream %q: %w", c.u.spec.Name, err)
	}
	return nil
}

func (c *conn) write(m *jsonrpc.Message) error {
	if err := c.proc.Write(m); err != nil {
		return fmt.Errorf("writing to upstream %q: %w", c.u.spec.Name, err)
	}
	return nil
}

// send implements Upstream.Send on this connection.
func (c *conn) send(ctx context.Context, req *Request, done func(*jsonrpc.Message, error)) (id int64) {
	if c.modern.Load() && c.legacyOnModern(ctx, req, done) {
		return 0
	}
	id = c.nextID.Add(1)
	params := req.Params
	if c.modern.Load() && req.Method != mcp.MethodSubscriptionsListen && !req.ClientHandlesInput {
		// Before the pending call takes done: the answer goes through the wrapper.
		done = c.fulfilInputs(ctx, req, done, 0)
	}
	pc := &pendingCall{ctx: ctx, done: done, method: req.Method, input: req.Input, conn: c, id: id}
	// A caller that may run the call on its own goroutine (AllowInline) exchanges it
	// inline on a link that can (HTTP), or waits in the conn and may read the answer
	// itself on one that can be led (a child's pipes, see lead.go).
	var hook InlineHook
	inline, leads := false, false
	if c.iex != nil || c.leadable {
		if h, claimed := claimInline(ctx, c.iex == nil); claimed {
			hook, inline, leads = h, c.iex != nil, c.iex == nil
		}
	}
	pc.owned = leads

	params, origToken, err := c.adapt(req, id)
	if err != nil {
		done(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "malformed _meta: %v", err))
		return 0
	}
	if origToken != nil {
		pc.progressKey = strconv.FormatInt(id, 10) // the token adapt put in its place
	}
	c.mu.Lock()
	if c.closed != nil {
		err := c.closed
		c.mu.Unlock()
		done(nil, err)
		return 0
	}
	c.pending[id] = pc
	if c.sweepParked {
		c.sweepParked = false
		c.sweepWake <- struct{}{} // never blocks: only a parked sweeper empties it
	}
	c.lastInline = leads
	if !leads {
		c.ownerless++
		c.ensureReaderLocked()
	}
	if pc.progressKey != "" {
		sink := req.Progress
		c.progress[pc.progressKey] = func(p json.RawMessage) {
			if out, err := jsonx.Set(p, mcp.MetaProgressToken, origToken); err == nil {
				sink(out)
			}
		}
	}
	// The deadline (enforced by the sweeper) and the cancellation hooks are set under the
	// lock so that nothing can complete the call before they exist.
	pc.timeout = req.Timeout
	if pc.timeout == 0 {
		pc.timeout = c.u.spec.Timeout
	}
	pc.deadline = time.Now().Add(pc.timeout).UnixNano()
	if pc.timeout < 0 {
		pc.deadline = math.MaxInt64 // no timeout (a subscription)
	}
	cancelNow := false
	switch {
	case req.Cancel != nil:
		pc.canceller = req.Cancel
		cancelNow = !req.Cancel.arm(pc)
	case ctx.Done() != nil:
		pc.stopCtx = context.AfterFunc(ctx, func() {
			if c.take(pc.id) != nil {
				c.sendCancel(pc.id, "cancelled by the client")
				pc.done(nil, ctx.Err())
			}
		})
	}
	c.mu.Unlock()
	if cancelNow {
		if c.take(id) != nil {
			done(nil, ErrCancelled)
		}
		return 0
	}

	var abortable func(abort func())
	if hook != nil && (inline || leads) {
		hook.InlineStarted()
		defer hook.InlineEnded()
	}
	if inline || c.cancelsByAbort() {
		abortable = c.abortable(id, pc)
	}
	pc.msg = jsonrpc.Message{ID: jsonrpc.IntID(id), Method: req.Method, Params: params}
	if err := c.writeRequest(&pc.msg, abortable, inline); err != nil {
		if c.take(id) != nil {
			done(nil, mcp.ProxyError(mcp.CodeUpstreamFailed, c.u.spec.Name, err.Error()))
		}
	}
	if leads {
		c.await(pc)
	}
	return id
}

// cancel is what cancelling pc's Canceller does (the client cancelled the call): the
// upstream is told, and the call completes with ErrCancelled.
func (pc *pendingCall) cancel() {
	c := pc.conn
	if c.take(pc.id) != nil {
		c.sendCancel(pc.id, "cancelled by the client")
		pc.done(nil, ErrCancelled)
	}
}

// abortable gives an inline exchange's abort to call pc: taking the call (a
// cancellation, a timeout) ends the exchange.
func (c *conn) abortable(id int64, pc *pendingCall) func(abort func()) {
	return func(abort func()) {
		c.mu.Lock()
		if c.pending[id] == pc {
			pc.abort = abort
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		abort() // already cancelled or timed out: no need to wait for the answer
	}
}

// take removes a pending call and its timers, and ends its inline exchange, if any (it
// was cancelled, timed out or failed: what the exchange would bring is not wanted); nil
// when another path already took it.
func (c *conn) take(id int64) *pendingCall { return c.takeCall(id, true) }

// takeAnswered is take for the call's own exchange bringing its end (its response, or a
// failure of the exchange itself), which must not be cut short.
func (c *conn) takeAnswered(id int64) *pendingCall { return c.takeCall(id, false) }

func (c *conn) takeCall(id int64, abort bool) *pendingCall {
	pc, _ := c.takeWith(id, abort, false, nil, nil)
	return pc
}

// takeOutcome is takeAnswered for the call's outcome read from the link (its response,
// or the error that stands for it): when the call's caller waits in the conn as a
// follower, the outcome is handed to it (handed), and the caller of takeOutcome must not
// call done; otherwise it must.
func (c *conn) takeOutcome(id int64, msg *jsonrpc.Message, err error) (pc *pendingCall, handed bool) {
	return c.takeWith(id, false, true, msg, err)
}

func (c *conn) takeWith(id int64, abort, hand bool, msg *jsonrpc.Message, err error) (*pendingCall, bool) {
	c.mu.Lock()
	pc := c.pending[id]
	var stop func()
	handed := false
	if pc != nil {
		delete(c.pending, id)
		if pc.progressKey != "" {
			delete(c.progress, pc.progressKey)
		}
		if abort {
			stop = pc.abort
		}
		handed = c.finishLocked(pc, abort, hand, msg, err)
	}
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	if pc != nil {
		if pc.canceller != nil {
			pc.canceller.disarm()
		}
		if pc.stopCtx != nil {
			pc.stopCtx()
		}
	}
	return pc, handed
}

// extendDeadlines gives every call in flight its whole timeout again from now.
func (c *conn) extendDeadlines() {
	now := time.Now()
	c.mu.Lock()
	for _, pc := range c.pending {
		if pc.deadline != math.MaxInt64 {
			pc.deadline = now.Add(pc.timeout).UnixNano()
		}
	}
	c.mu.Unlock()
}

// sweep times out calls past their deadline until the connection dies. One sweeper per
// connection replaces a timer per call, which is measurably cheaper on the hot path; the
// price is that a timeout fires up to one tick late. A tick that finds nothing pending
// parks the sweeper until the next call is sent.
func (c *conn) sweep() {
	tick := min(max(c.u.spec.Timeout/20, 10*time.Millisecond), 250*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	var expired []int64
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-t.C:
			if c.asking.Load() > 0 {
				continue // a client is answering for this upstream: nothing times out
			}
			expired = expired[:0]
			n := now.UnixNano()
			c.mu.Lock()
			if len(c.pending) == 0 {
				c.sweepParked = true
				c.mu.Unlock()
				t.Stop()
				select {
				case <-c.ctx.Done():
					return
				case <-c.sweepWake:
				}
				t.Reset(tick)
				continue
			}
			for id, pc := range c.pending {
				if pc.deadline < n {
					expired = append(expired, id)
				}
			}
			c.mu.Unlock()
			for _, id := range expired {
				if pc := c.take(id); pc != nil {
					c.sendCancel(id, "timed out in mcp-proxy")
					c.u.observe(Event{Kind: EventCallTimedOut, Method: pc.method})
					c.log.Warn().Ctx(pc.ctx).Str("method", pc.method).Dur("timeout", pc.timeout).
						Msg("the upstream did not answer in time; the call fails")
					pc.done(nil, mcp.ProxyError(mcp.CodeUpstreamTimeout, c.u.spec.Name,
						fmt.Sprintf("upstream %q did not answer %s within %s", c.u.spec.Name, pc.method, pc.timeout)))
				}
			}
		}
	}
}

// call is the synchronous form of send.
func (c *conn) call(ctx context.Context, req *Request) (*jsonrpc.Message, error) {
	ch := make(chan callResult, 1)
	c.send(ctx, req, func(m *jsonrpc.Message, err error) { ch <- callResult{m, err} })
	r := <-ch
	return r.msg, r.err
}

type callResult struct {
	msg *jsonrpc.Message
	err error
}

// cancelsByAbort reports whether a request to this upstream is cancelled by ending its
// exchange rather than with notifications/cancelled: a 2026-07-28 upstream over HTTP,
// where closing the answer stream is the cancellation and the notification does not
// exist.
func (c *conn) cancelsByAbort() bool {
	return c.ex != nil && c.modern.Load()
}

// sendCancel tells the upstream to stop working on id; its late response will be dropped.
// Where cancelling is ending the exchange (cancelsByAbort), take already did it.
func (c *conn) sendCancel(id int64, reason string) {
	if c.cancelsByAbort() {
		return
	}
	params, _ := jsonx.Marshal(struct {
		RequestID int64  `json:"requestId"`
		Reason    string `json:"reason,omitempty"`
	}{id, reason})
	if err := c.write(jsonrpc.NewNotification(mcp.NotificationCancelled, params)); err != nil {
		c.log.Debug().Err(err).Msg("could not send cancellation")
	}
}

// fail marks the connection dead and fails every call in flight with err.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.closed != nil {
		c.mu.Unlock()
		return
	}
	c.closed = err
	c.cancel()
	c.ensureReaderLocked() // to see the end of the link's output
	ids := make([]int64, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		if pc := c.take(id); pc != nil {
			pc.done(nil, err)
		}
	}
}

// handleLine acts on one message from the upstream. origin is the proxy's id of the
// request whose own answer carried it (an HTTP exchange), 0 when it came on the shared
// stream (a child's stdout, a session's GET stream).
func (c *conn) handleLine(line []byte, origin int64) {
	msg, err := jsonrpc.Decode(line)
	if err != nil {
		c.badLine(line, msg, err)
		return
	}
	switch {
	case msg.IsResponse():
		c.deliver(msg)
	case msg.IsNotification():
		c.notification(msg)
	default:
		// Registered for cancellation here, before its goroutine starts, so that a
		// notifications/cancelled right behind it in the same burst finds it.
		rctx, done := c.registerInbound(c.ctx, msg)
		c.u.wg.Add(1)
		go func() {
			defer c.u.wg.Done()
			defer done()
			c.serverRequest(rctx, msg, origin)
		}()
	}
}

func (c *conn) deliver(msg *jsonrpc.Message) {
	id, ok := msg.ID.Int64()
	if !ok {
		if !msg.ID.IsValid() && msg.Error != nil {
			// Some servers answer notifications/initialized (a notification) with an
			// error carrying "id": null. Harmless: note it and go on.
			c.log.Debug().Int64("code", msg.Error.Code).Str("error", msg.Error.Message).
				Msg("upstream sent an error response without id (probably to a notification); ignored")
			return
		}
		c.log.Warn().Str("id", msg.ID.String()).Msg("upstream sent a response with an id the proxy never used; dropped")
		return
	}
	c.answered.Add(1) // late or not, the upstream is answering
	pc, handed := c.takeOutcome(id, msg, nil)
	if pc == nil {
		c.log.Debug().Int64("id", id).Msg("late response for a cancelled or timed-out request; dropped")
		return
	}
	if !handed {
		pc.done(msg, nil)
	}
}

func (c *conn) notification(msg *jsonrpc.Message) {
	switch msg.Method {
	case mcp.NotificationProgress:
		tok, ok, _ := jsonx.Get(msg.Params, mcp.MetaProgressToken)
		if !ok {
			return
		}
		c.mu.Lock()
		sink := c.progress[string(tok)]
		c.mu.Unlock()
		if sink == nil {
			c.log.Debug().RawJSON("token", tok).Msg("progress for an unknown or finished request; dropped")
			return
		}
		sink(msg.Params)
	case mcp.NotificationToolsListChanged:
		c.u.refresh(KindTools)
	case mcp.NotificationPromptsListChanged:
		c.u.refresh(KindPrompts)
	case mcp.NotificationResourcesListChanged:
		c.u.refresh(KindResources | KindTemplates)
	case mcp.NotificationSubscriptionsAcked:
		// Our own subscriptions (list changes, resources) are in place.
	case mcp.NotificationCancelled:
		// The upstream withdraws one of its own requests to the client.
		raw, ok, _ := jsonx.Get(msg.Params, "requestId")
		if !ok {
			return
		}
		var id jsonrpc.ID
		if id.UnmarshalJSON(raw) != nil {
			return
		}
		c.inboundMu.Lock()
		cancel := c.inbound[id.Key()]
		c.inboundMu.Unlock()
		if cancel != nil {
			cancel()
		}
	default:
		if c.modern.Load() {
			// The upstream tags notifications with our subscription's id; clients have
			// their own subscriptions (or none), so the tag stays here.
			if meta, ok, _ := jsonx.Get(msg.Params, "_meta"); ok {
				if m, err := jsonx.Delete(meta, mcp.MetaSubscriptionID); err == nil {
					if p, err := jsonx.Set(msg.Params, "_meta", m); err == nil {
						msg = &jsonrpc.Message{Method: msg.Method, Params: p}
					}
				}
			}
		}
		c.u.events.Notification(c.u, msg)
	}
}

// requestRefresh records kinds to re-fetch and reports whether a refresh loop must be
// started (none is running).
func (c *conn) requestRefresh(kinds Kinds) bool {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	c.refreshKinds |= kinds
	if c.refreshing {
		return false
	}
	c.refreshing = true
	return true
}

// refreshLoop re-fetches requested lists until no more are requested, publishing each
// result while this connection is still the upstream's current one.
func (c *conn) refreshLoop() {
	for {
		c.refreshMu.Lock()
		kinds := c.refreshKinds
		c.refreshKinds = 0
		if kinds == 0 || c.ctx.Err() != nil {
			c.refreshing = false
			c.refreshMu.Unlock()
			return
		}
		c.refreshMu.Unlock()

		u := c.u
		u.mu.Lock()
		info, base := u.info, u.catalogue
		u.mu.Unlock()
		ctx, cancel := context.WithTimeout(c.ctx, u.spec.StartupTimeout)
		cat, err := c.fetch(ctx, info, base, kinds)
		cancel()
		if err != nil {
			c.log.Warn().Err(err).Msg("refreshing the catalogue after list_changed")
			if c.ctx.Err() != nil {
				continue
			}
		}
		u.mu.Lock()
		current := u.cur == c
		if current {
			u.catalogue = cat
		}
		u.mu.Unlock()
		if current {
			u.events.Changed(u, kinds)
		}
	}
}
