package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// A per-principal upstream (PerClient.ByPrincipal) has, besides the catalogue instance,
// one session per principal (by its identity, principal.ID: an API key named "alice"
// and a token whose subject is "alice" are two principals), shared by that principal's client sessions, capped and
// closed when idle like per-client sessions. No session, process or connection ever
// carries two principals: a request is routed by the principal it is made for, and a
// session's notifications go only to the client sessions of its principal that called
// through it.
//
// The router knows nothing of credentials: what decides whether a principal may be
// served at all (whether it has a usable credential for the upstream) is the pool's
// Admit, asked before each request is routed, which the wiring gives it.

// Admission is what PerClient.Admit lets through: the params to send (nil: unchanged)
// and, for the audit, how the call is authorized upstream.
type Admission struct {
	Params  json.RawMessage
	Mode    string // the credential mode that serves the call ("exchange", "oauth", ...)
	Subject string // whom the upstream sees, when known ("" otherwise); never a token
}

// ResultError is an error Admit (or a middleware) answers a request with as a result:
// the client gets Result (a tool result with isError set, an input_required result),
// not a JSON-RPC error. Err says why, for the log and the audit.
type ResultError struct {
	Result json.RawMessage
	Err    error
}

func (e *ResultError) Error() string { return e.Err.Error() }
func (e *ResultError) Unwrap() error { return e.Err }

// CredentialNote receives how a call was authorized upstream (Admission's Mode and
// Subject): the audit stage puts one in a call's context (WithCredentialNote) and reads
// it when the call is answered. Only calls to per-principal upstreams with an Admit
// fill it in.
type CredentialNote struct {
	Mode, Subject string
}

type noteKey struct{}

// WithCredentialNote returns ctx carrying n, which the router fills in when it admits
// the call.
func WithCredentialNote(ctx context.Context, n *CredentialNote) context.Context {
	return context.WithValue(ctx, noteKey{}, n)
}

// admit asks b's pool whether req may be routed, and returns the params to send; an
// error is the request's answer (see answerAdmission).
func (r *Router) admit(ctx context.Context, b *backend, req *Request, params json.RawMessage) (json.RawMessage, error) {
	if b.pool == nil || b.pool.pc.Admit == nil {
		return params, nil
	}
	if req.Principal == nil {
		return nil, mcp.ProxyError(mcp.CodeCredentialUnavailable, b.name,
			fmt.Sprintf("upstream %q acts as the calling principal, and this request is made for nobody", b.name))
	}
	a, err := b.pool.pc.Admit(ctx, req, params)
	if n, _ := ctx.Value(noteKey{}).(*CredentialNote); n != nil {
		n.Mode, n.Subject = a.Mode, a.Subject
	}
	if err != nil {
		return nil, err
	}
	if a.Params != nil {
		params = a.Params
	}
	return params, nil
}

// answerAdmission replies to a request Admit refused: a ResultError as its result, any
// other error as it is.
func answerAdmission(err error, reply Reply) {
	var re *ResultError
	if errors.As(err, &re) {
		reply(re.Result, nil)
		return
	}
	reply(nil, err)
}

// routePrincipal picks the principal's own session of a per-principal upstream, starting
// it on the principal's first call. While the upstream speaks the legacy era, a
// principal has a session per class of client capabilities (CapabilitiesKey), as
// capability sessions do: a second client of the principal's that declares sampling or
// elicitation gets a session initialized with them, which can ask it. A request for nobody (no principal: the CLI) goes to
// the catalogue instance when the upstream has no admission check (shared credentials),
// and is refused otherwise. With create false (logging/setLevel), only a session that
// exists is used.
func (r *Router) routePrincipal(b *backend, req *Request, create bool) (*backend, *instance, error) {
	p := req.Principal
	if p == nil {
		if b.pool.pc.Admit != nil {
			return nil, nil, mcp.ProxyError(mcp.CodeCredentialUnavailable, b.name,
				fmt.Sprintf("upstream %q acts as the calling principal, and this request is made for nobody", b.name))
		}
		return b, nil, nil
	}
	pool := b.pool
	key := poolKey{principal: p.ID()}
	var caps json.RawMessage
	if req.Meta != nil {
		caps = req.Meta.Capabilities
		if !b.up.Info().Modern {
			// A legacy session is initialized with one client's capabilities, and the
			// server asks only what they declare: a principal's clients of another
			// class (sampling, elicitation, roots) get a session of their own.
			key.caps = req.Meta.CapsKey(CapabilitiesKey)
		}
	}
	var inst *instance
	if create {
		var err error
		if inst, err = pool.instanceForPrincipal(key, caps, p); err != nil {
			return nil, nil, err
		}
	} else {
		pool.mu.Lock()
		inst = pool.byClient[key]
		pool.mu.Unlock()
		if inst == nil {
			return b, nil, nil
		}
	}
	if req.Session != nil {
		inst.addClient(req.Session)
	}
	return &inst.backend, inst, nil
}

