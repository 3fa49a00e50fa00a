package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/user"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/admin"
	"github.com/mcp-proxy/mcp-proxy/auth"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/plugins"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/sandbox"
	"github.com/mcp-proxy/mcp-proxy/server"
	"github.com/mcp-proxy/mcp-proxy/telemetry"
	"github.com/mcp-proxy/mcp-proxy/transport"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// build is what an engine is built with besides its configuration.
type build struct {
	log     zerolog.Logger
	version string // the binary's: serverInfo.version by default, the clientInfo upstream
	// many says the front end serves many client sessions (HTTP): only then do
	// per-client upstreams get a session per client (with one client the two coincide).
	many  bool
	tr    *telemetry.Tracing // when not nil, traces every routed call
	obs   *observers         // when not nil, watches the engine (metrics)
	tasks router.TaskStore   // the router's, when shared (nil: in memory); its caller closes it
	// inner are the program's own middlewares (WithMiddleware): the chain's last stages
	// before the upstream span.
	inner []router.Middleware
	// own are the program's in-process upstreams (WithUpstream), as blocks added to every
	// configuration the engine runs; dial opens their links, by name.
	own  []config.Upstream
	dial map[string]func(context.Context) (transport.Link, error)
	// endpoint is the endpoint the stdio front end serves ("": the whole catalogue).
	endpoint string
	// creds are the per-user credentials' store and providers (credentials.go); they
	// outlive reloads.
	creds *credentials
}

// withOwn is cfg with the in-process upstreams own added after its upstream blocks; an
// upstream block of the same name is an error.
func withOwn(cfg *config.Config, own []config.Upstream) (*config.Config, error) {
	if len(own) == 0 {
		return cfg, nil
	}
	out := *cfg
	out.Upstreams = slices.Clip(cfg.Upstreams)
	for _, o := range own {
		if slices.ContainsFunc(cfg.Upstreams, func(u config.Upstream) bool { return u.Name == o.Name }) {
			return nil, fmt.Errorf("in-process upstream %q: the configuration has an upstream block of that name", o.Name)
		}
		out.Upstreams = append(out.Upstreams, o)
	}
	return &out, nil
}

// engine is the part of a running proxy that a configuration makes and a reload changes
// (reload.go): the router with its upstreams, and the chain every routed call passes.
type engine struct {
	build
	r          *router.Router
	store      policy.BucketStore // the rate limits' buckets: they outlive reloads
	closeStore func() error

	mu      sync.Mutex // serialises reloads; guards the fields below
	cfg     *config.Config
	chain   *policy.Chain
	host    *plugins.Host
	gates   map[string]*gatedObserver // by upstream name: the running upstream's observer
	auth    *auth.Switch              // the front end's authenticator (nil without one)
	srv     *server.Server            // the front end, whose live settings a reload changes
	listen  config.Listen             // the front end's listen block (HTTP mode)
	paths   func(map[string]string)   // serves the endpoints at their paths (HTTP mode); nil before serving
	admin   *admin.Server             // nil without an admin listener
	source  string                    // the configuration file
	retired map[*sync.Once]func()     // closes what reloads replaced, at the latest when the engine closes
	// watchSet tells watchReloads that a reload turned proxy.watch on or off (capacity 1).
	watchSet chan struct{}
	closed   bool

	trust vetterBox                      // pinning and screening (trust.go); a reload replaces it
	audit atomic.Pointer[policy.Auditor] // the chain's audit trail, for the vetter's records
}

