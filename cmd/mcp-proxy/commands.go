package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/sandbox"
)

// cmdRun serves the merged upstreams to one client on stdin/stdout.
func cmdRun(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("run", stderr, &c)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("run", "takes no arguments (got %q)", pos)
	}
	log, err := c.logger(stderr)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(c.config, stderr)
	if err != nil {
		return err
	}
	if path := os.Getenv("MCP_PROXY_CPUPROFILE"); path != "" {
		stop, err := startCPUProfile(path)
		if err != nil {
			return err
		}
		defer stop()
	}
	if addr := os.Getenv(debugAddrEnv); addr != "" {
		stop, err := startDebugServer(addr, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	if len(cfg.Listen) > 0 {
		return serveHTTP(ctx, cfg, c.config, log)
	}
	return serveStdio(ctx, cfg, c.config, log, stdin, stdout)
}

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

// cmdValidate checks a configuration file.
func cmdValidate(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("validate", stderr, &c)
	skipPlugins := fs.Bool("skip-plugins", false, "do not start the plugins to check their sha256 and config blocks")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 1 && c.config == "proxy.hcl" {
		c.config = pos[0]
	}
	cfg, err := loadConfig(c.config, stderr)
	if err != nil {
		return err
	}
	// Plugins are started to decode their config blocks against their own schemas.
	var diags hcl.Diagnostics
	if !*skipPlugins {
		diags = validatePlugins(context.Background(), cfg)
	}
	diags = append(diags, explainSandboxes(cfg, stdout)...)
	fmt.Fprint(stderr, config.FormatDiagnostics(diags))
	if diags.HasErrors() {
		return exitError{code: 1, msg: fmt.Sprintf("%s: invalid configuration", c.config)}
	}
	if len(cfg.Plugins) > 0 {
		fmt.Fprintf(stdout, "%s: OK (%d upstreams, %d plugins)\n", c.config, len(cfg.Upstreams), len(cfg.Plugins))
		return nil
	}
	fmt.Fprintf(stdout, "%s: OK (%d upstreams)\n", c.config, len(cfg.Upstreams))
	return nil
}

// explainSandboxes prints what will be enforced on this machine for each enabled
// upstream's sandbox block, and reports a block this machine cannot enforce as the
// error run would fail with.
func explainSandboxes(cfg *config.Config, stdout io.Writer) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, u := range cfg.Upstreams {
		sb := u.Sandbox
		if sb == nil || u.Disabled {
			continue
		}
		var env []string
		for k, v := range u.Env {
			env = append(env, k+"="+v)
		}
		sort.Strings(env)
		p := &sandbox.Policy{Read: sb.Read, Write: sb.Write, Network: sb.Network, Ports: sb.Ports}
		lines, err := sandbox.Explain(p, u.Command, env)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Sandbox cannot be enforced",
				Detail: fmt.Sprintf("Upstream %q: %v.", u.Name, err), Subject: sb.DeclRange.Ptr()})
			continue
		}
		fmt.Fprintf(stdout, "upstream %q: sandbox enforced on this machine:\n", u.Name)
		for _, l := range lines {
			fmt.Fprintf(stdout, "  %s\n", l)
		}
	}
	return diags
}

// startEngine starts the upstreams for a one-shot command and waits for their first
// handshake; failures are logged and reported, the rest keeps working.
func startEngine(ctx context.Context, c *common, stderr io.Writer) (*router.Router, error, error) {
	log, err := c.logger(stderr)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := loadConfig(c.config, stderr)
	if err != nil {
		return nil, nil, err
	}
	r, err := newEngine(ctx, cfg, log, false, nil, nil) // the CLI is neither traced nor measured
	if err != nil {
		return nil, nil, err
	}
	r.Start(ctx)
	wctx, cancel := context.WithTimeout(ctx, maxStartup(cfg)+5*time.Second)
	defer cancel()
	return r, r.WaitReady(wctx), nil
}

type toolRow struct {
	Name         string `json:"name"`
	Upstream     string `json:"upstream"`
	OriginalName string `json:"original_name"`
	Description  string `json:"description,omitempty"`
}

// cmdTools prints the merged tool catalogue.
func cmdTools(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("tools", stderr, &c)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	as := fs.String("as", "", "show only the tools `PRINCIPAL` may see under the policy")
	groups := fs.String("groups", "", "with --as: the principal's `GROUPS`, comma-separated (an API key's groups are added)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("tools", "takes no arguments (got %q)", pos)
	}
	r, startErr, err := startEngine(ctx, &c, stderr)
	if err != nil {
		return err
	}
	defer r.Close()
	tools := r.Tools()
	if *as != "" {
		cfg, err := loadConfig(c.config, stderr)
		if err != nil {
			return err
		}
		var gs []string
		for _, g := range strings.Split(*groups, ",") {
			if g = strings.TrimSpace(g); g != "" {
				gs = append(gs, g)
			}
		}
		tools = visibleTools(r, principalFor(cfg, *as, gs), tools)
	}
	rows := make([]toolRow, len(tools))
	for i, t := range tools {
		rows[i] = toolRow{Name: t.Name, Upstream: t.Upstream, OriginalName: t.OriginalName, Description: t.Description}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tUPSTREAM\tDESCRIPTION")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, r.Upstream, firstLine(r.Description, 80))
		}
		tw.Flush()
	}
	if startErr != nil {
		return exitError{code: 1, msg: "some upstreams did not start: " + startErr.Error()}
	}
	return nil
}

func firstLine(s string, max int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if len(s) > max {
		s = s[:max-1] + "…"
	}
	return s
}

// cmdCall calls one tool through the router and prints its result.
func cmdCall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("call", stderr, &c)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usageErrorf("call", "takes a TOOL name and optionally its JSON arguments (got %q)", pos)
	}
	arguments := json.RawMessage("{}")
	if len(pos) == 2 {
		arguments = json.RawMessage(pos[1])
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(arguments, &obj); err != nil {
			return usageErrorf("call", "the arguments must be a JSON object: %v", err)
		}
	}
	r, startErr, err := startEngine(ctx, &c, stderr)
	if err != nil {
		return err
	}
	defer r.Close()
	if startErr != nil {
		fmt.Fprintln(stderr, "warning: some upstreams did not start:", startErr)
	}
	params, _ := json.Marshal(map[string]any{
		"name": pos[0], "arguments": arguments,
		"_meta": map[string]any{"progressToken": "cli"},
	})
	res, err := r.Call(ctx, &router.Request{
		Method: mcp.MethodToolsCall, Params: params,
		Progress: func(p json.RawMessage) { fmt.Fprintf(stderr, "progress: %s\n", p) },
	})
	if err != nil {
		return exitError{code: 1, msg: fmt.Sprintf("calling %s: %v", pos[0], err)}
	}
	var pretty strings.Builder
	enc := json.NewEncoder(&pretty)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	var v any
	if err := json.Unmarshal(res, &v); err != nil {
		return err
	}
	if err := enc.Encode(v); err != nil {
		return err
	}
	fmt.Fprint(stdout, pretty.String())
	var outcome struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(res, &outcome) == nil && outcome.IsError {
		return exitError{code: 1, msg: fmt.Sprintf("tool %s reported an error (isError)", pos[0])}
	}
	return nil
}
