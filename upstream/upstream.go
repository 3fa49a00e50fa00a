// Package upstream runs one configured MCP server behind the proxy: it spawns the child
// process, connects to the URL, or dials the link Spec.Dial opens (a transport.Link),
// detects the server's era (server/discover, else initialize) and performs its
// handshake, keeps the upstream's own request-id space and pending table, rewrites
// progress tokens into that space, caches the upstream's catalogue (tools, prompts,
// resources, resource templates, following every page), and restarts the child with
// exponential backoff when it exits.
//
// An Upstream knows nothing about other upstreams or about clients: what it cannot handle
// itself it reports through Events, and what happens to it over its life through an
// Observer.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/sandbox"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// Spec is the static description of one upstream.
type Spec struct {
	Name    string            // the configured label, used in logs and errors
	Command []string          // program and arguments (a child process), or
	URL     string            // a Streamable HTTP endpoint
	Headers map[string]string // sent to the URL on every request
	OAuth   *transport.OAuth  // for URL: authorizes on a 401; shared by every instance (nil: none)
	// Authorizer, for URL, gives each request its Authorization in place of OAuth: the
	// principal's own credential of a per-principal session (nil: none).
	Authorizer transport.Authorizer
	// Prepare, when set, is asked at each start attempt (the first and every restart)
	// for the environment (Command) and the headers (URL) of that attempt, in place of
	// Env and Headers: a principal's secrets, read when its session starts. An error fails
	// the attempt; nothing is started without what it asks for.
	Prepare        func(ctx context.Context) (env, headers map[string]string, err error)
	Observer       Observer          // told about starts, readiness, exits, restarts, timeouts (nil: nobody)
	Transport      string            // for URL: TransportAuto (default), TransportStreamableHTTP or TransportSSE
	Env            map[string]string // added to the proxy's environment
	Dir            string            // working directory
	Timeout        time.Duration     // per request; zero means 60s
	StartupTimeout time.Duration     // spawn + initialize + catalogue; zero means 30s
	MaxMessage     int               // bytes; zero means jsonrpc.DefaultMaxMessageSize
	// ClientCapabilities is sent in initialize: what the proxy's client can do (roots,
	// sampling, elicitation), never wider than that client declared. Nil means none.
	ClientCapabilities json.RawMessage
	ClientName         string // clientInfo.name sent in initialize
	ClientVersion      string // clientInfo.version sent in initialize
	// StopGrace is how long Close waits after closing stdin, and again after SIGTERM,
	// before escalating. Zero means 2s.
	StopGrace time.Duration
	// Protocol is the upstream's era: ProtocolAuto (the default), ProtocolLegacy or
	// ProtocolModern.
	Protocol string
	// Backoff bounds the delay between restarts; zero values mean 250ms and 30s.
	BackoffMin, BackoffMax time.Duration
	// Dial, when set, opens the link of every start attempt (the first start and each
	// restart) in place of the built-in choice; Command, URL, Headers, OAuth, Transport,
	// Env and Dir are then not used. Its ctx ends with the attempt's startup timeout or
	// with Close, and bounds the dialling only: the link must outlive it. A dialled link
	// is driven as a child process's pipes are (no HTTP transport fallback; a legacy
	// client's preference for initialize applies). Nil means the built-in choice:
	// spawn Command, or connect to URL.
	Dial func(ctx context.Context) (transport.Link, error)
	// Sandbox confines a Command child (Linux, Landlock; see package sandbox); a policy
	// that cannot be enforced fails every start. Nil runs it unconfined.
	Sandbox *sandbox.Policy
}

// Events receives what an upstream cannot handle by itself. Methods are called from the
// upstream's goroutines and must not block for long.
type Events interface {
	// Changed is called when the upstream's state or cached catalogue changed (it became
	// ready, went down, restarted, or refreshed a list after list_changed). kinds says
	// which lists may differ; zero means all.
	Changed(u *Upstream, kinds Kinds)
	// Notification is called for notifications the upstream does not consume itself
	// (logging messages, resource updates, ...).
	Notification(u *Upstream, m *jsonrpc.Message)
	// Request is called for the server-to-client requests the proxy relays (sampling,
	// elicitation, roots; see mcp.IsClientRequest): the upstream answers ping and refuses
	// the rest itself. The returned result or error is sent back to the upstream with
	// its own request id.
	Request(ctx context.Context, u *Upstream, m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error)
	// Hold is called before the upstream's reader handles a burst of messages that are
	// already buffered; the returned function is called when the burst is done. The
	// receiver may hold back its own writes meanwhile, so they leave together.
	Hold() (release func())
}

// Kinds is a set of catalogue lists.
type Kinds uint8

// The catalogue lists.
const (
	KindTools Kinds = 1 << iota
	KindPrompts
	KindResources
	KindTemplates
	AllKinds = KindTools | KindPrompts | KindResources | KindTemplates
)

// State is the lifecycle state of an upstream.
type State int32

// States.
const (
	StateStarting State = iota // first start in progress
	StateReady                 // initialized and serving
	StateDown                  // exited or failed to start; a restart is scheduled
	StateStopped               // closed
)

