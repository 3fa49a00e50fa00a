package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// SessionShare lets another replica adopt a legacy Streamable HTTP session when the
// replica that held it is gone (the cluster package implements it; docs/cluster.md says
// how). What a session is, fixed at initialize (a sessionDesc), is sealed into its id;
// what changes later (the log level, the subscriptions) is recorded when it changes, never
// on a call's path.
type SessionShare interface {
	// NewID returns the id of a new session, desc sealed into it; "" when it cannot be
	// (the handler then mints a plain id: that session cannot be adopted).
	NewID(desc []byte) string
	// Opened records a session just opened, or just adopted, as held by this replica
	// (bounded by ctx and its own timeout).
	Opened(ctx context.Context, id string)
	// Changed records a session's state after a change: the whole state (log level,
	// subscriptions, activated tools), the last call wins. It may block on the network:
	// the handler calls it from a goroutine.
	Changed(id, level string, subscriptions, active []string)
	// Ended removes what is recorded of a session DELETE or idle expiry ended.
	Ended(ctx context.Context, id string)
	// Adopt returns what is sealed into id and the state recorded, when this replica has
	// claimed the session (HTTPOptions.Forward declined it for that reason); an error
	// when it may not adopt it (then the handler answers as for an unknown session). The
	// handler calls Opened once it has rebuilt the session.
	Adopt(ctx context.Context, id string) (desc []byte, level string, subscriptions, active []string, err error)
}

// sessionDesc is what a legacy session is, as initialize fixed it: what a replica needs
// to rebuild it. It is sealed into the session id, so it holds no secret and is kept
// short: the negotiated version, the client's capabilities (as the upstreams are told
// them) and its name and version, and who opened it.
type sessionDesc struct {
	Version string          `json:"v"`
	Caps    json.RawMessage `json:"c,omitempty"`
	Info    json.RawMessage `json:"i,omitempty"`
	Name    string          `json:"p,omitempty"` // the principal's
	Via     string          `json:"w,omitempty"`
	// Issuer is a hash of a JWT principal's issuer (issuerTag): the session id stays
	// short, and the issuer is part of who opened it.
	Issuer string `json:"s,omitempty"`
	// Endpoint is the endpoint the session was opened on ("": the listen path).
	Endpoint string `json:"e,omitempty"`
}

// issuerTag is what a session description keeps of a principal's issuer: a hash
// prefix, enough to tell the issuers of one configuration apart ("" for none).
func issuerTag(issuer string) string {
	if issuer == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(issuer))
	return base64.RawURLEncoding.EncodeToString(sum[:8])
}

// describe returns the sealed description of the session initialize msg opens for
// principal p on endpoint; nil when msg's params are not an initialize's (initialize
// then fails).
func describe(msg *jsonrpc.Message, p *principal.Principal, endpoint string) []byte {
	var ip initializeParams
	if err := json.Unmarshal(msg.Params, &ip); err != nil || ip.ProtocolVersion == "" {
		return nil
	}
	info, _ := jsonx.Marshal(ip.ClientInfo)
	d := sessionDesc{Version: mcp.NegotiateLegacy(ip.ProtocolVersion), Caps: mcp.NarrowClientCapabilities(ip.Capabilities), Info: info,
		Endpoint: endpoint}
	if p != nil {
		d.Name, d.Via, d.Issuer = p.Name, p.Via, issuerTag(p.Issuer)
	}
	b, _ := jsonx.Marshal(d)
	return b
}

// sessionState is what changes in a session after initialize and survives its replica:
// the log level the client set, the resources it subscribed to and the tools its
// searches activated.
type sessionState struct {
	level  string
	subs   []string // URIs, as the client named them, in the order subscribed
	active []string // exposed tool names, most recently found first
}

// noteChange records, for an adoptable session, the state a successful request of
// method with params changed (logging/setLevel, resources/subscribe or unsubscribe), and
// hands the new state to the share from a goroutine: this runs on an upstream's reader.
func (hs *httpSession) noteChange(method string, params json.RawMessage) {
	hs.stateMu.Lock()
	switch method {
	case mcp.MethodLoggingSetLevel:
		hs.state.level, _, _ = jsonx.GetString(params, "level")
	case mcp.MethodResourcesSubscribe:
		if uri, ok, _ := jsonx.GetString(params, "uri"); ok && !slices.Contains(hs.state.subs, uri) {
			hs.state.subs = append(hs.state.subs, uri)
		}
	case mcp.MethodResourcesUnsubscribe:
		if uri, ok, _ := jsonx.GetString(params, "uri"); ok {
			hs.state.subs = slices.DeleteFunc(slices.Clone(hs.state.subs), func(s string) bool { return s == uri })
		}
	}
	hs.stateMu.Unlock()
	hs.save()
}