// buildEngine builds the router and its upstreams from the configuration, and starts
// the plugins (they are stages of the chain and present the catalogue from its first
// build); the upstreams do not start yet. b.tr's middlewares go first and last in the
// chain. The caller closes the router, which closes the rest.
func buildEngine(ctx context.Context, cfg *config.Config, b build) (*engine, error) {
	e := &engine{build: b, cfg: cfg, gates: map[string]*gatedObserver{}, watchSet: make(chan struct{}, 1)}
	log, obs, tr := b.log, b.obs, b.tr
	// The rate limits' buckets outlive reloads: shared through Redis with a cluster
	// block (cluster.go), else in memory.
	store, closeStore, err := newBucketStore(cfg, log, obs)
	if err != nil {
		return nil, err
	}
	if store == nil {
		mem := policy.NewMemoryBuckets(0, 0)
		store, closeStore = mem, func() error { mem.Close(); return nil }
	}
	e.store, e.closeStore = store, closeStore
	r, err := e.newRouter(cfg)
	if err != nil {
		closeStore()
		return nil, err
	}
	e.r = r
	r.OnClose(e.close)
	if err := e.setupTrust(cfg); err != nil {
		r.Close()
		return nil, err
	}
	host, err := startPlugins(ctx, cfg, r, log, obs)
	if err != nil {
		r.Close()
		return nil, err
	}
	chain, err := policy.BuildWith(cfg, log, policy.BuildOptions{Store: e.store})
	if err != nil { // policy.Check has vetted the configuration: this is not expected
		log.Error().Err(err).Msg("building the policy chain; every routed call will be refused")
		chain = &policy.Chain{Rules: denyAll}
	}
	e.chain, e.host = chain, host
	if host != nil {
		if p := host.Presenter(); p != nil {
			r.SetPresenter(p)
		}
	}
	if len(cfg.Endpoints) > 0 {
		if err := r.SetEndpoints(endpointsOf(cfg, host)); err != nil { // config has vetted them: not expected
			r.Close()
			return nil, fmt.Errorf("endpoints: %w", err)
		}
	}
	e.install()
	if local := localStages(tr, obs); len(local) > 0 {
		r.UseLocal(local...) // lists and initialize: counted and traced too (not changed by a reload)
	}
	if chain != nil {
		r.SetGuard(chain)
		log.Info().Bool("rules", chain.Rules != nil).Bool("limits", chain.Limits != nil).Bool("audit", chain.Audit != nil).
			Msg("policy chain active")
	}
	return e, nil
}

// install makes the chain of e.chain and e.host the router's, in the documented order:
// metrics → request span → audit → rules → limits → plugins (before hooks in file order,
// after hooks in reverse) → the program's middlewares → upstream span → upstream leg. A call keeps the chain it
// started with; the next one takes the new.
func (e *engine) install() {
	e.obs.watchPolicy(e.chain)
	if e.chain != nil {
		e.audit.Store(e.chain.Audit)
	} else {
		e.audit.Store(nil)
	}
	if e.tr != nil && e.chain != nil {
		e.chain.TraceIDs = telemetry.IDs // audit records name the call's trace
	}
	var stages []router.Middleware
	var refusals router.RefusalHook
	if e.chain != nil {
		stages = e.chain.Stages()
		refusals = e.chain.RefusalHook() // the audit's records of requests refused before routing
	}
	e.r.UseRefusals(refusals)
	// The proxy's own tools (search_tools): counted and traced as the lists are, then
	// audited and decided on by the policy as calls are; not the plugins' to see or
	// rewrite, nor the program's middlewares' (they have no upstream).
	e.r.UseLocalTools(append(localStages(e.tr, e.obs), stages...)...)
	if e.host != nil {
		stages = append(stages, e.host.Stages()...)
	}
	stages = append(stages, e.inner...)
	stages = e.tr.Wrap(stages)    // tracing: request span → the stages above → upstream span
	stages = e.obs.around(stages) // metrics: counted outermost, the upstream leg timed innermost
	e.r.Use(stages...)
}

// close ends what the engine holds besides the upstreams (the router's OnClose): the
// plugins, the audit trail, the buckets, and whatever reloads replaced.
func (e *engine) close() {
	e.mu.Lock()
	e.closed = true
	retired := e.retired
	e.retired = nil
	chain, host := e.chain, e.host
	e.mu.Unlock()
	for once, f := range retired {
		once.Do(f)
	}
	if host != nil {
		if err := host.Close(); err != nil {
			e.log.Error().Err(err).Msg("stopping the plugins")
		}
	}
	if chain != nil {
		if err := chain.Close(); err != nil {
			e.log.Error().Err(err).Msg("closing the audit trail")
		}
	}
	if err := e.closeStore(); err != nil {
		e.log.Error().Err(err).Msg("closing the shared bucket store")
	}
}

// denyAll refuses everything: what a policy that failed to build falls back to.
var denyAll, _ = policy.NewEngine(nil, false)

