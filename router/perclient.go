package router

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// PerClient makes an upstream per-client: besides the instance the router lists the
// catalogue from, every client session that calls it gets an instance of its own,
// initialized with that client's capabilities, so that the upstream's session state and
// its server-to-client requests belong to one client. Instances start on a client's
// first call, are capped, and are closed when idle or when their client goes away.
type PerClient struct {
	// New creates one more instance with the given client capabilities (already
	// narrowed to what the proxy relays); it reports to events.
	New         func(caps json.RawMessage, events upstream.Events) Upstream
	MaxSessions int           // instances at once; default 64
	IdleTimeout time.Duration // an instance without calls for this long is closed; default 10m
	// Eras, for capability sessions, keys them by the client's era as well: an upstream
	// whose era follows its client's (a child process offered initialize first for a
	// legacy client, server/discover first for a modern one; see
	// upstream.Upstream.SetPreferLegacy) gets a session per era in use, so that a legacy
	// client's calls reach a legacy session that can ask it for input in the middle of a
	// call, and modern clients share one modern session (stateless: their capabilities
	// travel with each request).
	Eras bool

	// ByPrincipal keys the sessions by the principal a request is made for instead of
	// by client session: one session per principal, shared by that principal's client
	// sessions, started with NewFor (perprincipal.go).
	ByPrincipal bool
	// NewFor, with ByPrincipal, creates the session of principal p (New is not used).
	NewFor func(p *principal.Principal, caps json.RawMessage, events upstream.Events) Upstream
	// Admit, with ByPrincipal, is asked before each request is routed to the upstream:
	// whether the principal may be served now (it has a usable credential), and with
	// which params. Its error is the request's answer (a *ResultError as a result); it
	// never sends the request elsewhere. The Admission's Mode is noted for the audit
	// with an error too. A request for nobody (no principal) is refused before it is
	// asked. Nil admits everything.
	Admit func(ctx context.Context, req *Request, params json.RawMessage) (Admission, error)
}

// AddPerClient is Add for a per-client upstream: u is the catalogue instance.
func (r *Router) AddPerClient(u Upstream, namespace string, pc PerClient) {
	b := &backend{name: u.Name(), namespace: namespace, up: u}
	b.pool = newPool(r, b, pc, false)
	r.add(b)
}

// newPool makes b's pool of per-client sessions (byCaps false) or capability sessions,
// with pc's defaults filled in.
func newPool(r *Router, b *backend, pc PerClient, byCaps bool) *clientPool {
	if pc.MaxSessions <= 0 {
		pc.MaxSessions = 64
		if byCaps {
			pc.MaxSessions = 16
		}
	}
	if pc.IdleTimeout <= 0 {
		pc.IdleTimeout = 10 * time.Minute
	}
	return &clientPool{r: r, parent: b, pc: pc, byClient: map[poolKey]*instance{}, byCaps: byCaps, stop: make(chan struct{})}
}

// clientPool holds the per-client instances of one upstream.
type clientPool struct {
	r      *Router
	parent *backend
	pc     PerClient

	mu       sync.Mutex
	byClient map[poolKey]*instance
	byCaps   bool // keyed by client capabilities, not by client session
	closed   bool
	stop     chan struct{}
	wg       sync.WaitGroup

	// With PerClient.Eras: the session that came up in the modern era and serves every
	// modern client, and whether the upstream turned out to speak only that era (a
	// session offered initialize first came up modern): legacy clients then share the
	// catalogue session, whose era is the same.
	modern     atomic.Pointer[instance]
	modernOnly atomic.Bool
}

// poolKey names an instance: a client session's own (per-client upstreams), or the one
// for a set of client capabilities (capability sessions).
type poolKey struct {
	session   Client // nil for a capability session
	caps      string // CapabilitiesKey, for a capability session
	era       string // with PerClient.Eras: "legacy" or "modern", the era the session is started for
	principal string // with PerClient.ByPrincipal: the principal's identity (principal.ID)
}

// instance is one client's own session with the upstream. Its backend carries the
// requests in flight there, so that the upstream's server-to-client requests go to the
// request that triggered them.
type instance struct {
	backend
	key      poolKey      // whose instance it is
	shared   bool         // serves every client with these capabilities: its notifications go to all
	calls    atomic.Int32 // requests in flight
	lastUsed atomic.Int64 // unix nanoseconds
	// principal, for a principal's session, are the client sessions of that principal
	// that called through it; nil otherwise.
	principal *principalClients
}

