// Package router is the heart of mcp-proxy: it merges the catalogues of all upstreams into
// one (namespaced, deterministic, paginated), keeps the routing tables from exposed names
// and URIs back to their owners, dispatches each client request to the right upstream with
// the original name restored, passing every routed request through one middleware chain
// (Use: the policy's stages, later plugins), and relays upstream notifications to clients.
//
// It never parses HTTP or spawns processes, and it never splits a name to find its owner:
// every route is a table lookup.
package router

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/clock"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/search"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Upstream is what the router needs of every upstream server: its identity, state and
// catalogue, sending it requests and notifications, and its lifecycle. What only some
// upstreams can do is asked for through the optional interfaces below.
type Upstream interface {
	Name() string
	State() (upstream.State, error)
	Info() upstream.Info
	Catalogue() *upstream.Catalogue
	// Send sends one request; done is called once with the answer or the failure.
	Send(ctx context.Context, req *upstream.Request, done func(*jsonrpc.Message, error))
	Notify(method string, params json.RawMessage) error
	Start(ctx context.Context)
	WaitFirstAttempt(ctx context.Context) error
	Close() error
}

// corker is an upstream whose writes can be held and sent together (a child's pipe).
type corker interface {
	Cork() (uncork func())
}

// clientShaped is an upstream told, before it starts, what its one client can do and
// which era it speaks (a shared upstream behind a stdio front end).
type clientShaped interface {
	SetClientCapabilities(caps json.RawMessage)
	SetPreferLegacy(legacy bool)
}

// lister is an upstream that can drain a paginated list of its own (tasks/list).
type lister interface {
	ListAll(ctx context.Context, method, key string) ([]json.RawMessage, error)
}

var (
	_ Upstream     = (*upstream.Upstream)(nil)
	_ corker       = (*upstream.Upstream)(nil)
	_ clientShaped = (*upstream.Upstream)(nil)
	_ lister       = (*upstream.Upstream)(nil)
)

// Client is a connected client session that receives proxy-level notifications.
type Client interface {
	// Notify sends a notification to the client. It must not block for long.
	Notify(method string, params json.RawMessage)
	// Cork and Uncork bracket a burst of messages for the client (see Router.Hold).
	Cork()
	Uncork()
	// Request sends a server-to-client request (sampling, elicitation, roots) with an id
	// of the client session's own and waits for the answer or ctx. It refuses, without
	// asking the client, what the client did not declare it can do.
	Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error)
}

// Options configures the merged catalogue.
type Options struct {
	Separator     string // between namespace and name; default "__"
	PageSize      int    // items per page of merged lists; default 100
	MaxNameLength int    // longest exposed tool or prompt name; default 128
	// NotifyDelay coalesces bursts of catalogue changes into one list_changed per kind;
	// default 300ms.
	NotifyDelay time.Duration
	// Clock runs the router's timers (the notify delay, idle sweeps); nil is the real
	// clock. Tests pass a clock.Fake to show what happens after a delay without sleeping.
	Clock clock.Clock
	// CursorKey keys the HMAC of the pagination cursors the router mints. Empty: a
	// random key of this process's own. Replicas of one proxy behind a load balancer
	// share a key, so that a client can page through a list on any of them. At least
	// MinKeyLen bytes; check it with CheckCursorKey (New panics on a shorter one).
	CursorKey []byte
	// StartWait bounds how long a tools/call or prompts/get naming an item not listed
	// yet waits for the upstreams still starting their first time; default 60s.
	StartWait time.Duration
	// Tasks keeps which upstream owns each task; nil keeps it in memory
	// (NewMemoryTasks). Replicas share one store to route a task's requests anywhere.
	Tasks TaskStore
	// Ranker builds the endpoints' search indexes (an endpoint may have its own); nil:
	// endpoints find nothing when searched.
	Ranker search.Ranker
}