// newRouter fails, starting nothing, when an upstream cannot be set up as configured (its
// OAuth client, say): an upstream is never started with less than its configuration asks.
func (e *engine) newRouter(cfg *config.Config) (*router.Router, error) {
	r := router.New(router.Options{
		Separator:     cfg.Proxy.Separator,
		PageSize:      cfg.Proxy.PageSize,
		MaxNameLength: cfg.Proxy.MaxNameLength,
		CursorKey:     clusterCursorKey(cfg), // cluster.go: shared by the replicas; nil without a cluster key
		StartWait:     maxStartup(cfg) + 5*time.Second,
		Tasks:         e.tasks, // shared by the replicas in a cluster (http.go); nil in memory
		Ranker:        builtinRanker,
	}, e.log)
	var setupErrs []error
	for _, uc := range cfg.Upstreams {
		if uc.Disabled {
			e.log.Info().Str("upstream", uc.Name).Msg("upstream disabled in config; not started")
			continue
		}
		m, gate, err := e.member(cfg, uc, r.Events())
		e.gates[uc.Name] = gate
		if err != nil {
			setupErrs = append(setupErrs, err)
			continue
		}
		switch {
		case m.PerClient != nil:
			r.AddPerClient(m.Up, m.Namespace, *m.PerClient)
		default:
			r.Add(m.Up, m.Namespace)
			if m.Capabilities != nil {
				r.SetCapabilitySessions(uc.Name, *m.Capabilities)
			}
		}
	}
	if len(setupErrs) == 0 { // an upstream left out already fails the setup
		if err := applyFilters(r, cfg); err != nil {
			setupErrs = append(setupErrs, err)
		}
	}
	if len(setupErrs) > 0 {
		r.Close()
		return nil, errors.Join(setupErrs...)
	}
	return r, nil
}

// member makes the upstream of one enabled upstream block, as the router takes it.
func (e *engine) member(cfg *config.Config, uc config.Upstream, events upstream.Events) (router.Member, *gatedObserver, error) {
	log := e.log
	gate := &gatedObserver{o: e.obs.upstream()}
	spec := upstream.Spec{
		Name:           uc.Name,
		Command:        uc.Command,
		Env:            uc.Env,
		Dir:            uc.Cwd,
		Timeout:        uc.Timeout,
		StartupTimeout: uc.StartupTimeout,
		MaxMessage:     uc.MaxMessageSize,
		Protocol:       uc.Protocol,
		URL:            uc.URL,
		Headers:        uc.Headers,
		Transport:      uc.Transport,
		ClientName:     proxyName(cfg),
		ClientVersion:  e.version,
		Dial:           e.dial[uc.Name], // an in-process upstream's (nil for the configured ones)
	}
	if gate.o != nil {
		spec.Observer = gate
	}
	if sb := uc.Sandbox; sb != nil { // fail closed: a sandbox this machine cannot enforce starts nothing
		spec.Sandbox = &sandbox.Policy{Read: sb.Read, Write: sb.Write, Network: sb.Network, Ports: sb.Ports}
		if err := sandbox.Check(spec.Sandbox); err != nil {
			return router.Member{}, gate, fmt.Errorf("upstream %q: %w", uc.Name, err)
		}
	}
	if uc.URL != "" {
		o, err := newOAuth(cfg, uc, log)
		if err != nil {
			return router.Member{}, gate, fmt.Errorf("upstream %q: configuring OAuth: %w", uc.Name, err)
		}
		spec.OAuth = o
	}
	prov, err := e.creds.provider(uc, proxyName(cfg))
	if err != nil {
		return router.Member{}, gate, fmt.Errorf("upstream %q: configuring its credentials: %w", uc.Name, err)
	}
	m := router.Member{Up: upstream.New(catalogueSpec(spec, uc, prov, e.creds), log, events), Namespace: uc.Namespace}
	if !isZeroFilter(&uc.Tools) || !isZeroFilter(&uc.Prompts) {
		m.Filter = &router.Filter{Tools: selectionOf(&uc.Tools), Prompts: selectionOf(&uc.Prompts)}
	}
	newInstance := func(caps json.RawMessage, events upstream.Events) router.Upstream {
		s := spec
		s.ClientCapabilities = caps
		s.Observer = nil // a client's own session starts and stops with it: not the upstream's state
		return upstream.New(s, log.With().Bool("per_client", true).Logger(), events)
	}
	switch {
	case uc.Session == config.SessionPerPrincipal:
		m.PerClient = e.perPrincipal(uc, spec, prov, log)
	case uc.Session == config.SessionPerClient && e.many:
		m.PerClient = &router.PerClient{New: newInstance, MaxSessions: uc.MaxSessions, IdleTimeout: uc.IdleTimeout}
	case e.many && uc.URL != "":
		// A shared legacy HTTP session per distinct set of client capabilities.
		m.Capabilities = &router.PerClient{New: newInstance}
	case e.many:
		// A shared child process per era and (legacy) set of client capabilities in use:
		// every client gets what it declared, whoever came first.
		m.Capabilities = &router.PerClient{New: newInstance, Eras: true}
	}
	return m, gate, nil
}