// instanceFor returns the client's instance, starting one if it has none; an error
// when the cap is reached and no idle instance can make room.
func (p *clientPool) instanceFor(req *Request) (*instance, error) {
	var caps json.RawMessage
	if req.Meta != nil {
		caps = req.Meta.Capabilities
	}
	return p.instanceForKey(poolKey{session: req.Session}, caps)
}

// instanceForKey is instanceFor for any key: a client session, or (for capability
// sessions) a set of client capabilities.
func (p *clientPool) instanceForKey(key poolKey, caps json.RawMessage) (*instance, error) {
	return p.instanceForKeyWho(key, caps, nil)
}

// instanceForKeyWho is instanceForKey; who is the principal of a per-principal session.
func (p *clientPool) instanceForKeyWho(key poolKey, caps json.RawMessage, who *principal.Principal) (*instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if inst := p.byClient[key]; inst != nil {
		return inst, nil
	}
	if p.closed {
		return nil, mcp.ProxyError(mcp.CodeUpstreamUnavailable, p.parent.name, fmt.Sprintf("upstream %q is shutting down", p.parent.name))
	}
	if len(p.byClient) >= p.pc.MaxSessions && !p.evictIdleLocked() {
		p.r.log.Warn().Str("upstream", p.parent.name).Int("max_sessions", p.pc.MaxSessions).
			Msg("upstream at its session cap with every session busy; call refused")
		return nil, mcp.ProxyError(mcp.CodeUpstreamUnavailable, p.parent.name,
			fmt.Sprintf("upstream %q already serves its maximum of %d sessions; try again later", p.parent.name, p.pc.MaxSessions))
	}
	inst := &instance{key: key, shared: p.byCaps}
	inst.backend = backend{name: p.parent.name, namespace: p.parent.namespace, session: p.r.tasks.newSessionKey()}
	if p.pc.ByPrincipal {
		inst.principal = &principalClients{}
		inst.up = p.pc.NewFor(who, caps, &instanceEvents{p: p, inst: inst})
	} else {
		inst.up = p.pc.New(caps, &instanceEvents{p: p, inst: inst})
	}
	if cs, ok := inst.up.(clientShaped); ok && key.era != "" {
		cs.SetPreferLegacy(key.era == eraLegacy)
	}
	inst.lastUsed.Store(time.Now().UnixNano())
	p.byClient[key] = inst
	ctx := p.r.ctx
	if ctx == nil { // not started: nothing can call before Start, but stay safe
		ctx = context.Background()
	}
	inst.up.Start(ctx)
	what := "per-client upstream session started"
	switch {
	case p.byCaps:
		what = "upstream session started for another set of client capabilities"
	case p.pc.ByPrincipal:
		what = "per-principal upstream session started"
	}
	ev := p.r.log.Info().Str("upstream", p.parent.name).Int("sessions", len(p.byClient))
	if key.principal != "" {
		ev = ev.Str("principal", key.principal)
	}
	ev.Msg(what)
	return inst, nil
}

// bySession finds the live instance whose task-store key is key; nil when there is none
// (or no pool).
func (p *clientPool) bySession(key string) *instance {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, inst := range p.byClient {
		if inst.session == key {
			return inst
		}
	}
	return nil
}

// evictIdleLocked closes the least recently used instance without calls in flight;
// false when every instance is busy. p.mu is held.
func (p *clientPool) evictIdleLocked() bool {
	var victim *instance
	for _, inst := range p.byClient {
		if inst.calls.Load() == 0 && (victim == nil || inst.lastUsed.Load() < victim.lastUsed.Load()) {
			victim = inst
		}
	}
	if victim == nil {
		return false
	}
	delete(p.byClient, victim.key)
	p.closeAsync(victim, "evicted to make room for another client")
	return true
}

func (p *clientPool) closeAsync(inst *instance, why string) {
	p.modern.CompareAndSwap(inst, nil)
	p.r.log.Info().Str("upstream", p.parent.name).Str("reason", why).Msg("per-client upstream session closed")
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = inst.up.Close()
	}()
}

// release closes the client's instance (its session ended).
func (p *clientPool) release(client Client) {
	if p.pc.ByPrincipal { // the principal's session outlives its client sessions
		p.mu.Lock()
		for _, inst := range p.byClient {
			inst.dropClient(client)
		}
		p.mu.Unlock()
		return
	}
	key := poolKey{session: client}
	p.mu.Lock()
	inst := p.byClient[key]
	delete(p.byClient, key)
	p.mu.Unlock()
	if inst != nil {
		p.closeAsync(inst, "client session ended")
	}
}

