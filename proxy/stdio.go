package proxy

import (
	"context"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// serveStdio serves the configured upstreams to one client on stdin/stdout.
func serveStdio(ctx context.Context, cfg *config.Config, source string, log zerolog.Logger, stdin io.Reader, stdout io.Writer) error {
	// The upstreams start when the client initializes, so that they are told exactly the
	// client capabilities (roots, sampling, elicitation) the proxy can relay.
	tr, err := startTracing(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopTracing(tr, log) // after the upstreams have stopped: the last calls' spans are ended
	log = traceLogs(log, tr)
	obs := newObservers(cfg)
	e, err := buildEngine(ctx, cfg, log, false, tr, obs)
	if err != nil {
		return err
	}
	r := e.r
	defer r.Close()
	srv := newServer(cfg, r, log, obs)
	adm, authn, stopAdmin, _, err := startAdmin(cfg, source, e, nil, log)
	if err != nil {
		return err
	}
	defer stopAdmin()
	e.attach(source, srv, authn, config.Listen{InsecureNoAuth: true}, adm)
	e.watchReloads(ctx)
	log.Info().Str("config", source).Int("upstreams", len(cfg.Upstreams)).Str("version", buildVersion()).
		Msg("mcp-proxy serving on stdio")
	err = srv.ServeStream(ctx, stdin, stdout)
	log.Info().Msg("client gone; shutting down")
	start := time.Now()
	if cerr := r.Close(); cerr != nil {
		log.Error().Err(cerr).Msg("stopping upstreams")
	}
	log.Info().Dur("took", time.Since(start)).Msg("upstreams stopped")
	return err
}

func maxStartup(cfg *config.Config) time.Duration {
	var d time.Duration
	for _, u := range cfg.Upstreams {
		d = max(d, u.StartupTimeout)
	}
	return d
}