// gatedObserver passes an upstream's events on until it is shut: the observer of an
// upstream a reload replaced must not report its stopping as the state of its successor.
type gatedObserver struct {
	o    upstream.Observer
	shut atomic.Bool
}

func (g *gatedObserver) UpstreamEvent(ev upstream.Event) {
	if !g.shut.Load() {
		g.o.UpstreamEvent(ev)
	}
}

// newOAuth makes the OAuth client of an HTTP upstream (one per upstream block: its
// token outlives connections, restarts and per-client instances). Without an oauth block
// the upstream is still authorized on a 401 (discovery and dynamic client registration,
// as the MCP specification expects of clients), unless its headers carry an
// Authorization header: then those are its credentials. Nil when it opts out.
func newOAuth(cfg *config.Config, uc config.Upstream, log zerolog.Logger) (*transport.OAuth, error) {
	oc := transport.OAuthConfig{ClientName: proxyName(cfg)}
	switch o := uc.OAuth; {
	case o != nil:
		oc.Disabled, oc.ClientID, oc.ClientSecret, oc.Issuer = o.Disabled, o.ClientID, o.ClientSecret, o.Issuer
		oc.ClientMetadataURL, oc.Scopes, oc.RedirectPort = o.ClientMetadataURL, o.Scopes, o.RedirectPort
		oc.Grant, oc.AuthorizationTimeout = o.Grant, o.AuthorizationTimeout
		oc.TokenFile, oc.OpenBrowser = o.TokenFile, o.OpenBrowser
	default:
		oc.OpenBrowser = true
		for k := range uc.Headers {
			if strings.EqualFold(k, "Authorization") {
				oc.Disabled = true
			}
		}
	}
	if oc.Disabled {
		return nil, nil
	}
	return transport.NewOAuth(uc.URL, oc, log.With().Str("upstream", uc.Name).Logger())
}

func proxyName(cfg *config.Config) string {
	if cfg.Proxy.Name != "" {
		return cfg.Proxy.Name
	}
	return "mcp-proxy"
}

func proxyVersion(cfg *config.Config, version string) string {
	if cfg.Proxy.Version != "" {
		return cfg.Proxy.Version
	}
	return version
}

// readyGrace is how long a client's initialize waits for upstreams still starting:
// proxy.ready_grace (negative: not at all), never longer than the slowest startup.
func readyGrace(cfg *config.Config) time.Duration {
	if cfg.Proxy.ReadyGrace <= 0 {
		return -1
	}
	return min(cfg.Proxy.ReadyGrace, maxStartup(cfg)+5*time.Second)
}

// newServer is the front end for cfg over the engine's router; e.obs, when not nil,
// watches its sessions.
func (e *engine) newServer(cfg *config.Config) *server.Server {
	l := e.liveSettings(cfg)
	return server.New(e.r, server.Options{
		Observer:     e.obs.sessions(),
		Principal:    stdioPrincipal(cfg),
		Name:         l.Name,
		Version:      l.Version,
		Instructions: l.Instructions,
		ReadyTimeout: l.ReadyTimeout,
		StateKey:     clusterStateKey(cfg), // cluster.go: shared by the replicas; nil without a cluster key
		Endpoint:     e.endpoint,

		MaxClientBuffer:   l.MaxClientBuffer,
		MaxClientInFlight: l.MaxClientInFlight,
	}, e.log)
}

// liveSettings are the front end's settings under cfg that a reload applies
// (server.Reconfigure); the ready grace depends on the upstreams' startup timeouts too.
func (e *engine) liveSettings(cfg *config.Config) server.Live {
	return server.Live{
		Name:              proxyName(cfg),
		Version:           proxyVersion(cfg, e.version),
		Instructions:      cfg.Proxy.Instructions,
		ReadyTimeout:      readyGrace(cfg),
		MaxClientBuffer:   cfg.Proxy.MaxClientBuffer,
		MaxClientInFlight: cfg.Proxy.MaxClientInFlight,
	}
}

// stdioPrincipal is the one user of a stdio front end: proxy.principal, or the OS user.
func stdioPrincipal(cfg *config.Config) *principal.Principal {
	name := cfg.Proxy.Principal
	if name == "" {
		if u, err := user.Current(); err == nil && u.Username != "" {
			name = u.Username
		} else {
			name = "local"
		}
	}
	return (&principal.Principal{Name: name, Groups: cfg.Proxy.PrincipalGroups, Via: principal.ViaStdio}).Identify()
}
