// Package proxy is mcp-proxy's engine as a library: it builds a proxy from a
// configuration (the upstreams, the router and its catalogue, the policy chain, the
// plugins, telemetry, the admin listener, the cluster's shared state) and serves it on
// stdin/stdout or over Streamable HTTP, reloads it and closes it. The mcp-proxy command
// is a shell of flags and output over it; a Go program embeds a proxy the same way, and
// may add upstreams that run in its own process (WithUpstream, over a transport.Pipe)
// and middlewares of its own in the chain of every routed call (WithMiddleware).
//
// A proxy is built by New, then served once: ServeStdio for one client on two streams
// (no listen block), or ListenAndServe for the configuration's listen block. Both close
// the proxy when they return. Reload applies another configuration while it serves;
// Close stops everything it started. A proxy built with Oneshot serves no client: Start
// starts its upstreams and Router lists and calls through the same chain.
//
// See docs/embedding.md for a walk-through; the package's Example is its code.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/admin"
	"github.com/mcp-proxy/mcp-proxy/auth"
	"github.com/mcp-proxy/mcp-proxy/cluster"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/server"
	"github.com/mcp-proxy/mcp-proxy/telemetry"
	"github.com/mcp-proxy/mcp-proxy/transport"
	"github.com/mcp-proxy/mcp-proxy/trust"
)

// Proxy is one proxy built from a configuration. Its methods are safe for concurrent
// use.
type Proxy struct {
	cfg      *config.Config // as given, with the in-process upstreams added
	log      zerolog.Logger
	version  string
	onSignal bool
	oneshot  bool
	http     bool // built for the listen block (many clients)

	e     *engine
	srv   *server.Server     // the front end (nil for Oneshot)
	tr    *telemetry.Tracing // nil without tracing
	fwd   *cluster.Forwarder // nil without a cluster block (HTTP only)
	authn *auth.Switch       // the HTTP front end's authenticator; nil without one
	creds *credentials       // the per-user credentials' store and providers

	mu        sync.Mutex
	served    bool
	closed    bool
	stopAdmin func() // nil until a Serve method starts the admin listener
	stopWatch func() // nil until a Serve method starts the reload watcher
	closeErr  error
}

// Option changes how New builds a proxy.
type Option func(*options)

type options struct {
	log        zerolog.Logger
	version    string
	onSignal   bool
	oneshot    bool
	middleware []router.Middleware
	upstreams  []config.Upstream
	dial       map[string]func(context.Context) (transport.Link, error)
	endpoint   string // ServeEndpoint
	err        error  // the first bad option, reported by New
}

// WithLogger makes log the proxy's logger (the default discards everything). mcp-proxy
// logs zerolog JSON to stderr: stdout carries the protocol in stdio mode.
func WithLogger(log zerolog.Logger) Option {
	return func(o *options) { o.log = log }
}

// WithVersion is the version the proxy reports: serverInfo.version (unless the proxy
// block sets one), the clientInfo it sends upstream, the metrics and the logs. The
// default is the main module's version from the binary's build information, else "dev".
func WithVersion(v string) Option {
	return func(o *options) {
		if v != "" {
			o.version = v
		}
	}
}

// ReloadOnSignal makes the proxy reload its configuration file on SIGHUP while it
// serves, as mcp-proxy run does. Without it the proxy leaves the process's signals alone.
func ReloadOnSignal() Option {
	return func(o *options) { o.onSignal = true }
}

// Oneshot builds a proxy that serves no client: the program starts its upstreams (Start)
// and lists and calls through its Router, as `mcp-proxy tools` and `mcp-proxy call` do.
// Nothing else of the configuration runs: no listener, no admin listener, no tracing, no
// metrics, no cluster forwarding; the upstreams are shared as for one client.
func Oneshot() Option {
	return func(o *options) { o.oneshot = true }
}

// WithMiddleware adds mw to the chain every routed call passes (tools/call, prompts/get,
// resources/read and the other requests an upstream answers), outermost first. They run
// after the policy and the plugins, just before the call goes upstream, and stay in the
// chain across reloads. A middleware may answer a call itself, change it, or watch its
// reply (router.Call, router.Reply).
func WithMiddleware(mw ...router.Middleware) Option {
	return func(o *options) { o.middleware = append(o.middleware, mw...) }
}

