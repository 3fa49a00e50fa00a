package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// Bridging a modern client to a legacy upstream. A legacy upstream asks the client for
// input (sampling, elicitation, roots) with a request of its own while a call is in
// flight; a modern client cannot receive requests. The proxy keeps the upstream call
// open, parks the upstream's request, answers the client's call with an input_required
// result whose requestState is a proxy-minted, HMAC'd, expiring handle, and when the
// client retries with inputResponses answers the parked request and goes on waiting for
// the upstream's result on behalf of the retry.

// parkTTL is how long a parked call waits for the client's retry before it is cancelled
// upstream.
const parkTTL = 5 * time.Minute

// inputKey names the first input request of a round; later ones in the same round are
// input2, input3, ...
const inputKey = "input"

// gatherWindow is how long a round waits, after the upstream's first input request, for
// others it sends together (elicitation, sampling and roots at once), so that the
// client gets them in one input_required result.
const gatherWindow = 10 * time.Millisecond

// maxRoundInputs bounds the input requests of one round.
const maxRoundInputs = 16

// bridgeCall is one modern call that may go through input rounds.
type bridgeCall struct {
	ss        *session
	id        uint64
	method    string
	name      string // tools/call and prompts/get name, or resources/read uri
	caps      mcp.ClientCapabilities
	canceller router.Canceller
	principal string // who made the call: only they may retry it

	mu      sync.Mutex // guards the fields below
	active  *activeReq // the client request now waiting for this call; nil while parked
	pending *round     // the upstream's requests awaiting the client's input
	final   *outcome   // the upstream's result, if it came while no client request waited
}

// round is the set of the upstream's input requests answered by one client retry.
type round struct {
	keys   []string
	parked map[string]*parked
	sent   bool // the input_required result has gone to the client
}

type activeReq struct {
	id    jsonrpc.ID
	reply func(*jsonrpc.Message)
}

type parked struct {
	method string
	params json.RawMessage
	answer chan json.RawMessage // the client's input response; nil value means none
}

type outcome struct {
	res json.RawMessage
	err error
}

// routeKey is what identifies the target of a call: retries must keep it.
func routeKey(params json.RawMessage) string {
	if n, ok, _ := jsonx.GetString(params, "name"); ok {
		return n
	}
	u, _, _ := jsonx.GetString(params, "uri")
	return u
}

// startModernCall dispatches a modern request; tools/call, prompts/get and resources/read
// can go through input rounds.
func (ss *session) startModernCall(ctx context.Context, msg *jsonrpc.Message, rm requestMeta, rp replier) {
	reply := rp.reply
	if !ss.track() {
		reply(nil)
		return
	}
	bc := &bridgeCall{ss: ss, id: ss.s.nextCall(), method: msg.Method, name: routeKey(msg.Params), caps: rm.parsed,
		active: &activeReq{id: msg.ID, reply: reply}, principal: principalName(ctx)}
	req := &router.Request{Method: msg.Method, Params: msg.Params, ID: rp.idOf(msg), Cancel: &bc.canceller, Modern: true,
		Principal: principal.From(ctx), Endpoint: ss.endpoint,
		Meta: &router.ClientMeta{Capabilities: mcp.NarrowClientCapabilities(rm.caps), Info: rm.info, LogLevel: rm.logLevel}}
	if hasProgressToken(rm.meta) {
		notify := rp.notifier(ss)
		req.Progress = func(p json.RawMessage) { notify(mcp.NotificationProgress, p) }
	}
	switch msg.Method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead:
		req.Input, req.Client, req.Waiting = bc.input, ss.s.nextClientID(), bc.parked
	}
	ss.mu.Lock()
	ss.inflight[msg.ID.Key()] = &bc.canceller
	ss.mu.Unlock()
	ss.s.r.Dispatch(ctx, req, func(res json.RawMessage, err error) {
		defer ss.wg.Done()
		bc.complete(res, err)
	})
}

// complete delivers the upstream's outcome to the client request waiting for it.
func (bc *bridgeCall) complete(res json.RawMessage, err error) {
	bc.mu.Lock()
	a := bc.active
	bc.active = nil
	if a == nil {
		bc.final = &outcome{res, err} // delivered to the next retry
		bc.mu.Unlock()
		return
	}
	bc.mu.Unlock()
	bc.ss.forgetBridge(bc.id)
	bc.deliver(a, res, err)
}