// backend is one upstream and its place in the merged namespace.
type backend struct {
	name      string
	namespace string
	up        Upstream
	session   string // a per-client session's key in the task store; "" for the upstream's shared session

	mu       sync.Mutex            // guards inflight
	inflight map[*Request]struct{} // requests in flight that can answer server-to-client requests

	pool     *clientPool // per-client sessions; nil for a shared upstream
	capsPool *clientPool // sessions for other client capabilities (see SetCapabilitySessions)

	filters  [2]*selection   // tools and prompts (see SetFilter); nil: every item as listed
	prepared [2]preparedList // what the filters made of the lists last time; guarded by Router.rebuildMu

	calls   atomic.Int64 // requests sent to up and not answered yet (see Reconfigure's drain)
	stopped atomic.Bool  // removed by Reconfigure and closed: calls still routed here fail clearly
}

// track records req as in flight on b until untrack.
func (b *backend) track(req *Request) {
	b.mu.Lock()
	if b.inflight == nil {
		b.inflight = map[*Request]struct{}{}
	}
	b.inflight[req] = struct{}{}
	b.mu.Unlock()
}

// untrack ends what track started.
func (b *backend) untrack(req *Request) {
	b.mu.Lock()
	delete(b.inflight, req)
	b.mu.Unlock()
}

// inputFor finds who answers a server-to-client request from b: the one client with
// requests in flight there. ok is false when several clients have requests in flight
// (the request cannot be attributed); input is nil when none has.
func (b *backend) inputFor() (input InputFunc, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var client ClientID
	for req := range b.inflight {
		if req.Waiting != nil && req.Waiting() {
			continue // parked: its upstream call is itself waiting on a client
		}
		if input != nil && req.Client != client {
			return nil, false
		}
		input, client = req.Input, req.Client
	}
	return input, true
}

// Router merges and routes. Create it with New, Add the upstreams in config order, Start.
type Router struct {
	opts    Options
	log     zerolog.Logger
	cursors *cursorCodec

	members  atomic.Pointer[members] // the upstreams in config order; replaced whole (see Reconfigure)
	memberMu sync.Mutex              // serialises changes of members

	snap atomic.Pointer[snapshot]

	rebuildMu sync.Mutex // serialises rebuilds and guards changeSeq, pending and timer
	changeSeq uint64     // counts rebuilds that changed what clients see
	pending   changeSet
	timer     clock.Timer

	clientsMu sync.Mutex               // guards clients
	clients   map[Client]uint64        // subscribed clients, with the changeSeq they subscribed at
	corkers   atomic.Pointer[[]Client] // the subscribed clients worth corking (copy on write)

	logLevel atomic.Pointer[string] // last logging/setLevel from a client, re-applied on restart

	tasks taskTable // experimental tasks: task id → creating upstream (in Options.Tasks)

	settled atomic.Bool // every upstream's first start attempt has finished

	endpoints  atomic.Pointer[endpointSet] // the endpoints (SetEndpoints); nil: none
	guard      atomic.Pointer[guardBox]    // what principals may see; nil when everything is visible
	presenter  Presenter                   // how the catalogue is presented (plugins); nil: as merged; guarded by rebuildMu
	vetter     Vetter                      // which items are served (pinning, screening); nil: all; guarded by rebuildMu
	chain      atomic.Pointer[Handler]     // the middleware chain (see Use); nil: none
	local      atomic.Pointer[Handler]     // the local chain (see UseLocal); nil: none
	localTools atomic.Pointer[Handler]     // the chain of the proxy's own tools (see UseLocalTools); nil: the local chain
	refusals   atomic.Pointer[RefusalHook] // told of requests refused before routing (see UseRefusals); nil: none
	onClose    []func()

	clientCaps   atomic.Pointer[startCaps] // what the upstreams were started with
	preferLegacy atomic.Pointer[bool]      // what SetPreferLegacy said, for upstreams added later

	startOnce sync.Once
	ctx       context.Context // from Start (set under memberMu): the lifetime of upstreams added later and of per-client sessions
}