// instanceForPrincipal is instanceForKey for a principal's session.
func (p *clientPool) instanceForPrincipal(key poolKey, caps json.RawMessage, who *principal.Principal) (*instance, error) {
	p.mu.Lock()
	inst := p.byClient[key]
	p.mu.Unlock()
	if inst != nil {
		return inst, nil
	}
	return p.instanceForKeyWho(key, caps, who)
}

// principalClients are the client sessions of one principal that called through its
// session: its notifications go to them, and to nobody else.
type principalClients struct {
	mu      sync.Mutex // guards clients
	clients map[Client]struct{}
}

// addClient remembers that c called through inst.
func (inst *instance) addClient(c Client) {
	pc := inst.principal
	if pc == nil {
		return
	}
	pc.mu.Lock()
	if _, ok := pc.clients[c]; !ok {
		if pc.clients == nil {
			pc.clients = map[Client]struct{}{}
		}
		pc.clients[c] = struct{}{}
	}
	pc.mu.Unlock()
}

// dropClient forgets c (its session ended).
func (inst *instance) dropClient(c Client) {
	if pc := inst.principal; pc != nil {
		pc.mu.Lock()
		delete(pc.clients, c)
		pc.mu.Unlock()
	}
}

// hasClient reports whether c called through inst.
func (inst *instance) hasClient(c Client) bool {
	pc := inst.principal
	if pc == nil {
		return false
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	_, ok := pc.clients[c]
	return ok
}

// principalClientList is the client sessions of inst's principal.
func (inst *instance) principalClientList() []Client {
	pc := inst.principal
	if pc == nil {
		return nil
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	out := make([]Client, 0, len(pc.clients))
	for c := range pc.clients {
		out = append(out, c)
	}
	return out
}

// notifyPrincipal sends a notification of a principal's session to that principal's
// client sessions.
func (e *instanceEvents) notifyPrincipal(u *upstream.Upstream, m *jsonrpc.Message) {
	params := e.p.r.adaptNotification(e.p.parent, u.Name(), m)
	for _, c := range e.inst.principalClientList() {
		c.Notify(m.Method, params)
	}
}

// perPrincipal reports whether the named upstream has a session per principal.
func (r *Router) perPrincipal(name string) bool {
	for _, b := range r.all() {
		if b.name == name {
			return b.pool != nil && b.pool.pc.ByPrincipal
		}
	}
	return false
}

// PrincipalSessions counts, per upstream with per-principal sessions, the sessions open
// now (a principal has one per class of client capabilities with a legacy upstream).
func (r *Router) PrincipalSessions() map[string]int {
	out := map[string]int{}
	for _, b := range r.all() {
		if b.pool != nil && b.pool.pc.ByPrincipal {
			out[b.name] = b.pool.sessions()
		}
	}
	return out
}

// ClosePrincipal closes the sessions of the principal whose identity (principal.ID) is
// id with the named upstream ("" for every upstream), for a credential revoked: its
// next call starts afresh, and is admitted again. It returns how many it closed.
func (r *Router) ClosePrincipal(upstreamName, id string) int {
	n := 0
	for _, b := range r.all() {
		if b.pool == nil || !b.pool.pc.ByPrincipal || (upstreamName != "" && b.name != upstreamName) {
			continue
		}
		b.pool.mu.Lock()
		for key, inst := range b.pool.byClient { // one per class of client capabilities
			if key.principal == id {
				delete(b.pool.byClient, key)
				b.pool.closeAsync(inst, "the principal's credential was revoked")
				n++
			}
		}
		b.pool.mu.Unlock()
	}
	return n
}