func (bc *bridgeCall) deliver(a *activeReq, res json.RawMessage, err error) {
	switch {
	case errors.Is(err, router.ErrCancelled):
		bc.answer(a, nil)
	case err != nil:
		bc.answer(a, responseFor(a.id, nil, modernError(err)))
	default:
		bc.answer(a, jsonrpc.NewResult(a.id, modernResult(bc.method, bc.ss.s.bindInputRequired(bc.principal, markInputRequired(res)))))
	}
}

// answer replies to one client request of this call; the request is then no longer in
// flight (a notifications/cancelled naming it does nothing more).
func (bc *bridgeCall) answer(a *activeReq, m *jsonrpc.Message) {
	key := a.id.Key()
	bc.ss.mu.Lock()
	if bc.ss.inflight[key] == &bc.canceller {
		delete(bc.ss.inflight, key)
	}
	bc.ss.mu.Unlock()
	a.reply(m)
}

// input is called (on the upstream's goroutine) when the legacy upstream asks for input
// during this call: the client's request is answered with input_required and the
// upstream's request waits for the retry.
func (bc *bridgeCall) input(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	if ok, reason := bc.caps.Allows(method, params); !ok {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "mcp-proxy cannot relay %s: %s", method, reason)
	}
	p := &parked{method: method, params: params, answer: make(chan json.RawMessage, 1)}
	bc.mu.Lock()
	switch r := bc.pending; {
	case r != nil && !r.sent && len(r.keys) < maxRoundInputs:
		// Another request of the round being gathered: it goes out with the first.
		key := inputKey + strconv.Itoa(len(r.keys)+1)
		r.keys = append(r.keys, key)
		r.parked[key] = p
		bc.mu.Unlock()
	case r != nil || bc.active == nil:
		bc.mu.Unlock()
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcp-proxy cannot relay %s now: the call is waiting for its client", method)
	default:
		r := &round{keys: []string{inputKey}, parked: map[string]*parked{inputKey: p}}
		bc.pending = r
		bc.mu.Unlock()
		time.Sleep(gatherWindow)
		bc.mu.Lock()
		r.sent = true
		a := bc.active
		bc.active = nil
		requests := make(map[string]any, len(r.keys))
		for _, k := range r.keys {
			requests[k] = map[string]any{"method": r.parked[k].method, "params": r.parked[k].params}
		}
		if a == nil { // the client's request went away while gathering: no one to ask
			bc.pending = nil
			bc.mu.Unlock()
			for _, k := range r.keys[1:] {
				r.parked[k].answer <- nil
			}
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the client's request ended before it could be asked for %s", method)
		}
		bc.mu.Unlock()
		bc.ss.keepBridge(bc)
		state := bc.ss.s.mintState(bc.ss.nonce, bc.ss.replica, bc.principal, bc.id, time.Now().Add(parkTTL))
		res, _ := jsonx.Marshal(map[string]any{
			"resultType":    mcp.ResultTypeInputRequired,
			"inputRequests": requests,
			"requestState":  state,
		})
		bc.answer(a, jsonrpc.NewResult(a.id, res))
	}

	timer := time.NewTimer(parkTTL)
	defer timer.Stop()
	select {
	case ans := <-p.answer:
		if ans == nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "the client gave no input for %s", method)
		}
		return ans, nil
	case <-ctx.Done():
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "withdrawn")
	case <-timer.C:
		// The client never came back: give up on the whole call.
		bc.ss.forgetBridge(bc.id)
		bc.canceller.Cancel()
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the client did not answer %s within %s", method, parkTTL)
	}
}