// members is one version of the router's upstreams: the list in config order (earlier
// upstreams win name collisions) and the index the upstreams' events are looked up in.
type members struct {
	list []*backend
	byUp map[Upstream]*backend
}

// with returns a copy of m with b added at the end.
func (m *members) with(b *backend) *members {
	n := &members{list: append(m.list[:len(m.list):len(m.list)], b), byUp: make(map[Upstream]*backend, len(m.byUp)+1)}
	for u, x := range m.byUp {
		n.byUp[u] = x
	}
	n.byUp[b.up] = b
	return n
}

// all returns the upstreams in config order. The slice is never modified: a change of
// the upstreams publishes a new one.
func (r *Router) all() []*backend { return r.members.Load().list }

// backendOf returns the backend of a shared upstream, nil for one the router does not
// hold (a per-client session's, or one removed by a reload).
func (r *Router) backendOf(u Upstream) *backend { return r.members.Load().byUp[u] }

// changeSet records which lists changed for whom since the last notification, and the
// sequence number of the latest of those changes (see viewchange.go).
type changeSet struct {
	all     upstream.Kinds            // kinds every client is told of
	seq     uint64                    // the latest change: clients subscribed since are not told of all
	plain   map[Client]upstream.Kinds // clients that are not Viewers: the kinds that may have changed
	views   map[any]upstream.Kinds    // Viewers' subscribers (View.ID): the kinds whose list changed for them
	viewers map[Client]bool           // the Viewers views names subscribers of
}

// New returns a router with no upstreams. It has no side effects. It panics when
// opts.CursorKey is set but too short (see CheckCursorKey): a programming error, since
// the wiring checks configured keys first and reports them as errors.
func New(opts Options, log zerolog.Logger) *Router {
	if err := CheckCursorKey(opts.CursorKey); err != nil {
		panic("router.New: " + err.Error())
	}
	if opts.Separator == "" {
		opts.Separator = "__"
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 100
	}
	if opts.MaxNameLength <= 0 || opts.MaxNameLength > specMaxNameLength {
		opts.MaxNameLength = specMaxNameLength
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.StartWait <= 0 {
		opts.StartWait = defaultStartWait
	}
	if opts.NotifyDelay <= 0 {
		opts.NotifyDelay = 300 * time.Millisecond
	}
	r := &Router{
		opts:    opts,
		log:     log,
		cursors: newCursorCodec(opts.CursorKey),
		clients: map[Client]uint64{},
	}
	r.members.Store(&members{byUp: map[Upstream]*backend{}})
	r.tasks.init(opts.Tasks, log)
	r.snap.Store(&snapshot{toolByName: map[string]*entry{}, promptByName: map[string]*entry{},
		resByURI: map[string]*resource{}, resByCanon: map[string]*resource{}, rewritten: map[ownerURI]string{}})
	return r
}

// Add registers an upstream under namespace ("" exposes its names unprefixed). Call it
// before Start, in config order: earlier upstreams win name collisions.
func (r *Router) Add(u Upstream, namespace string) {
	r.add(&backend{name: u.Name(), namespace: namespace, up: u})
}

func (r *Router) add(b *backend) {
	r.memberMu.Lock()
	defer r.memberMu.Unlock()
	r.members.Store(r.members.Load().with(b))
}

// SetPreferLegacy tells the upstreams the client that starts them speaks the legacy era
// (see upstream.Upstream.SetPreferLegacy).
func (r *Router) SetPreferLegacy(legacy bool) {
	r.preferLegacy.Store(&legacy)
	for _, b := range r.all() {
		if cs, ok := b.up.(clientShaped); ok {
			cs.SetPreferLegacy(legacy)
		}
	}
}

// SetClientCapabilities sets what upstreams are told the client can do (already narrowed
// to what the proxy relays); it applies to upstreams started or restarted afterwards.
func (r *Router) SetClientCapabilities(caps json.RawMessage) {
	r.clientCaps.Store(&startCaps{caps: caps, key: CapabilitiesKey(caps)})
	for _, b := range r.all() {
		if cs, ok := b.up.(clientShaped); ok {
			cs.SetClientCapabilities(caps)
		}
	}
}

// Start starts every upstream. It returns at once, and does nothing the second time.
func (r *Router) Start(ctx context.Context) {
	r.startOnce.Do(func() {
		r.memberMu.Lock()
		r.ctx = ctx
		for _, b := range r.all() {
			b.startSweepers()
		}
		r.memberMu.Unlock()
	})
	for _, b := range r.all() {
		b.up.Start(ctx)
	}
}

// startSweepers starts the idle sweepers of b's session pools.
func (b *backend) startSweepers() {
	for _, p := range []*clientPool{b.pool, b.capsPool} {
		if p != nil {
			p.wg.Add(1)
			go p.sweep()
		}
	}
}

// WaitReady waits until every upstream's first start attempt has finished (succeeded or
// failed) or ctx ends, and returns the upstreams' errors joined.
func (r *Router) WaitReady(ctx context.Context) error {
	if r.settled.Load() {
		return nil
	}
	var errs []error
	for _, b := range r.all() {
		if err := b.up.WaitFirstAttempt(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() == nil {
		r.settled.Store(true)
	}
	return errors.Join(errs...)
}

// Close stops every upstream (concurrently) and waits for them.
func (r *Router) Close() error {
	var wg sync.WaitGroup
	list := r.all()
	for _, b := range list {
		for _, p := range []*clientPool{b.pool, b.capsPool} {
			if p != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p.close()
				}()
			}
		}
	}
	errs := make([]error, len(list))
	for i, b := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.up.Close()
		}()
	}
	wg.Wait()
	r.rebuildMu.Lock()
	if r.timer != nil {
		r.timer.Stop()
	}
	hooks := r.onClose
	r.onClose = nil
	r.rebuildMu.Unlock()
	for _, f := range hooks {
		f()
	}
	return errors.Join(errs...)
}