// WithUpstream adds an upstream that runs in the program's own process: every start of
// it (the first, each restart, and each client's own session where the front end gives
// clients one) calls dial for a fresh link to an MCP server, typically one end of a
// transport.Pipe whose other end the program serves. It is configured as an upstream
// block with only its name would be (namespace = name, the default timeouts), and it
// stays across reloads. The name must be a valid upstream name that no upstream block of
// the configuration uses.
func WithUpstream(name string, dial func(ctx context.Context) (transport.Link, error)) Option {
	return func(o *options) {
		switch {
		case o.err != nil:
			return
		case !validName(name):
			o.err = fmt.Errorf("in-process upstream %q: a name is letters, digits, '_' and '-'", name)
			return
		case dial == nil:
			o.err = fmt.Errorf("in-process upstream %q: no dial function", name)
			return
		case o.dial[name] != nil:
			o.err = fmt.Errorf("in-process upstream %q: given twice", name)
			return
		}
		if o.dial == nil {
			o.dial = map[string]func(context.Context) (transport.Link, error){}
		}
		o.dial[name] = dial
		o.upstreams = append(o.upstreams, config.Upstream{
			Name: name, Namespace: name, Cwd: ".",
			Timeout: config.DefaultTimeout, StartupTimeout: config.DefaultStartupTimeout,
			MaxMessageSize: config.DefaultMaxMessageSize, Protocol: config.ProtocolAuto,
			Session: config.SessionShared, MaxSessions: config.DefaultMaxSessions, IdleTimeout: config.DefaultIdleTimeout,
		})
	}
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// Load reads the configuration file at path (HCL, or a client's JSON file such as Claude
// Desktop's, converted as `mcp-proxy import` converts it) with every check mcp-proxy
// validate runs but the plugins' own. Its diagnostics, warnings included, are written to
// diagnostics (nil: discarded), one per line at file:line; on any error the
// configuration is nil and the error says the file is invalid.
func Load(path string, diagnostics io.Writer) (*config.Config, error) {
	if diagnostics == nil {
		diagnostics = io.Discard
	}
	return loadConfig(path, diagnostics)
}

// New builds the proxy cfg configures (nil: the defaults of a file with no blocks, for a
// proxy of in-process upstreams only). With a listen block it is built for
// ListenAndServe (many clients, authenticated as the auth block says), else for
// ServeStdio; Oneshot builds it for neither. Tracing and the cluster's connections start
// here; the upstreams start when the client initializes (or Start), the admin listener
// when the proxy serves. A plugin that cannot start, or an upstream that cannot be set
// up as configured, fails New, and nothing stays running.
//
// cfg is not checked again: use Load, or config's loaders with the checks, to read one.
// Its Filename is the file that reloads read again (SIGHUP, the admin listener's
// /reload, proxy.watch); a configuration made in memory has none.
func New(ctx context.Context, cfg *config.Config, opts ...Option) (*Proxy, error) {
	o := options{log: zerolog.Nop(), version: defaultVersion()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.err != nil {
		return nil, o.err
	}
	if cfg == nil {
		cfg = config.Defaults()
	}
	cfg, err := withOwn(cfg, o.upstreams)
	if err != nil {
		return nil, err
	}
	if len(cfg.Upstreams) == 0 {
		return nil, errors.New("no upstreams: the configuration has no upstream block and no in-process upstream was given")
	}
	if err := checkEndpoint(cfg, o.endpoint, o.oneshot); err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, log: o.log, version: o.version, onSignal: o.onSignal, oneshot: o.oneshot}
	b := build{log: o.log, version: o.version, inner: o.middleware, own: o.upstreams, dial: o.dial, endpoint: o.endpoint}
	if o.oneshot {
		if b.creds, err = newCredentials(cfg, o.log, nil); err != nil {
			return nil, err
		}
		p.creds = b.creds
		if p.e, err = buildEngine(ctx, cfg, b); err != nil {
			p.creds.close()
			return nil, err
		}
		p.e.attach(cfg.Filename, nil, nil, config.Listen{}, nil)
		return p, nil
	}
	ok := false
	defer func() {
		if !ok {
			p.closeParts()
		}
	}()
	if len(cfg.Listen) > 0 {
		p.http = true
		a, err := newAuthenticator(cfg, cfg.Listen[0], o.log)
		if err != nil {
			return nil, err
		}
		if a != nil { // a reload may replace it
			p.authn = new(auth.Switch)
			p.authn.Store(a)
		}
	}
	if p.tr, err = startTracing(ctx, cfg, o.version, o.log); err != nil {
		return nil, err
	}
	b.tr, b.log = p.tr, traceLogs(o.log, p.tr)
	p.log = b.log
	b.obs = newObservers(cfg, o.version)
	if b.creds, err = newCredentials(cfg, b.log, b.obs.credentials(cfg)); err != nil {
		return nil, err
	}
	p.creds = b.creds
	if p.http {
		l := cfg.Listen[0]
		if p.fwd, err = startForwarder(cfg, l.Address, l.MaxBodySize, l.SessionIdle, b.log); err != nil { // cluster.go; nil without a cluster block
			return nil, err
		}
		b.tasks, b.many = newTaskStore(p.fwd), true // cluster.go; nil without a cluster block
	}
	if p.e, err = buildEngine(ctx, cfg, b); err != nil {
		return nil, err
	}
	p.creds.listen(p.e.r.ClosePrincipal) // the other replicas' revocations, at once
	p.srv = p.e.newServer(cfg)
	p.e.attach(cfg.Filename, p.srv, p.authn, p.listen(), nil) // the admin listener, when the proxy serves
	ok = true
	return p, nil
}

// defaultVersion is the main module's version from the build information, else "dev".
func defaultVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// Router is the proxy's router: the merged catalogue (Tools, Prompts, Resources) and the
// calls routed through the chain (Call). A client served by the proxy sees the same.
func (p *Proxy) Router() *router.Router { return p.e.r }

// Vetter is what pins and screens the upstreams' definitions (package trust: its
// Status, Lock and Approved), nil when the configuration does neither. A reload that
// changes pin or screen replaces it.
func (p *Proxy) Vetter() *trust.Vetter { return p.e.trust.Load() }

// Start starts the upstreams now, rather than when the client initializes, and waits for
// their first handshake (at most the longest startup_timeout and 5 s). The error names
// those that did not start; the others serve.
func (p *Proxy) Start(ctx context.Context) error {
	r := p.e.r
	r.Start(ctx)
	wctx, cancel := context.WithTimeout(ctx, maxStartup(p.cfg)+5*time.Second)
	defer cancel()
	return r.WaitReady(wctx)
}

// Reload applies cfg while the proxy runs, or, with a nil cfg, its configuration file
// read again (see New), and returns the outcome; it never fails the proxy. cfg gets the
// checks Load runs. Only the difference applies: upstreams added start, removed ones
// drain and stop, changed ones are replaced make-before-break; the policy, the plugins
// and the auth block's keys switch between two calls; client sessions stay. What cannot
// change live (the listen, admin, telemetry and cluster blocks, the proxy block's naming)
// is named in RestartRequired and keeps its running value. A rejected reload changes
// nothing; its Errors say why. The in-process upstreams and middlewares stay.
func (p *Proxy) Reload(ctx context.Context, cfg *config.Config) *admin.Reload {
	return p.e.reload(ctx, "api", cfg)
}

// listen is the front end's listen block: the configuration's in HTTP mode, else the
// stdio front end's (no listener, nothing to authenticate on it).
func (p *Proxy) listen() config.Listen {
	if p.http {
		return p.cfg.Listen[0]
	}
	return config.Listen{InsecureNoAuth: true}
}

// serve marks the proxy served by method; an error when it cannot be (served already,
// closed, or built for the other front end).
func (p *Proxy) serve(method string, http bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return fmt.Errorf("proxy: %s: the proxy is closed", method)
	case p.served:
		return fmt.Errorf("proxy: %s: the proxy serves once, and has served", method)
	case p.oneshot:
		return fmt.Errorf("proxy: %s: a proxy built with Oneshot serves no client", method)
	case http && !p.http:
		return fmt.Errorf("proxy: %s: the configuration has no listen block (serve it with ServeStdio)", method)
	case !http && p.http:
		return fmt.Errorf("proxy: %s: the configuration has a listen block (serve it with ListenAndServe)", method)
	}
	p.served = true
	return nil
}