// resume serves a retry carrying requestState: it answers the parked upstream request
// with the client's input and waits for the call's next outcome on the retry's behalf.
func (ss *session) resume(ctx context.Context, msg *jsonrpc.Message, state string, rm requestMeta, rp replier) {
	reply := rp.reply
	bad := func(why string) {
		reply(jsonrpc.NewErrorResponse(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: requestState %s", why)))
	}
	who := principalName(ctx)
	id, err := ss.s.openState(ss.nonce, ss.replica, who, state)
	if errors.Is(err, errOtherReplica) {
		// Forwarding (HTTPOptions.ForwardTo) did not take it: that replica is gone, and
		// the call it parked with it.
		bad("names a call parked on another proxy replica, which cannot be reached; send the request again without requestState")
		return
	}
	if err != nil {
		// Not a parked call of this proxy's: an upstream's own state, which the proxy
		// handed out wrapped and bound to the principal it was issued to.
		inner, ok := ss.s.unwrapState(who, state)
		if !ok {
			bad("is not valid here (expired, altered, or issued to another client)")
			return
		}
		if params, err := jsonx.Set(msg.Params, "requestState", jsonrpc.AppendString(nil, inner)); err == nil {
			c := *msg
			c.Params = params
			msg = &c
		}
		ss.startModernCall(ctx, msg, rm, rp)
		return
	}
	ss.mu.Lock()
	bc := ss.bridges[id]
	ss.mu.Unlock()
	if bc == nil {
		bad("refers to no pending call (finished, expired or from another connection)")
		return
	}
	if bc.method != msg.Method || bc.name != routeKey(msg.Params) {
		bad("belongs to a different request")
		return
	}
	bc.mu.Lock()
	if bc.active != nil {
		bc.mu.Unlock()
		bad("is already being retried")
		return
	}
	// The retry is in flight for the client now: cancelling it cancels the call.
	ss.mu.Lock()
	ss.inflight[msg.ID.Key()] = &bc.canceller
	ss.mu.Unlock()
	p := bc.pending
	if p != nil && !p.sent {
		bc.mu.Unlock()
		bad("is not awaited yet")
		return
	}
	bc.pending = nil
	a := &activeReq{id: msg.ID, reply: reply}
	final := bc.final
	bc.final = nil
	if final == nil {
		bc.active = a
	}
	bc.mu.Unlock()
	if p != nil {
		responses, _, _ := jsonx.Get(msg.Params, "inputResponses")
		for _, k := range p.keys {
			ans, _, _ := jsonx.Get(responses, k)
			p.parked[k].answer <- ans
		}
	}
	if final != nil {
		ss.forgetBridge(bc.id)
		bc.deliver(a, final.res, final.err)
	}
}

// parked reports whether the call waits for its client's retry.
func (bc *bridgeCall) parked() bool {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	return bc.pending != nil && bc.pending.sent
}

// parkedCalls appends the cancellers of the calls parked for their client's retry (no
// client request is in flight for them, so ss.inflight does not hold them): a session
// that shuts down ends them rather than waiting parkTTL. The caller holds ss.mu.
func (ss *session) parkedCalls(to []*router.Canceller) []*router.Canceller {
	for _, bc := range ss.bridges {
		to = append(to, &bc.canceller)
	}
	return to
}

func (ss *session) keepBridge(bc *bridgeCall) {
	ss.mu.Lock()
	ss.bridges[bc.id] = bc
	ss.mu.Unlock()
}

func (ss *session) forgetBridge(id uint64) {
	ss.mu.Lock()
	delete(ss.bridges, id)
	ss.mu.Unlock()
}

// stateKeys mint and check requestState handles: call id and expiry under an HMAC that
// also binds the connection, so a handle is useless anywhere else or after it expires.
// The key is Options.StateKey, or random for this process.
//
// In a cluster (HTTPOptions.Replica) a handle also names the replica whose process holds
// the parked call, "r.REPLICA." before the MAC'd bytes, so that a retry landing on
// another replica is forwarded there (HTTPOptions.ForwardTo); the MAC covers the replica
// id too. A forged or altered name only sends the retry to another registered replica,
// which refuses it: its MAC does not check there.
type stateKeys struct {
	once sync.Once
	key  []byte // set once
}

const stateMACLen = 16

// replicaStatePrefix starts the handles that name a replica; base64url has no '.', so
// neither a plain handle nor a wrapped upstream state ("w.") can be read as one.
const replicaStatePrefix = "r."

// errOtherReplica: the handle names another replica than the one opening it.
var errOtherReplica = errors.New("was issued by another proxy replica")

func (s *Server) stateKey() []byte {
	s.states.once.Do(func() {
		if len(s.opts.StateKey) > 0 {
			s.states.key = bytes.Clone(s.opts.StateKey)
			return
		}
		s.states.key = make([]byte, router.MinKeyLen)
		_, _ = rand.Read(s.states.key) // never fails since Go 1.24
	})
	return s.states.key
}

func (s *Server) mintState(nonce [16]byte, replica, who string, id uint64, expires time.Time) string {
	var b [16 + stateMACLen]byte
	binary.BigEndian.PutUint64(b[0:8], id)
	binary.BigEndian.PutUint64(b[8:16], uint64(expires.Unix()))
	copy(b[16:], s.stateMAC(nonce, replica, who, b[:16]))
	if replica == "" {
		return base64.RawURLEncoding.EncodeToString(b[:])
	}
	return replicaStatePrefix + replica + "." + base64.RawURLEncoding.EncodeToString(b[:])
}

// stateReplica is the replica a handle names ("" for none: a handle of a proxy outside a
// cluster, an upstream's wrapped state, or anything else).
func stateReplica(state string) string {
	rest, ok := strings.CutPrefix(state, replicaStatePrefix)
	if !ok {
		return ""
	}
	replica, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ""
	}
	return replica
}

func (s *Server) openState(nonce [16]byte, replica, who, state string) (uint64, error) {
	named := stateReplica(state)
	if named != "" {
		if named != replica {
			return 0, errOtherReplica
		}
		state = state[len(replicaStatePrefix)+len(named)+1:]
	}
	// The MAC covers this replica's name: a handle that names none does not open here.
	b, err := base64.RawURLEncoding.Strict().DecodeString(state) // Strict: one spelling per handle
	if err != nil || len(b) != 16+stateMACLen || !hmac.Equal(b[16:], s.stateMAC(nonce, replica, who, b[:16])) {
		return 0, errors.New("is not one this proxy issued")
	}
	if time.Now().Unix() > int64(binary.BigEndian.Uint64(b[8:16])) {
		return 0, errors.New("has expired")
	}
	return binary.BigEndian.Uint64(b[0:8]), nil
}

func (s *Server) stateMAC(nonce [16]byte, replica, who string, body []byte) []byte {
	m := hmac.New(sha256.New, s.stateKey())
	m.Write(nonce[:])
	if replica != "" { // absent outside a cluster: those handles' MACs are as before
		m.Write([]byte(replicaStatePrefix + replica + "\x00"))
	}
	m.Write([]byte(who))
	m.Write([]byte{0})
	m.Write(body)
	return m.Sum(nil)[:stateMACLen]
}

// wrappedPrefix marks an upstream's requestState as handed out by the proxy: "w." +
// MAC(principal, state) + "." + state.
const wrappedPrefix = "w."

// wrapState binds an upstream's requestState to the principal it is issued to, so that
// no one else can replay it.
func (s *Server) wrapState(who, state string) string {
	return wrappedPrefix + base64.RawURLEncoding.EncodeToString(s.wrapMAC(who, state)) + "." + state
}

// unwrapState checks a wrapped state against the principal retrying with it.
func (s *Server) unwrapState(who, wrapped string) (string, bool) {
	rest, ok := strings.CutPrefix(wrapped, wrappedPrefix)
	if !ok {
		return "", false
	}
	mac64, inner, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	mac, err := base64.RawURLEncoding.Strict().DecodeString(mac64)
	if err != nil || !hmac.Equal(mac, s.wrapMAC(who, inner)) {
		return "", false
	}
	return inner, true
}

func (s *Server) wrapMAC(who, state string) []byte {
	m := hmac.New(sha256.New, s.stateKey())
	m.Write([]byte("upstream-state\x00"))
	m.Write([]byte(who))
	m.Write([]byte{0})
	m.Write([]byte(state))
	return m.Sum(nil)[:stateMACLen]
}

// principalName is the identity of the principal a request is made for ("" for none):
// what a parked call and its requestState are bound to.
func principalName(ctx context.Context) string {
	if p := principal.From(ctx); p != nil {
		return p.ID()
	}
	return ""
}

// markInputRequired gives a result that asks for input (inputRequests and requestState)
// but says no resultType its type, input_required, rather than letting it pass as
// complete (a legacy session of a dual-era SDK returns later rounds that way).
func markInputRequired(res json.RawMessage) json.RawMessage {
	if _, ok, _ := jsonx.Get(res, "resultType"); ok {
		return res
	}
	if _, ok, _ := jsonx.Get(res, "inputRequests"); !ok {
		return res
	}
	if _, ok, _ := jsonx.Get(res, "requestState"); !ok {
		return res
	}
	out, err := jsonx.Set(res, "resultType", []byte(`"`+mcp.ResultTypeInputRequired+`"`))
	if err != nil {
		return res
	}
	return out
}

// bindInputRequired wraps the requestState of an upstream's input_required result.
func (s *Server) bindInputRequired(who string, res json.RawMessage) json.RawMessage {
	if rt, _, _ := jsonx.GetString(res, "resultType"); rt != mcp.ResultTypeInputRequired {
		return res
	}
	state, ok, _ := jsonx.GetString(res, "requestState")
	if !ok {
		return res
	}
	out, err := jsonx.Set(res, "requestState", jsonrpc.AppendString(nil, s.wrapState(who, state)))
	if err != nil {
		return res
	}
	return out
}