// Subscribe registers a client for proxy-level notifications until the returned function
// is called.
func (r *Router) Subscribe(c Client) (unsubscribe func()) {
	r.rebuildMu.Lock()
	seq := r.changeSeq // the client sees the catalogue as of now: older changes are not news
	r.rebuildMu.Unlock()
	r.clientsMu.Lock()
	r.clients[c] = seq
	r.refreshCorkersLocked()
	r.clientsMu.Unlock()
	return func() {
		r.clientsMu.Lock()
		delete(r.clients, c)
		r.refreshCorkersLocked()
		r.clientsMu.Unlock()
	}
}

// clientList returns the subscribed clients at this moment.
func (r *Router) clientList() []Client {
	r.clientsMu.Lock()
	defer r.clientsMu.Unlock()
	cs := make([]Client, 0, len(r.clients))
	for c := range r.clients {
		cs = append(cs, c)
	}
	return cs
}

func (r *Router) broadcast(method string, params json.RawMessage) {
	for _, c := range r.clientList() {
		c.Notify(method, params)
	}
}

// notifyChanged sends a list_changed notification to the clients that subscribed before
// the change numbered seq.
func (r *Router) notifyChanged(method string, seq uint64) {
	r.clientsMu.Lock()
	var cs []Client
	for c, since := range r.clients {
		if since < seq {
			cs = append(cs, c)
		}
	}
	r.clientsMu.Unlock()
	for _, c := range cs {
		c.Notify(method, nil)
	}
}

// Upstreams returns the upstreams' names, states and handshake info in config order.
func (r *Router) Upstreams() []UpstreamStatus {
	list := r.all()
	out := make([]UpstreamStatus, len(list))
	for i, b := range list {
		st, err := b.up.State()
		out[i] = UpstreamStatus{Name: b.name, Namespace: b.namespace, State: st, Err: err, Info: b.up.Info()}
		if b.pool != nil {
			out[i].PerClient, out[i].Sessions = !b.pool.pc.ByPrincipal, b.pool.sessions()
			out[i].PerPrincipal = b.pool.pc.ByPrincipal
		}
	}
	return out
}

