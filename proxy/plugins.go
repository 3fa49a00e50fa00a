package proxy

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/plugins"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// pluginSpecs are the enabled plugin blocks as the plugins package takes them.
func pluginSpecs(cfg *config.Config) []plugins.Spec {
	var specs []plugins.Spec
	for _, p := range cfg.Plugins {
		if p.Disabled {
			continue
		}
		specs = append(specs, plugins.Spec{
			Name: p.Name, Command: p.Command, Env: p.Env, Dir: p.Dir, SHA256: p.SHA256,
			Match: policy.Match{Tools: p.Tools, Prompts: p.Prompts, Resources: p.Resources,
				Upstreams: p.Upstreams, Principals: p.Principals, Groups: p.Groups},
			FailOpen: p.FailOpen, Timeout: p.Timeout, StartTimeout: p.StartTimeout,
			Config: p.Config, EvalContext: p.EvalContext, DeclRange: p.DeclRange, Ranges: p.Ranges,
		})
	}
	return specs
}

// startPlugins starts the configured plugins for r; the caller makes their catalogue
// hooks r's presenter (Host.Presenter), and stops them (Close). nil when none is
// configured. A plugin that
// cannot start (its program, its sha256, its config block) fails the whole start, with
// the problems at their file:line: a proxy never runs with less policy than configured.
func startPlugins(ctx context.Context, cfg *config.Config, r *router.Router, log zerolog.Logger, obs *observers) (*plugins.Host, error) {
	specs := pluginSpecs(cfg)
	if len(specs) == 0 {
		return nil, nil
	}
	host := plugins.New(specs, log)
	host.OnRestart(r.Represent)
	obs.watchPlugins(host)
	diags := host.Start(ctx)
	logWarnings(log, diags)
	if diags.HasErrors() {
		return nil, fmt.Errorf("starting the plugins:\n%s", config.FormatDiagnostics(diags))
	}
	return host, nil
}

func logWarnings(log zerolog.Logger, diags hcl.Diagnostics) {
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning {
			ev := log.Warn().Str("detail", d.Detail)
			if d.Subject != nil {
				ev = ev.Str("at", fmt.Sprintf("%s:%d", d.Subject.Filename, d.Subject.Start.Line))
			}
			ev.Msg(d.Summary)
		}
	}
}

// ValidatePlugins starts each plugin cfg configures (disabled ones too) to decode its
// config block against the schema the plugin describes and have it check its
// configuration, then stops it: what `mcp-proxy validate` adds to Load's checks. The
// diagnostics are at file:line (config.FormatDiagnostics prints them).
func ValidatePlugins(ctx context.Context, cfg *config.Config) hcl.Diagnostics {
	all := *cfg
	all.Plugins = nil
	for _, p := range cfg.Plugins {
		p.Disabled = false
		all.Plugins = append(all.Plugins, p)
	}
	specs := pluginSpecs(&all)
	if len(specs) == 0 {
		return nil
	}
	return plugins.Validate(ctx, specs, zerolog.Nop())
}
