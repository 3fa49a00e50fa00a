package proxy

import (
	"context"
	"io"
	"time"
)

// ServeStdio serves the proxy to one client that writes its requests to in and reads
// the proxy's messages from out (newline-delimited JSON-RPC, as MCP's stdio transport
// is), until the client closes in or ctx ends; then it closes the proxy. The upstreams
// start when the client initializes, so that they are told exactly the client
// capabilities (roots, sampling, elicitation) the proxy can relay. With an admin block,
// the admin listener serves meanwhile. The proxy must have no listen block; it serves
// once.
func (p *Proxy) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	if err := p.serve("ServeStdio", false); err != nil {
		return err
	}
	defer p.Close()
	if _, err := p.startServing(ctx, nil); err != nil {
		return err
	}
	log := p.log
	log.Info().Str("config", p.cfg.Filename).Int("upstreams", len(p.cfg.Upstreams)).Str("version", p.version).
		Msg("mcp-proxy serving on stdio")
	err := p.srv.ServeStream(ctx, in, out)
	log.Info().Msg("client gone; shutting down")
	start := time.Now()
	if cerr := p.e.r.Close(); cerr != nil {
		log.Error().Err(cerr).Msg("stopping upstreams")
	}
	log.Info().Dur("took", time.Since(start)).Msg("upstreams stopped")
	return err
}