// startServing starts the admin listener and the reload watcher of a proxy about to
// serve, over authn (the front end's authenticator, nil for stdio).
func (p *Proxy) startServing(ctx context.Context, authn *auth.Switch) (drainAdmin func(), err error) {
	adm, own, stop, drain, err := startAdmin(p.cfg, p.cfg.Filename, p.e, authn, p.log)
	if err != nil {
		return nil, err
	}
	if own != nil { // stdio: the admin listener's own authenticator is the one reloads replace
		authn = own
	}
	p.e.attach(p.cfg.Filename, p.srv, authn, p.listen(), adm)
	stopWatch := p.e.watchReloads(ctx, p.onSignal)
	p.mu.Lock()
	p.stopAdmin, p.stopWatch = stop, stopWatch
	p.mu.Unlock()
	return drain, nil
}

// Close stops everything the proxy started: the upstreams (calls in flight end), the
// plugins, the audit trail, the admin listener, the reload watcher, the cluster's
// connections, and tracing (the spans still buffered are flushed, for up to 5 s). It
// returns once they have stopped; calling it again does nothing and returns the same.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return p.closeErr
	}
	p.closed = true
	p.mu.Unlock()
	err := p.closeParts()
	p.mu.Lock()
	p.closeErr = err
	p.mu.Unlock()
	return err
}

// closeParts closes what is set of the proxy, in the order serving them needs: the
// watcher and the admin listener, the router (the upstreams, then the engine's plugins,
// audit and buckets), the forwarder, tracing, the authenticator.
func (p *Proxy) closeParts() error {
	p.mu.Lock()
	stopWatch, stopAdmin := p.stopWatch, p.stopAdmin
	p.mu.Unlock()
	if stopWatch != nil {
		stopWatch()
	}
	if stopAdmin != nil {
		stopAdmin()
	}
	var err error
	if p.e != nil {
		err = p.e.r.Close()
	}
	if p.fwd != nil {
		p.fwd.Close()
	}
	if err2 := p.creds.close(); err2 != nil {
		p.log.Error().Err(err2).Msg("closing the credential store")
	}
	stopTracing(p.tr, p.log)
	if p.authn != nil {
		p.authn.Load().Close()
	}
	return err
}

// maxStartup is the longest startup timeout of cfg's upstreams.
func maxStartup(cfg *config.Config) time.Duration {
	var d time.Duration
	for _, u := range cfg.Upstreams {
		d = max(d, u.StartupTimeout)
	}
	return d
}
