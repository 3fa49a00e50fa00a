package config

import (
	"encoding/hex"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/mcp-proxy/mcp-proxy/internal/lazyre"
)

// Plugin is one plugin "name" block: an out-of-process plugin (see the plugins
// package). Its config block is kept undecoded: only the plugin knows its schema, so the
// plugins package decodes it once the plugin has described itself.
type Plugin struct {
	Name    string            // block label, ^[A-Za-z0-9_-]+$, unique
	Command []string          // the program and its arguments
	Env     map[string]string // added to the proxy's environment
	Dir     string            // the config file's directory: where the program runs and relative programs are found
	SHA256  string            // lower-case hex; "" when not set (the program runs unverified, with a warning)
	// The matchers (policy syntax): which calls and items the plugin sees.
	Tools, Prompts, Resources, Upstreams, Principals, Groups []string
	FailOpen                                                 bool          // failure = "open"; the default is "closed"
	Timeout                                                  time.Duration // per hook call; 0: the plugins package's default (250ms)
	StartTimeout                                             time.Duration // 0: the default (30s)
	Disabled                                                 bool          // decoded and validated, not started
	// Config is the config block's body, nil when there is none; EvalContext evaluates
	// it (env() and the other functions of the file).
	Config      hcl.Body
	EvalContext *hcl.EvalContext
	Ranges      map[string]hcl.Range // attribute ranges ("config": the config block)
	DeclRange   hcl.Range
}

type rawPlugin struct {
	Name         string            `hcl:"name,label"`
	Command      *hcl.Attribute    `hcl:"command,optional"`
	Env          *hcl.Attribute    `hcl:"env,optional"`
	SHA256       *hcl.Attribute    `hcl:"sha256,optional"`
	Tools        *hcl.Attribute    `hcl:"tools,optional"`
	Prompts      *hcl.Attribute    `hcl:"prompts,optional"`
	Resources    *hcl.Attribute    `hcl:"resources,optional"`
	Upstreams    *hcl.Attribute    `hcl:"upstreams,optional"`
	Principals   *hcl.Attribute    `hcl:"principals,optional"`
	Groups       *hcl.Attribute    `hcl:"groups,optional"`
	Failure      *hcl.Attribute    `hcl:"failure,optional"`
	Timeout      *hcl.Attribute    `hcl:"timeout,optional"`
	StartTimeout *hcl.Attribute    `hcl:"start_timeout,optional"`
	Disabled     *hcl.Attribute    `hcl:"disabled,optional"`
	Configs      []rawPluginConfig `hcl:"config,block"`
	DefRange     hcl.Range         `hcl:",def_range"`
}

// rawPluginConfig is a plugin's config block, decoded later against the plugin's schema.
type rawPluginConfig struct {
	Body     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

var pluginName = lazyre.New(`^[A-Za-z0-9_-]+$`)

func decodePlugins(e *evaluator, raws []rawPlugin, baseDir string) []Plugin {
	var out []Plugin
	names := map[string]bool{}
	for i := range raws {
		raw := &raws[i]
		e.unique(names, raw.Name, "plugin", "a plugin", raw.DefRange)
		if !pluginName.MatchString(raw.Name) {
			e.blockErrorf(raw.DefRange, "Invalid plugin name", "Plugin name %q must match ^[A-Za-z0-9_-]+$ (it names the plugin in logs, errors and audit records).", raw.Name)
		}
		p := Plugin{Name: raw.Name, Dir: baseDir, EvalContext: e.ctx, Ranges: map[string]hcl.Range{}, DeclRange: raw.DefRange}
		if raw.Command == nil {
			e.blockErrorf(raw.DefRange, "Missing command", "plugin %q needs command = [\"./path/to/plugin\", ...args].", raw.Name)
		} else {
			p.Ranges["command"] = raw.Command.Expr.Range()
			if cmd, ok := e.stringList(raw.Command); ok {
				if len(cmd) == 0 || cmd[0] == "" {
					e.errorf(raw.Command, "Invalid command", "\"command\" must be a non-empty list of strings whose first element is the plugin program.")
				}
				p.Command = cmd
			}
		}
		if env, ok := e.stringMap(raw.Env); ok {
			p.Env = env
		}
		if s, ok := e.string(raw.SHA256); ok {
			p.Ranges["sha256"] = raw.SHA256.Expr.Range()
			if b, err := hex.DecodeString(s); err != nil || len(b) != 32 {
				e.errorf(raw.SHA256, "Invalid sha256", "\"sha256\" must be the program's SHA-256 as 64 hex digits (sha256sum prints it), got %q.", s)
			} else {
				p.SHA256 = hex.EncodeToString(b)
			}
		}
		p.Tools = patterns(e, raw.Tools, p.Ranges)
		p.Prompts = patterns(e, raw.Prompts, p.Ranges)
		p.Resources = patterns(e, raw.Resources, p.Ranges)
		p.Upstreams = patterns(e, raw.Upstreams, p.Ranges)
		p.Principals = patterns(e, raw.Principals, p.Ranges)
		if list, ok := e.stringList(raw.Groups); ok {
			p.Groups = list
		}
		if s, ok := e.string(raw.Failure); ok {
			switch s {
			case "closed":
			case "open":
				p.FailOpen = true
			default:
				e.errorf(raw.Failure, "Invalid failure", "\"failure\" must be \"closed\" (a failed plugin refuses the call) or \"open\" (the call goes on without it), got %q.", s)
			}
		}
		for _, d := range []struct {
			attr *hcl.Attribute
			dst  *time.Duration
		}{{raw.Timeout, &p.Timeout}, {raw.StartTimeout, &p.StartTimeout}} {
			if v, ok := e.duration(d.attr); ok {
				if v <= 0 {
					e.errorf(d.attr, "Invalid duration", "%q must be positive.", d.attr.Name)
				}
				*d.dst = v
			}
		}
		if b, ok := e.bool(raw.Disabled); ok {
			p.Disabled = b
		}
		for j, c := range raw.Configs {
			if j > 0 {
				e.blockErrorf(c.DefRange, "Duplicate config block", "plugin %q has more than one config block; the first is at %s.", raw.Name, position(raw.Configs[0].DefRange))
				continue
			}
			p.Config, p.Ranges["config"] = c.Body, c.DefRange
		}
		out = append(out, p)
	}
	return out
}
