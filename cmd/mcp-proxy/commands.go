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

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/proxy"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/sandbox"
	"github.com/mcp-proxy/mcp-proxy/trust"
)

// cmdRun serves the merged upstreams to one client on stdin/stdout.
func cmdRun(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("run", stderr, &c)
	endpoint := fs.String("endpoint", "", "on stdin/stdout, serve the endpoint block `NAME` instead of the whole catalogue")
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
	cfg, err := proxy.Load(c.config, stderr)
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
	var opts []proxy.Option
	if *endpoint != "" {
		opts = append(opts, proxy.ServeEndpoint(*endpoint))
	}
	return serve(ctx, cfg, log, stdin, stdout, opts...)
}

// serve builds the proxy of cfg and serves it: over HTTP with a listen block, else on
// stdin/stdout. SIGHUP reloads its configuration file.
func serve(ctx context.Context, cfg *config.Config, log zerolog.Logger, stdin io.Reader, stdout io.Writer, opts ...proxy.Option) error {
	opts = append([]proxy.Option{proxy.WithLogger(log), proxy.WithVersion(buildVersion()), proxy.ReloadOnSignal()}, opts...)
	p, err := proxy.New(ctx, cfg, opts...)
	if err != nil {
		return err
	}
	if len(cfg.Listen) > 0 {
		return p.ListenAndServe(ctx)
	}
	return p.ServeStdio(ctx, stdin, stdout)
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
	cfg, err := proxy.Load(c.config, stderr)
	if err != nil {
		return err
	}
	// Plugins are started to decode their config blocks against their own schemas.
	var diags hcl.Diagnostics
	if !*skipPlugins {
		diags = proxy.ValidatePlugins(context.Background(), cfg)
	}
	diags = append(diags, trust.CheckLockFile(cfg)...)
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
// handshake; failures are logged and reported, the rest keeps working. The caller
// closes the proxy.
func startEngine(ctx context.Context, c *common, stderr io.Writer, opts ...proxy.Option) (*proxy.Proxy, error, error) {
	log, err := c.logger(stderr)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := proxy.Load(c.config, stderr)
	if err != nil {
		return nil, nil, err
	}
	// The CLI is neither traced nor measured.
	p, err := proxy.New(ctx, cfg, append([]proxy.Option{proxy.WithLogger(log), proxy.WithVersion(buildVersion()), proxy.Oneshot()}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	return p, p.Start(ctx), nil
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
	as := fs.String("as", "", "show only the tools `PRINCIPAL` may see under the policy: an identity (api_key:alice, jwt:alice for the jwt block's issuer) or a name")
	groups := fs.String("groups", "", "with --as: the principal's `GROUPS`, comma-separated (an API key's groups are added)")
	endpoint := fs.String("endpoint", "", "print the catalogue of the endpoint block `NAME` (in search mode: what its search finds)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("tools", "takes no arguments (got %q)", pos)
	}
	var opts []proxy.Option
	if *endpoint != "" {
		opts = append(opts, proxy.ServeEndpoint(*endpoint))
	}
	p, startErr, err := startEngine(ctx, &c, stderr, opts...)
	if err != nil {
		return err
	}
	defer p.Close()
	var gs []string
	for _, g := range strings.Split(*groups, ",") {
		if g = strings.TrimSpace(g); g != "" {
			gs = append(gs, g)
		}
	}
	if ids := p.PrincipalIdentities(*as); *as != "" && len(ids) > 1 {
		return usageErrorf("tools", "--as %s is ambiguous: this configuration has %d principals of that name; say which, %s",
			*as, len(ids), strings.Join(ids, " or "))
	}
	tools := p.Router().Tools()
	switch {
	case *endpoint != "":
		tools = p.EndpointTools(*endpoint, *as, gs...)
		if info, ok := p.Router().Endpoint(*endpoint); ok && info.Search {
			fmt.Fprintf(stderr, "endpoint %s is in search mode: clients list %s, %s and its always tools, and find the others by searching\n",
				*endpoint, router.SearchToolsName, router.CallToolName)
		}
	case *as != "":
		tools = p.VisibleTools(*as, gs...)
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
	p, startErr, err := startEngine(ctx, &c, stderr)
	if err != nil {
		return err
	}
	defer p.Close()
	r := p.Router()
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