// sweep closes instances idle for longer than the idle timeout, until Close.
func (p *clientPool) sweep() {
	defer p.wg.Done()
	t := time.NewTicker(max(p.pc.IdleTimeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.mu.Lock()
			for c, inst := range p.byClient {
				if inst.calls.Load() == 0 && now.Sub(time.Unix(0, inst.lastUsed.Load())) > p.pc.IdleTimeout {
					delete(p.byClient, c)
					p.closeAsync(inst, "idle")
				}
			}
			p.mu.Unlock()
		}
	}
}

// close stops the sweeper and every instance, and waits for them.
func (p *clientPool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	all := p.byClient
	p.byClient = map[poolKey]*instance{}
	for _, inst := range all {
		p.closeAsync(inst, "proxy stopping")
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// sessions is the number of live instances.
func (p *clientPool) sessions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byClient)
}

// Release tells the router a client session has ended: per-client upstream sessions it
// held are closed.
func (r *Router) Release(client Client) {
	for _, b := range r.all() {
		if b.pool != nil {
			b.pool.release(client)
		}
	}
}

// route picks where a request for b goes: b itself, or for a per-client upstream the
// calling client session's instance (inst is then that instance). Requests without a
// session (stateless modern clients, the CLI) use the catalogue instance.
func (r *Router) route(b *backend, req *Request) (target *backend, inst *instance, err error) {
	if b.pool != nil && b.pool.pc.ByPrincipal {
		return r.routePrincipal(b, req, req.Method != mcp.MethodLoggingSetLevel)
	}
	if b.capsPool != nil && req.Meta != nil && b.capsPool.pc.Eras {
		return r.routeByEra(b, req)
	}
	if b.capsPool != nil && req.Meta != nil && !b.up.Info().Modern {
		if key := req.Meta.CapsKey(CapabilitiesKey); key != r.firstCapsKey() {
			inst, err := b.capsPool.instanceForKey(poolKey{caps: key}, req.Meta.Capabilities)
			if err != nil {
				return nil, nil, err
			}
			return &inst.backend, inst, nil
		}
	}
	if b.pool == nil || req.Session == nil {
		return b, nil, nil
	}
	inst, err = b.pool.instanceFor(req)
	if err != nil {
		return nil, nil, err
	}
	return &inst.backend, inst, nil
}

// Eras of capability sessions (poolKey.era).
const (
	eraLegacy = "legacy"
	eraModern = "modern"
)

// routeByEra picks the session of an upstream with capability sessions per era (see
// PerClient.Eras) for a client of the given era and capabilities:
//
//   - a modern client: the catalogue session if it is modern, else the pool's modern
//     session, else a session started for the modern era with its capabilities (if the
//     upstream speaks only the legacy era it comes up legacy, and its capabilities
//     matter: hence the key);
//   - a legacy client: the catalogue session if it is legacy with the same
//     capabilities (or the upstream speaks only the modern era), else a legacy session
//     for its set of capabilities.
func (r *Router) routeByEra(b *backend, req *Request) (*backend, *instance, error) {
	p := b.capsPool
	caps := req.Meta.Capabilities
	ck := req.Meta.CapsKey(CapabilitiesKey)
	catModern := b.up.Info().Modern
	key := poolKey{caps: ck, era: eraLegacy}
	if req.Modern {
		if catModern {
			return b, nil, nil
		}
		if inst := p.modern.Load(); inst != nil {
			return &inst.backend, inst, nil
		}
		key.era = eraModern
	} else if p.modernOnly.Load() || (!catModern && ck == r.firstCapsKey()) {
		return b, nil, nil
	}
	inst, err := p.instanceForKey(key, caps)
	if err != nil {
		return nil, nil, err
	}
	if st, _ := inst.up.State(); st == upstream.StateReady && inst.up.Info().Modern {
		if key.era == eraModern {
			p.modern.CompareAndSwap(nil, inst)
		} else {
			p.modernOnly.Store(true) // offered initialize first, it answered in the modern era
		}
	}
	return &inst.backend, inst, nil
}

// instanceEvents receives what one client's instance cannot handle itself: its
// notifications and server-to-client requests concern that client only, and its
// catalogue is the catalogue instance's.
type instanceEvents struct {
	p    *clientPool
	inst *instance
}