// noteActive records, for an adoptable session, the tools its searches activated now.
func (hs *httpSession) noteActive(names []string) {
	hs.stateMu.Lock()
	hs.state.active = names
	hs.stateMu.Unlock()
	hs.save()
}

// save hands the session's state to the share from a goroutine: the change happened
// on an upstream's reader or a request's goroutine, which must not wait for Redis.
func (hs *httpSession) save() {
	go func() {
		hs.saveMu.Lock() // one write at a time, each of the latest state: the last one wins
		defer hs.saveMu.Unlock()
		hs.stateMu.Lock()
		st, gone := sessionState{level: hs.state.level, subs: slices.Clone(hs.state.subs), active: hs.state.active}, hs.gone
		hs.stateMu.Unlock()
		if !gone { // never after the removal: that would bring the session back
			hs.share.Changed(hs.id, st.level, st.subs, st.active)
		}
	}()
}

// stateChanging reports whether a request of method changes what sessionState keeps.
func stateChanging(method string) bool {
	return method == mcp.MethodLoggingSetLevel || method == mcp.MethodResourcesSubscribe || method == mcp.MethodResourcesUnsubscribe
}

// adopt takes over session sid, whose replica is gone and which this one has claimed
// (HTTPOptions.Forward declined it): it rebuilds the session from the description
// sealed into its id and the state the share recorded, under the same id, for request
// r's principal, which must be the one that opened it. It answers nothing: the request
// then goes on as for a session the handler holds, or is answered 404.
func (h *HTTPHandler) adopt(r *http.Request, sid, endpoint string) {
	h.adoptMu.Lock() // adoptions are rare: one at a time
	defer h.adoptMu.Unlock()
	if h.holds(sid) {
		return // adopted meanwhile, for another request
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.Context(), h.s.cur().ReadyTimeout+5*time.Second)
	defer cancel()
	raw, level, subs, active, err := h.opts.Share.Adopt(ctx, sid)
	if err != nil {
		h.s.log.Debug().Err(err).Msg("a session whose replica is gone cannot be adopted")
		return
	}
	var d sessionDesc
	if err := json.Unmarshal(raw, &d); err != nil || d.Version == "" {
		h.s.log.Warn().Err(err).Msg("a sealed session description cannot be read; not adopted")
		return
	}
	if d.Endpoint != endpoint {
		h.s.log.Warn().Str("endpoint", endpoint).Str("session_endpoint", d.Endpoint).
			Msg("a request on another endpoint for a session whose replica is gone; not adopted")
		return
	}
	p := principal.From(r.Context())
	if (p == nil) != (d.Name == "" && d.Via == "") || (p != nil && (p.Name != d.Name || p.Via != d.Via || issuerTag(p.Issuer) != d.Issuer)) {
		h.s.log.Warn().Str("principal", principalName(r.Context())).
			Msg("a request of another principal for a session whose replica is gone; not adopted")
		return
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	hs := h.newHTTPSessionStreams(sid, "a"+hex.EncodeToString(b[:])+".", endpoint) // never one of the gone replica's stream ids
	if hs == nil {
		h.s.log.Warn().Msg("cannot adopt a session whose replica is gone: too many sessions, or draining")
		return
	}
	hs.principal, hs.version = p, d.Version
	hs.state = sessionState{level: level, subs: subs, active: active}
	hs.ss.restore(principal.With(hs.ctx, p), d, hs.state)
	h.opts.Share.Opened(r.Context(), sid)
	h.mu.Lock()
	served := h.serves(endpoint) // see initialize
	if served {
		h.sessions[sid] = hs
	}
	h.mu.Unlock()
	if !served {
		hs.close()
		hs.ended()
		return
	}
	hs.log.Info().Str("client", string(d.Info)).Str("protocol_version", d.Version).Str("log_level", level).
		Int("subscriptions", len(subs)).Int("activated_tools", len(active)).Dur("took", time.Since(start)).Msg("adopted a session whose proxy replica is gone")
}

// restore makes the session an initialized one as d describes it, as initialize would
// have (the upstreams are told the same capabilities, so that its calls reach the
// shared upstream sessions for them; a per-client upstream starts anew), then re-applies
// st: the log level, and the subscriptions upstream.
func (ss *session) restore(ctx context.Context, d sessionDesc, st sessionState) {
	var caps mcp.ClientCapabilities
	if len(d.Caps) > 0 {
		_ = json.Unmarshal(d.Caps, &caps) // sealed by a replica: it parsed at initialize
	}
	ss.mu.Lock()
	ss.clientCaps = caps
	ss.meta = &router.ClientMeta{Capabilities: d.Caps, Info: d.Info}
	ss.mu.Unlock()
	ss.s.startUpstreams(d.Caps, true)
	rctx, cancel := context.WithTimeout(ctx, ss.s.cur().ReadyTimeout)
	if err := ss.s.r.WaitReady(rctx); err != nil {
		ss.log.Warn().Err(err).Msg("adopting a session while some upstreams are not ready")
	}
	cancel()
	var client struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(d.Info, &client)
	if len(st.active) > 0 {
		ss.active.Restore(st.active)
	}
	ss.markOpened(ctx, d.Version, client.Name)

	call := func(method string, params any) {
		b, _ := jsonx.Marshal(params)
		req := &router.Request{Method: method, Params: b, Client: ss.clientID, Session: ss, Meta: ss.meta,
			Principal: principal.From(ctx), ID: jsonrpc.StringID("adopt"), Endpoint: ss.endpoint}
		if _, err := ss.s.r.Call(ctx, req); err != nil {
			ss.log.Warn().Err(err).Str("method", method).Msg("re-applying an adopted session's state failed")
		}
	}
	if st.level != "" {
		call(mcp.MethodLoggingSetLevel, map[string]string{"level": st.level})
	}
	for _, uri := range st.subs {
		call(mcp.MethodResourcesSubscribe, map[string]string{"uri": uri})
	}
}

// streamIDFor is the id of a new POST answer stream of the session, numbered n, for
// request id (invalid: a batch's stream). In an adoptable session it carries the
// request's id, so that a replica that adopts the session can answer a client resuming
// that stream (its events were on the gone replica) with the proxy's error for the call.
func (hs *httpSession) streamIDFor(n uint64, id jsonrpc.ID) string {
	s := hs.streamPrefix + "p" + strconv.FormatUint(n, 10)
	if hs.share != nil && id.IsValid() {
		if b, err := id.MarshalJSON(); err == nil && len(b) <= 96 {
			s += "." + base64.RawURLEncoding.EncodeToString(b)
		}
	}
	return s
}

// lostCall returns the id of the call whose answer stream sid was, when sid is a POST
// stream of this session's that this replica never had (the session was adopted, and
// the stream was on the gone replica).
func (hs *httpSession) lostCall(stream string) (jsonrpc.ID, bool) {
	if hs.share == nil || hs.streamPrefix == "" || strings.HasPrefix(stream, hs.streamPrefix) {
		return jsonrpc.ID{}, false
	}
	i := strings.LastIndexByte(stream, '.')
	if i < 0 {
		return jsonrpc.ID{}, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(stream[i+1:])
	if err != nil {
		return jsonrpc.ID{}, false
	}
	var id jsonrpc.ID
	if err := id.UnmarshalJSON(b); err != nil || !id.IsValid() {
		return jsonrpc.ID{}, false
	}
	return id, true
}

// lostCallMessage is the error a call gets when its answer stream was on a replica that
// stopped (the same words as the cluster's forwarder uses).
const lostCallMessage = "mcp-proxy: the proxy replica that held this session stopped while the call was in flight"

// answerLost answers a client that resumes the answer stream of call id, which was on a
// replica that stopped: one event with the proxy's error for the call, then the end of
// the stream.
func answerLost(w http.ResponseWriter, id jsonrpc.ID) {
	out := openEventStream(w)
	e := mcp.ProxyError(jsonrpc.CodeInternalError, "", lostCallMessage)
	if b, err := jsonrpc.NewErrorResponse(id, e).Encode(); err == nil {
		out.event("", "message", b)
	}
	out.close()
}