func (s State) String() string {
	switch s {
	case StateStarting:
		return "starting"
	case StateReady:
		return "ready"
	case StateDown:
		return "down"
	case StateStopped:
		return "stopped"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Info is what the upstream said about itself in the handshake.
type Info struct {
	ProtocolVersion string
	Capabilities    json.RawMessage // the upstream's ServerCapabilities, raw
	ServerInfo      json.RawMessage // raw Implementation object
	Instructions    string
	Modern          bool // the upstream speaks the stateless 2026-07-28 protocol
	caps            capabilities
}

// Catalogue is an upstream's lists, each item as raw JSON exactly as the upstream sent it.
// A Catalogue is immutable once published.
type Catalogue struct {
	Tools     []json.RawMessage
	Prompts   []json.RawMessage
	Resources []json.RawMessage
	Templates []json.RawMessage
	// ParamHeaders are the tools' x-mcp-header annotations, by the upstream's tool name
	// (only the tools that have some).
	ParamHeaders map[string][]mcp.ParamHeader
	// Hints are the caching hints each list came with (zero for legacy upstreams).
	Hints struct{ Tools, Prompts, Resources, Templates CacheHint }
}

// empty reports whether c lists nothing (a nil c included).
func (c *Catalogue) empty() bool {
	return c == nil || len(c.Tools)+len(c.Prompts)+len(c.Resources)+len(c.Templates) == 0
}

// Upstream is one configured MCP server. Create it with New, then Start; Close stops it.
// All methods are safe for concurrent use.
type Upstream struct {
	spec   Spec
	log    zerolog.Logger
	events Events

	mu           sync.Mutex // guards the fields below
	cur          *conn      // live connection; nil unless state is StateReady
	state        State
	lastErr      error
	info         Info
	catalogue    *Catalogue
	restarts     int
	learnedKind  string      // the HTTP transport auto found
	preferLegacy atomic.Bool // see SetPreferLegacy
	// probeUnanswered is set once a child read the server/discover probe and left it
	// unanswered: every later start of it offers initialize first.
	probeUnanswered atomic.Bool
	// probeTimeout, when positive, replaces the default timeout of the server/discover
	// probe of protocol "auto" (tests).
	probeTimeout time.Duration

	started bool
	cancel  context.CancelFunc

	firstDone chan struct{} // closed when the first start attempt has finished
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// New returns an upstream that is not yet started. It has no side effects.
func New(spec Spec, log zerolog.Logger, events Events) *Upstream {
	if spec.Timeout <= 0 {
		spec.Timeout = 60 * time.Second
	}
	if spec.StartupTimeout <= 0 {
		spec.StartupTimeout = 30 * time.Second
	}
	if spec.MaxMessage <= 0 {
		spec.MaxMessage = jsonrpc.DefaultMaxMessageSize
	}
	if spec.StopGrace <= 0 {
		spec.StopGrace = 2 * time.Second
	}
	if spec.BackoffMin <= 0 {
		spec.BackoffMin = 250 * time.Millisecond
	}
	if spec.BackoffMax <= 0 {
		spec.BackoffMax = 30 * time.Second
	}
	if spec.Transport == "" {
		spec.Transport = TransportAuto // as documented: an empty transport tries both
	}
	return &Upstream{
		spec:      spec,
		log:       log.With().Str("upstream", spec.Name).Logger(),
		events:    events,
		firstDone: make(chan struct{}),
		catalogue: &Catalogue{},
	}
}

// Name returns the configured name.
func (u *Upstream) Name() string { return u.spec.Name }

// Start launches the supervisor, which spawns the child and keeps it running until Close.
// It returns at once; use WaitFirstAttempt to wait for the first handshake.
func (u *Upstream) Start(ctx context.Context) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.started || u.state == StateStopped {
		return
	}
	u.started = true
	ctx, u.cancel = context.WithCancel(ctx)
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		u.supervise(ctx)
	}()
}

// WaitFirstAttempt blocks until the first start attempt has succeeded or failed, or ctx
// ends. It returns the attempt's error.
func (u *Upstream) WaitFirstAttempt(ctx context.Context) error {
	select {
	case <-u.firstDone:
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.state == StateReady {
			return nil
		}
		return u.lastErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// FirstAttemptDone reports, without waiting, whether the first start attempt has
// finished (see WaitFirstAttempt).
func (u *Upstream) FirstAttemptDone() bool {
	select {
	case <-u.firstDone:
		return true
	default:
		return false
	}
}

// Close stops the supervisor and the child (stdin closed, then SIGTERM, then SIGKILL to
// its process group) and fails calls in flight. It is safe to call more than once, and
// before or without Start.
func (u *Upstream) Close() error {
	u.closeOnce.Do(func() {
		u.mu.Lock()
		cancel := u.cancel
		if !u.started {
			close(u.firstDone)
		}
		u.started = true
		u.state = StateStopped
		u.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		u.wg.Wait()
	})
	return nil
}

// State returns the current state and, when down, the last error.
func (u *Upstream) State() (State, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.state, u.lastErr
}

// Info returns the handshake information of the current (or last) connection.
func (u *Upstream) Info() Info {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.info
}

// Catalogue returns the cached catalogue; it is empty while the upstream is down.
func (u *Upstream) Catalogue() *Catalogue {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.catalogue
}

// Timeout returns the per-request timeout.
func (u *Upstream) Timeout() time.Duration { return u.spec.Timeout }

// Request is one call to make upstream.
type Request struct {
	Method string
	Params json.RawMessage
	// Progress, when set and Params carries _meta.progressToken, receives each progress
	// notification for this call with the caller's original token restored. It is called
	// on the upstream's reader goroutine, before the response is delivered.
	Progress func(params json.RawMessage)
	// Timeout overrides the upstream's per-request timeout when positive.
	Timeout time.Duration
	// Cancel, when set, cancels the call instead of ctx (cheaper than a context per
	// request); the call then completes with ErrCancelled.
	Cancel *Canceller
	// Meta identifies the client the request is made for; nil means the proxy itself.
	Meta *ClientMeta
	// Input answers input requests of a modern upstream (sampling, elicitation, roots)
	// by asking the client, for clients that cannot take input_required results.
	Input func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error)
	// ClientHandlesInput means the client takes input_required results itself (a modern
	// client): they are passed through untouched.
	ClientHandlesInput bool
}

// ErrUnavailable is wrapped by Call errors when the upstream is not running.
var ErrUnavailable = errors.New("upstream unavailable")

// Send sends a request and arranges for done to be called exactly once: with the
// upstream's response message (which may carry a JSON-RPC error), or with a proxy-local
// error (*jsonrpc.Error with a proxy code, or an error wrapping ErrUnavailable) when no
// response could be had, or with ctx's error when ctx ended first (the upstream is then
// sent notifications/cancelled and a late response is dropped).
//
// Send does not wait: the request is written before it returns, and done runs later on
// the upstream's reader goroutine (or a timer's), so it must not block for long. This
// keeps a call free of goroutine hand-offs inside the proxy.
func (u *Upstream) Send(ctx context.Context, req *Request, done func(*jsonrpc.Message, error)) {
	u.mu.Lock()
	c, state, lastErr := u.cur, u.state, u.lastErr
	u.mu.Unlock()
	if c == nil {
		done(nil, u.unavailable(state, lastErr))
		return
	}
	c.send(ctx, req, done)
}

// SetPreferLegacy says the proxy's client speaks the legacy era: a child-process (or
// Spec.Dial) upstream with protocol "auto" is then offered initialize first, so a server
// that speaks both eras is driven in the legacy one, where it can send requests to the
// client in the middle of a call (the modern era cannot). Applies to the next start.
func (u *Upstream) SetPreferLegacy(legacy bool) { u.preferLegacy.Store(legacy) }

// SetClientCapabilities sets the client capabilities sent in the next initialize (the
// first start, or the next restart).
func (u *Upstream) SetClientCapabilities(caps json.RawMessage) {
	u.mu.Lock()
	u.spec.ClientCapabilities = caps
	u.mu.Unlock()
}

// Cork holds writes to the upstream back until the returned function is called, so that
// a burst of requests leaves in one system call (see jsonrpc.LineWriter.Cork).
func (u *Upstream) Cork() (uncork func()) {
	u.mu.Lock()
	c := u.cur
	u.mu.Unlock()
	if c == nil {
		return func() {}
	}
	corker, ok := c.proc.(transport.Corker)
	if !ok {
		return func() {} // every HTTP message is its own request
	}
	corker.Cork()
	return func() {
		if err := corker.Uncork(); err != nil {
			c.log.Debug().Err(err).Msg("flushing writes to upstream")
		}
	}
}

// ListAll fetches every page of a paginated list method and returns the items under key.
func (u *Upstream) ListAll(ctx context.Context, method, key string) ([]json.RawMessage, error) {
	u.mu.Lock()
	c, state, lastErr := u.cur, u.state, u.lastErr
	u.mu.Unlock()
	if c == nil {
		return nil, u.unavailable(state, lastErr)
	}
	return c.listAll(ctx, method, key)
}

// Call is the synchronous form of Send.
func (u *Upstream) Call(ctx context.Context, req *Request) (*jsonrpc.Message, error) {
	ch := make(chan callResult, 1)
	u.Send(ctx, req, func(m *jsonrpc.Message, err error) { ch <- callResult{m, err} })
	r := <-ch
	return r.msg, r.err
}

// Notify sends a notification to the upstream if it is running.
func (u *Upstream) Notify(method string, params json.RawMessage) error {
	u.mu.Lock()
	c, state, lastErr := u.cur, u.state, u.lastErr
	u.mu.Unlock()
	if c == nil {
		return u.unavailable(state, lastErr)
	}
	return c.write(jsonrpc.NewNotification(method, params))
}

func (u *Upstream) unavailable(state State, lastErr error) error {
	msg := fmt.Sprintf("upstream %q is %s", u.spec.Name, state)
	if lastErr != nil {
		msg += ": " + lastErr.Error()
	}
	return fmt.Errorf("%w: %s", ErrUnavailable, msg)
}
