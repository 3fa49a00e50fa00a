package proxy

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/admin"
	"github.com/mcp-proxy/mcp-proxy/auth"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/plugins"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/server"
	"github.com/mcp-proxy/mcp-proxy/telemetry"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// observers watch an engine for its operators. A nil *observers, or a nil field, watches
// nothing: the one-shot commands (tools, call) run without them.
type observers struct {
	metrics *metrics.Metrics
}

// newObservers makes the metrics of a binary of version when the configuration has an
// admin block, which serves them; nil otherwise (metrics nobody can read would only cost).
func newObservers(cfg *config.Config, version string) *observers {
	if cfg.Admin == nil {
		return nil
	}
	m := metrics.New(metrics.Options{Version: version})
	var names []string
	for _, u := range cfg.Upstreams {
		if !u.Disabled {
			names = append(names, u.Name)
		}
	}
	m.Upstreams(names...)
	return &observers{metrics: m}
}

// metricsOrNil returns the metrics, nil when nothing is measured.
func (o *observers) metricsOrNil() *metrics.Metrics {
	if o == nil {
		return nil
	}
	return o.metrics
}

// upstream is the observer of the shared upstreams (never a typed nil).
func (o *observers) upstream() upstream.Observer {
	if o == nil || o.metrics == nil {
		return nil
	}
	return o.metrics
}

// sessions is the observer of the front end's sessions (never a typed nil).
func (o *observers) sessions() server.SessionObserver {
	if o == nil || o.metrics == nil {
		return nil
	}
	return o.metrics
}

// watchPolicy and watchPlugins attach the observers to the policy chain and the plugin
// host, before they serve.
func (o *observers) watchPolicy(c *policy.Chain) {
	if o != nil && o.metrics != nil && c != nil {
		c.Observer = o.metrics
	}
}

func (o *observers) watchPlugins(h *plugins.Host) {
	if o != nil && o.metrics != nil {
		h.SetObserver(o.metrics)
	}
}

// around puts the metrics stages around the chain's stages: counting outermost (before
// the audit, so that it sees every outcome), the upstream leg's timer innermost (after
// the plugins).
func (o *observers) around(stages []router.Middleware) []router.Middleware {
	if o == nil || o.metrics == nil {
		return stages
	}
	out := make([]router.Middleware, 0, len(stages)+2)
	out = append(out, o.metrics.Middleware)
	out = append(out, stages...)
	return append(out, o.metrics.UpstreamLeg)
}

// localStages are the stages of the requests the proxy answers itself (lists,
// initialize: router.UseLocal): counted outermost, then a request span. They have no
// upstream leg, and neither the policy nor the plugins see them.
func localStages(tr *telemetry.Tracing, o *observers) []router.Middleware {
	var out []router.Middleware
	if o != nil && o.metrics != nil {
		out = append(out, o.metrics.Middleware)
	}
	if tr != nil {
		out = append(out, tr.Request)
	}
	return out
}

// startAdmin starts the admin listener of the configuration's admin block over the
// engine e; stop closes it (nil server and no-op functions when there is no admin block).
// authn is the front end's authenticator (nil in stdio mode, or without auth): with an
// auth block, the admin endpoints take its credentials, and in stdio mode the listener
// makes an authenticator of its own, returned for reloads to replace.
func startAdmin(cfg *config.Config, source string, e *engine, authn *auth.Switch,
	log zerolog.Logger) (srv *admin.Server, own *auth.Switch, stop func(), draining func(), err error) {
	o := e.obs
	if cfg.Admin == nil || o == nil || o.metrics == nil {
		return nil, nil, func() {}, func() {}, nil
	}
	if authn == nil && cfg.Auth != nil {
		// The stdio front end has no authenticator of its own: make one for the admin
		// listener. (Whether its address may go without auth is the config's check.)
		a, err := newAuthenticator(cfg, config.Listen{InsecureNoAuth: true}, log)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		own = new(auth.Switch)
		own.Store(a)
		authn = own
	}
	m := o.metrics
	m.SetCatalogue(e.r)
	info := configInfo(source, time.Now())
	m.ConfigLoaded(info.LoadedAt)
	opts := admin.Options{Address: cfg.Admin.Address, Engine: e.r, Metrics: m, Upstreams: upstreamConfigs(cfg), Config: info,
		Version: e.version, Log: log,
		Reload: func(ctx context.Context) *admin.Reload { return e.reload(ctx, "admin", nil) },
		Trust:  e.trustStatus, Approve: e.approve, Groups: cfg.Admin.Groups}
	if e.creds != nil {
		opts.Credentials = &credentialAdmin{c: e.creds, r: e.r}
	}
	if authn != nil {
		opts.Auth = authn.Middleware
	}
	srv = admin.New(opts)
	closeOwn := func() {
		if own != nil {
			own.Load().Close()
		}
	}
	if err := srv.Start(); err != nil {
		closeOwn()
		return nil, nil, nil, nil, err
	}
	return srv, own, func() {
		if err := srv.Close(); err != nil {
			log.Warn().Err(err).Msg("closing the admin listener")
		}
		closeOwn()
	}, srv.Drain, nil
}