// UpstreamStatus describes one upstream for the front end and the CLI.
type UpstreamStatus struct {
	Name      string
	Namespace string
	State     upstream.State
	Err       error
	Info      upstream.Info
	PerClient bool // one upstream session per client session
	Sessions  int  // per-client (or per-principal) sessions open now

	PerPrincipal bool // one upstream session per principal
}

// NotifyAll sends a client's notification to every running upstream of the legacy era
// that serves it: shared upstreams, and the client's own per-client sessions
// (notifications/roots/list_changed: the modern era has no such notification, its
// servers ask for roots per request).
func (r *Router) NotifyAll(client Client, method string, params json.RawMessage) {
	for _, b := range r.all() {
		if b.pool != nil {
			b.pool.mu.Lock()
			inst := b.pool.byClient[poolKey{session: client}]
			if b.pool.pc.ByPrincipal {
				for _, in := range b.pool.byClient {
					if in.hasClient(client) {
						inst = in
					}
				}
			}
			b.pool.mu.Unlock()
			if inst == nil {
				continue
			}
			b = &inst.backend
		}
		if st, _ := b.up.State(); st == upstream.StateReady && !b.up.Info().Modern {
			if err := b.up.Notify(method, params); err != nil {
				r.log.Debug().Err(err).Str("upstream", b.name).Str("method", method).Msg("fan-out notification")
			}
		}
	}
}

// Tool describes one tool of the merged catalogue, for the CLI.
type Tool struct {
	Name         string // exposed name
	Upstream     string // owner
	OriginalName string // the upstream's own name
	Description  string
	Raw          json.RawMessage // the tool as listed
}

// Tools lists the merged tools in catalogue order.
func (r *Router) Tools() []Tool {
	return toolsOf(r.snap.Load().tools)
}

// ToolHeaders returns the x-mcp-header annotations of an exposed tool (nil when it has
// none); ok is false when there is no such tool.
func (r *Router) ToolHeaders(name string) (headers []mcp.ParamHeader, ok bool) {
	e := r.snap.Load().toolByName[name]
	if e == nil {
		return nil, false
	}
	return e.headers, true
}

// CorkUpstreams holds writes to every upstream back until the returned function is
// called: a front end that is about to handle a burst of requests already in its buffer
// uses it so that the burst reaches each upstream in one system call.
func (r *Router) CorkUpstreams() (uncork func()) {
	list := r.all()
	uncorks := make([]func(), 0, len(list))
	for _, b := range list {
		if c, ok := b.up.(corker); ok {
			uncorks = append(uncorks, c.Cork())
		}
	}
	return func() {
		for _, u := range uncorks {
			u()
		}
	}
}

// holdClients corks every subscribed client until the returned function is called.
func (r *Router) holdClients() (release func()) {
	p := r.corkers.Load()
	if p == nil || len(*p) == 0 {
		return noRelease
	}
	cs := *p
	for _, c := range cs {
		c.Cork()
	}
	return func() {
		for _, c := range cs {
			c.Uncork()
		}
	}
}

func noRelease() {}

// Corkless is implemented by clients for which corking achieves nothing (an HTTP
// session, whose answers do not go through its own stream): an upstream's burst then
// costs nothing per such client.
type Corkless interface{ Corkless() bool }

// refreshCorkersLocked rebuilds the copy-on-write list of clients worth corking;
// clientsMu is held.
func (r *Router) refreshCorkersLocked() {
	cs := make([]Client, 0, len(r.clients))
	for c := range r.clients {
		if cl, ok := c.(Corkless); ok && cl.Corkless() {
			continue
		}
		cs = append(cs, c)
	}
	r.corkers.Store(&cs)
}