// Changed: the catalogue is the catalogue instance's; a session that became ready takes
// the clients' log level. A capability session (which serves every client of its era and
// capabilities) that announces a list change has its announcement passed on: clients list
// again (and get the catalogue session's list; a server whose lists differ by session is
// listed as the catalogue session sees it).
func (e *instanceEvents) Changed(u *upstream.Upstream, kinds upstream.Kinds) {
	if st, _ := u.State(); st == upstream.StateReady && kinds == upstream.AllKinds {
		e.p.r.reapplyLogLevel(u)
	}
	if kinds != upstream.AllKinds && e.inst.shared {
		e.p.r.rebuildAnnounced(kinds)
	}
}

func (e *instanceEvents) Notification(u *upstream.Upstream, m *jsonrpc.Message) {
	r := e.p.r
	if m.Method == mcp.NotificationTasksStatus {
		r.recordTask(context.Background(), &e.inst.backend, m.Params, "")
	}
	switch m.Method {
	case mcp.NotificationToolsListChanged, mcp.NotificationPromptsListChanged, mcp.NotificationResourcesListChanged:
		return // the catalogue instance reports catalogue changes
	}
	if e.inst.shared {
		r.broadcast(m.Method, r.adaptNotification(e.p.parent, u.Name(), m))
		return
	}
	if e.inst.principal != nil {
		e.notifyPrincipal(u, m)
		return
	}
	if c := e.inst.key.session; c != nil {
		c.Notify(m.Method, r.adaptNotification(e.p.parent, u.Name(), m))
	}
}

func (e *instanceEvents) Request(ctx context.Context, u *upstream.Upstream, m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
	if input, _ := e.inst.inputFor(); input != nil {
		return input(ctx, m.Method, m.Params) // on the stream of the request that caused it
	}
	if c := e.inst.key.session; c != nil {
		return c.Request(ctx, m.Method, m.Params)
	}
	if e.inst.shared {
		return (*events)(e.p.r).Request(ctx, u, m) // no call in flight: the one client, if there is one
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcp-proxy has no client to relay %s to", m.Method)
}

func (e *instanceEvents) Hold() (release func()) { return e.p.r.holdClients() }

// A legacy upstream session is initialized with one set of client capabilities, and a
// server decides what to ask the client from them. A shared legacy HTTP upstream serving
// clients with different capabilities therefore gets one session per distinct set (the
// first client's is the catalogue session), so that it never asks a client for what
// that client did not declare.

// SetCapabilitySessions gives the named shared upstream one session per distinct set of
// client capabilities while it speaks the legacy era. Call it after Add, before Start.
func (r *Router) SetCapabilitySessions(name string, pc PerClient) {
	for _, b := range r.all() {
		if b.name == name && b.pool == nil {
			b.capsPool = newPool(r, b, pc, true)
		}
	}
}

// startCaps are the client capabilities the upstreams were started with, and their key
// (computed once: routing compares it with every call's).
type startCaps struct {
	caps json.RawMessage
	key  string
}

// noCapsKey is the key of no capabilities.
var noCapsKey = CapabilitiesKey(nil)

// firstCapsKey is the key of the capabilities the upstreams were started with.
func (r *Router) firstCapsKey() string {
	if p := r.clientCaps.Load(); p != nil {
		return p.key
	}
	return noCapsKey
}

// CapabilitiesKey names a set of client capabilities by what the proxy relays (roots,
// roots.listChanged, sampling, elicitation form and url), ignoring formatting.
func CapabilitiesKey(caps json.RawMessage) string {
	var c struct {
		Roots *struct {
			ListChanged bool `json:"listChanged"`
		} `json:"roots"`
		Sampling    *struct{} `json:"sampling"`
		Elicitation *struct {
			Form *struct{} `json:"form"`
			URL  *struct{} `json:"url"`
		} `json:"elicitation"`
	}
	_ = json.Unmarshal(caps, &c)
	k := []byte("-----")
	if c.Roots != nil {
		k[0] = 'r'
		if c.Roots.ListChanged {
			k[1] = 'l'
		}
	}
	if c.Sampling != nil {
		k[2] = 's'
	}
	if c.Elicitation != nil {
		// An empty elicitation object means form (2025-06-18).
		if c.Elicitation.Form != nil || c.Elicitation.URL == nil {
			k[3] = 'f'
		}
		if c.Elicitation.URL != nil {
			k[4] = 'u'
		}
	}
	return string(k)
}
