package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// headerFlags collects repeated --header NAME=VALUE flags.
type headerFlags map[string]string

func (h headerFlags) String() string { return fmt.Sprint(map[string]string(h)) }

func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	h[strings.TrimSpace(name)] = value
	return nil
}

// cmdBridge serves one remote Streamable HTTP server on stdin/stdout, without a config
// file: the same engine as run, with one upstream and its names unprefixed.
func cmdBridge(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("bridge", stderr, &c)
	url := fs.String("url", "", "expose the Streamable HTTP endpoint at `URL` on stdin/stdout")
	listen := fs.String("listen", "", "serve the command after -- over Streamable HTTP at `HOST:PORT`")
	path := fs.String("path", "/mcp", "with --listen: the MCP endpoint's `PATH`")
	insecure := fs.Bool("insecure-no-auth", false, "with --listen on a non-loopback address: serve without authentication (a gateway in front authenticates)")
	headers := headerFlags{}
	fs.Var(headers, "header", "`NAME=VALUE` sent to the server on every request (repeatable)")
	timeout := fs.Duration("timeout", 60*time.Second, "give up on a request after `DURATION`")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *listen != "" {
		if *url != "" || len(pos) == 0 {
			return usageErrorf("bridge", "--listen takes the command to serve after --, and no --url")
		}
		log, err := c.logger(stderr)
		if err != nil {
			return err
		}
		cfg := bridgeConfig(config.Upstream{Name: "local", Command: pos}, *timeout)
		l := config.DefaultListen()
		l.Address, l.Path, l.InsecureNoAuth = *listen, *path, *insecure
		cfg.Listen = []config.Listen{l}
		cfg.Filename = "bridge " + strings.Join(pos, " ") // what the logs name it
		return serve(ctx, cfg, log, stdin, stdout)
	}
	if *url == "" {
		return usageErrorf("bridge", "give --url URL, or --listen HOST:PORT and a command after --")
	}
	if len(pos) > 0 {
		return usageErrorf("bridge", "--url takes no command (got %q); a command is served with --listen", pos)
	}
	if !strings.HasPrefix(*url, "http://") && !strings.HasPrefix(*url, "https://") {
		return usageErrorf("bridge", "--url must be an http:// or https:// address, got %q", *url)
	}
	log, err := c.logger(stderr)
	if err != nil {
		return err
	}
	cfg := bridgeConfig(config.Upstream{Name: "remote", URL: *url, Headers: headers, Transport: config.TransportAuto}, *timeout)
	cfg.Filename = "bridge " + *url // what the logs name it
	return serve(ctx, cfg, log, stdin, stdout)
}

// bridgeConfig is the configuration of a bridge: one upstream, names unprefixed,
// initialize waiting for it, everything else at its defaults.
func bridgeConfig(u config.Upstream, timeout time.Duration) *config.Config {
	u.Namespace, u.Timeout, u.StartupTimeout = "", timeout, config.DefaultStartupTimeout
	u.MaxMessageSize, u.Protocol = config.DefaultMaxMessageSize, config.ProtocolAuto
	if u.Cwd == "" {
		u.Cwd = "."
	}
	return &config.Config{
		Proxy: config.Proxy{Name: config.DefaultName, Separator: config.DefaultSeparator,
			PageSize: config.DefaultPageSize, MaxNameLength: config.DefaultMaxNameLength,
			// One upstream: initialize waits for it (up to its startup), as a direct
			// connection to it would.
			ReadyGrace: u.StartupTimeout + 5*time.Second},
		Upstreams: []config.Upstream{u},
	}
}
