package proxy

import (
	"context"
	"io"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// The engine's entry points as the command called them in package main; the package's
// API replaces them.

// Version is the version the proxy reports (serverInfo, clientInfo, metrics, logs).
var Version = "dev"

func buildVersion() string { return Version }

// LoadConfig reads and checks the configuration file at path, its diagnostics to stderr.
func LoadConfig(path string, stderr io.Writer) (*config.Config, error) {
	return loadConfig(path, stderr)
}

// ServeHTTP serves cfg over Streamable HTTP until ctx ends.
func ServeHTTP(ctx context.Context, cfg *config.Config, source string, log zerolog.Logger) error {
	return serveHTTP(ctx, cfg, source, log)
}

// ServeStdio serves cfg to one client on stdin and stdout.
func ServeStdio(ctx context.Context, cfg *config.Config, source string, log zerolog.Logger, stdin io.Reader, stdout io.Writer) error {
	return serveStdio(ctx, cfg, source, log, stdin, stdout)
}

// NewEngine builds the router of cfg for one client, neither traced nor measured.
func NewEngine(ctx context.Context, cfg *config.Config, log zerolog.Logger) (*router.Router, error) {
	return newEngine(ctx, cfg, log, false, nil, nil)
}

// ValidatePlugins starts every configured plugin to check its config block.
func ValidatePlugins(ctx context.Context, cfg *config.Config) hcl.Diagnostics {
	return validatePlugins(ctx, cfg)
}

// MaxStartup is the longest startup timeout of cfg's upstreams.
func MaxStartup(cfg *config.Config) time.Duration { return maxStartup(cfg) }
