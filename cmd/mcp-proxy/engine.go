package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/user"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/server"
	"github.com/mcp-proxy/mcp-proxy/telemetry"
	"github.com/mcp-proxy/mcp-proxy/transport"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// loadConfig reads the config file, printing every diagnostic to stderr (each on its
// own line) on failure. The policy's checks (unknown upstreams, patterns, conditions)
// run in the same pass as the file's own, so one run reports every problem.
func loadConfig(path string, stderr io.Writer) (*config.Config, error) {
	if cfg, ok, err := loadClientConfig(path, stderr); ok { // a client's JSON file (import.go)
		return cfg, err
	}
	cfg, diags := config.LoadWithOptions(path, config.Options{Check: checkConfig})
	fmt.Fprint(stderr, config.FormatDiagnostics(diags))
	if diags.HasErrors() {
		return nil, exitError{code: 1, msg: fmt.Sprintf("%s: invalid configuration", path)}
	}
	return cfg, nil
}

// newEngine builds the router and its upstreams from the configuration, and starts the
// plugins (they are stages of the chain and present the catalogue from its first build);
// the upstreams do not start yet. manyClients says the front end serves many client
// sessions (HTTP): only then do per-client upstreams get a session per client (with one
// client the two coincide). tr, when not nil, traces every routed call: its middlewares
// go first and last in the chain; obs, when not nil, watches it (metrics).
func newEngine(ctx context.Context, cfg *config.Config, log zerolog.Logger, manyClients bool, tr *telemetry.Tracing, obs *observers) (*router.Router, error) {
	r, err := newRouter(cfg, log, manyClients, obs)
	if err != nil {
		return nil, err
	}
	host, err := startPlugins(ctx, cfg, r, log, obs)
	if err != nil {
		r.Close()
		return nil, err
	}
	store, closeStore, err := newBucketStore(cfg, log, obs) // cluster.go
	if err != nil {
		r.Close() // and the plugins
		return nil, err
	}
	r.OnClose(func() {
		if err := closeStore(); err != nil {
			log.Error().Err(err).Msg("closing the shared bucket store")
		}
	})
	chain, err := policy.BuildWith(cfg, log, policy.BuildOptions{Store: store})
	if err != nil { // policy.Check has vetted the configuration: this is not expected
		log.Error().Err(err).Msg("building the policy chain; every routed call will be refused")
		chain = &policy.Chain{Rules: denyAll}
	}
	obs.watchPolicy(chain)
	// One chain, in the documented order: audit → rules → limits → plugins (before hooks
	// in file order, after hooks in reverse) → upstream.
	var stages []router.Middleware
	if chain != nil {
		stages = chain.Stages()
	}
	if host != nil {
		stages = append(stages, host.Stages()...)
	}
	stages = tr.Wrap(stages)    // tracing: request span → the stages above → upstream span
	stages = obs.around(stages) // metrics: counted outermost, the upstream leg timed innermost
	if len(stages) > 0 {
		r.Use(stages...)
	}
	if chain != nil {
		r.SetGuard(chain)
		r.OnClose(func() {
			if err := chain.Close(); err != nil {
				log.Error().Err(err).Msg("closing the audit trail")
			}
		})
		log.Info().Bool("rules", chain.Rules != nil).Bool("limits", chain.Limits != nil).Bool("audit", chain.Audit != nil).
			Msg("policy chain active")
	}
	return r, nil
}

// denyAll refuses everything: what a policy that failed to build falls back to.
var denyAll, _ = policy.NewEngine(nil, false)

// guardOf returns the policy chain of an engine (nil when it has none).
func guardOf(r *router.Router) *policy.Chain {
	c, _ := r.Guard().(*policy.Chain)
	return c
}

// newRouter fails, starting nothing, when an upstream cannot be set up as configured (its
// OAuth client, say): an upstream is never started with less than its configuration asks.
func newRouter(cfg *config.Config, log zerolog.Logger, manyClients bool, obs *observers) (*router.Router, error) {
	r := router.New(router.Options{
		Separator:     cfg.Proxy.Separator,
		PageSize:      cfg.Proxy.PageSize,
		MaxNameLength: cfg.Proxy.MaxNameLength,
		CursorKey:     clusterCursorKey(cfg), // cluster.go: shared by the replicas; nil without a cluster key
	}, log)
	var setupErrs []error
	for _, uc := range cfg.Upstreams {
		if uc.Disabled {
			log.Info().Str("upstream", uc.Name).Msg("upstream disabled in config; not started")
			continue
		}
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
			ClientVersion:  buildVersion(),
			Observer:       obs.upstream(),
		}
		if uc.URL != "" {
			o, err := newOAuth(cfg, uc, log)
			if err != nil {
				setupErrs = append(setupErrs, fmt.Errorf("upstream %q: configuring OAuth: %w", uc.Name, err))
				continue
			}
			spec.OAuth = o
		}
		u := upstream.New(spec, log, r.Events())
		newInstance := func(caps json.RawMessage, events upstream.Events) router.Upstream {
			s := spec
			s.ClientCapabilities = caps
			s.Observer = nil // a client's own session starts and stops with it: not the upstream's state
			return upstream.New(s, log.With().Bool("per_client", true).Logger(), events)
		}
		if uc.Session != config.SessionPerClient || !manyClients {
			r.Add(u, uc.Namespace)
			if manyClients && uc.URL != "" {
				// A shared legacy HTTP session per distinct set of client capabilities.
				r.SetCapabilitySessions(uc.Name, router.PerClient{New: newInstance})
			}
			continue
		}
		r.AddPerClient(u, uc.Namespace, router.PerClient{
			New:         newInstance,
			MaxSessions: uc.MaxSessions,
			IdleTimeout: uc.IdleTimeout,
		})
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

func proxyVersion(cfg *config.Config) string {
	if cfg.Proxy.Version != "" {
		return cfg.Proxy.Version
	}
	return buildVersion()
}

// newServer is the front end for cfg over r; obs, when not nil, watches its sessions.
func newServer(cfg *config.Config, r *router.Router, log zerolog.Logger, obs *observers) *server.Server {
	return server.New(r, server.Options{
		Observer:     obs.sessions(),
		Principal:    stdioPrincipal(cfg),
		Name:         proxyName(cfg),
		Version:      proxyVersion(cfg),
		Instructions: cfg.Proxy.Instructions,
		ReadyTimeout: maxStartup(cfg) + 5*time.Second,
	}, log)
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
	return &principal.Principal{Name: name, Groups: cfg.Proxy.PrincipalGroups, Via: "stdio"}
}
