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
	url := fs.String("url", "", "the Streamable HTTP endpoint to expose on stdin/stdout")
	headers := headerFlags{}
	fs.Var(headers, "header", "NAME=VALUE sent to the server on every request (repeatable)")
	timeout := fs.Duration("timeout", 60*time.Second, "per request")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *url == "" || len(pos) > 0 {
		return exitError{code: 2, msg: "usage: mcp-proxy bridge --url URL [--header NAME=VALUE]...  (serving a stdio server over HTTP needs the HTTP front end, not built yet)"}
	}
	if !strings.HasPrefix(*url, "http://") && !strings.HasPrefix(*url, "https://") {
		return exitError{code: 2, msg: fmt.Sprintf("--url must be an http:// or https:// address, got %q", *url)}
	}
	log, err := c.logger(stderr)
	if err != nil {
		return err
	}
	cfg := &config.Config{
		Proxy: config.Proxy{Name: config.DefaultName, Separator: config.DefaultSeparator,
			PageSize: config.DefaultPageSize, MaxNameLength: config.DefaultMaxNameLength},
		Upstreams: []config.Upstream{{
			Name: "remote", URL: *url, Headers: headers, Transport: config.TransportAuto,
			Namespace: "", Timeout: *timeout, StartupTimeout: config.DefaultStartupTimeout,
			MaxMessageSize: config.DefaultMaxMessageSize, Protocol: config.ProtocolAuto,
		}},
	}
	return serveStdio(ctx, cfg, "bridge "+*url, log, stdin, stdout)
}
