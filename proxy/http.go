package proxy

import (
	"context"
	"errors"
	stdlog "log"
	"net"
	"net/http"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/h1"
	"github.com/mcp-proxy/mcp-proxy/server"
)

// ListenAndServe serves the proxy over Streamable HTTP on the configuration's listen
// block until ctx ends, then drains: it stops accepting, lets requests in flight finish
// (up to 10 s), ends the sessions and closes the proxy. With an admin block, the admin
// listener serves meanwhile (its /readyz answers 503 while requests drain). The proxy
// must have a listen block; it serves once.
func (p *Proxy) ListenAndServe(ctx context.Context) error {
	if err := p.serve("ListenAndServe", true); err != nil {
		return err
	}
	defer p.Close()
	cfg, l, log, tr, fwd, authn, srv := p.cfg, p.cfg.Listen[0], p.log, p.tr, p.fwd, p.authn, p.srv
	drainAdmin, err := p.startServing(ctx, authn)
	if err != nil {
		return err
	}
	// Sessions and upstreams outlive ctx (the signal) until requests in flight are
	// drained; base ends them afterwards.
	base, endBase := context.WithCancel(context.WithoutCancel(ctx))
	defer endBase()
	host, _, _ := net.SplitHostPort(l.Address)
	ip := net.ParseIP(host)
	loopback := host == "localhost" || (ip != nil && ip.IsLoopback())
	ho := server.HTTPOptions{
		Path: l.Path, AllowedOrigins: l.AllowedOrigins, Loopback: loopback, MaxBody: l.MaxBodySize,
		KeepAlive: l.KeepAlive, SessionIdle: l.SessionIdle, MaxSessions: l.MaxSessions,
		RequestContext: httpTraceContext(tr),
		Endpoints:      endpointPaths(cfg),
	}
	forwarding(fwd, &ho) // cluster.go
	h := srv.NewHTTPHandler(base, ho)
	p.e.servePaths(h.SetEndpoints) // a reload moves them
	ln, err := net.Listen("tcp", l.Address)
	if err != nil {
		return err
	}
	if obs := p.e.obs; obs != nil {
		ln = obs.metrics.CountConnections(ln)
	}
	var handler http.Handler = h
	if authn != nil {
		handler = authn.Middleware(h) // every request, the RFC 9728 metadata excepted
	}
	handler = p.creds.handler(handler) // the per-user authorizations' links and callback: browsers, unauthenticated
	// The lean HTTP/1.1 server takes the hot path; what it does not read, net/http does.
	hs := &h1.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: stdlog.New(log.With().Str("component", "http").Logger(), "", 0)}
	if fwd != nil {
		// A replica behind a load balancer and other replicas' forwarders, which reuse
		// their connections: each idle one is answered once more (Connection: close)
		// rather than closed under a request (docs/cluster.md, rolling restarts).
		hs.IdleGrace = time.Second
	}
	log.Info().Str("config", cfg.Filename).Str("address", ln.Addr().String()).Str("path", l.Path).
		Int("upstreams", len(cfg.Upstreams)).Str("version", p.version).Msg("mcp-proxy serving on HTTP")
	for _, ep := range cfg.Endpoints {
		log.Info().Str("endpoint", ep.Name).Str("path", ep.Path).Str("sse", ep.Path+"/sse").Str("mode", ep.Mode).Msg("serving endpoint")
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		h.Close()
		return err
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down: draining HTTP requests")
	drainAdmin() // /readyz answers 503 while requests drain
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.Drain() // event streams end; requests in flight go on
	if fwd != nil {
		fwd.Drain() // and so do the streams it forwards to other replicas
	}
	err = hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn().Msg("requests still in flight after 10s; closing them")
		hs.Close()
	}
	h.Close() // ends the sessions and what they hold upstream
	if serr := <-errc; serr != nil && !errors.Is(serr, h1.ErrServerClosed) {
		return serr
	}
	return nil
}
