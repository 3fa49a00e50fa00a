package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/mcp-proxy/mcp-proxy/internal/glob"
)

// Endpoint is one endpoint "NAME" block: a face of the proxy that is an MCP server of
// its own, with its own catalogue (a view of the merged one: some upstreams, some
// items), served on its own HTTP path and on stdio with `run --endpoint NAME`.
type Endpoint struct {
	Name string // the label, ^[A-Za-z0-9_-]+$, unique, not "default"
	// Path is where the HTTP front end serves it: Streamable HTTP at Path, the legacy
	// HTTP+SSE transport at Path+"/sse" (messages at Path+"/message"). Default: the
	// listen block's path + "/" + Name.
	Path      string
	Upstreams []string // configured upstream names; nil: every enabled upstream
	// Tools, Prompts and Resources select the items by their exposed names (resources:
	// URIs and URI templates), after the upstreams' own filters and namespacing.
	Tools, Prompts, Resources Patterns
	Mode                      string   // ModeAll (the default) or ModeSearch
	Always                    []string // exposed tool names listed even in search mode
	// Instructions replace the proxy block's instructions in this endpoint's initialize
	// (and server/discover) answer; the instructions of its upstreams follow them.
	// Nil: the proxy block's.
	Instructions *string
	Search       EndpointSearch
	Ranges       map[string]hcl.Range // attribute ranges, for diagnostics found later
	DeclRange    hcl.Range
}

// Patterns include and exclude items by name (the policy's glob syntax).
type Patterns struct {
	Include []string // nil: every item
	Exclude []string // applied after Include; nil: none
}

// Selects reports whether the patterns select name. It compiles the patterns on each
// call: it is meant for checks, not for requests.
func (p *Patterns) Selects(name string) bool {
	f := Filter{Include: p.Include, Exclude: p.Exclude}
	return f.Selects(name)
}

// EndpointSearch is an endpoint's search block: how its catalogue is searched
// (search_tools, and tools/list with a query).
type EndpointSearch struct {
	Limit     int // results when the query gives no limit; default 5
	MaxLimit  int // the most results one query returns; default 20
	MaxActive int // tools a session keeps activated (least recently found first out); default 20
	// Ranker names a plugin block whose plugin ranks the catalogue; "" for the built-in
	// ranker. A plugin that fails or is slow falls back to the built-in ranker.
	Ranker string
	// ToolReferenceClients are patterns over clientInfo.name: such clients get
	// search_tools' matches as tool_reference content blocks (which Anthropic's API
	// expands into the tools' definitions) instead of their definitions as text. Nil:
	// no client.
	ToolReferenceClients []string
	// ToolReferencePrefix is put before a tool's exposed name in a tool_reference, the
	// name the client knows the tool by (Claude Code: "mcp__" + its name for the proxy
	// + "__").
	ToolReferencePrefix string
}

// Endpoint modes.
const (
	ModeAll    = "all"
	ModeSearch = "search"

	// DefaultEndpointName is the name policy rules give the proxy's own face: its
	// listen path, and stdio without --endpoint. No endpoint block may take it.
	DefaultEndpointName = "default"

	DefaultSearchLimit     = 5
	DefaultSearchMaxLimit  = 20
	DefaultSearchMaxActive = 20
	maxSearchLimit         = 200
	maxSearchActive        = 1000
)

type rawEndpoint struct {
	Name         string              `hcl:"name,label"`
	Path         *hcl.Attribute      `hcl:"path,optional"`
	Upstreams    *hcl.Attribute      `hcl:"upstreams,optional"`
	Mode         *hcl.Attribute      `hcl:"mode,optional"`
	Always       *hcl.Attribute      `hcl:"always,optional"`
	Instructions *hcl.Attribute      `hcl:"instructions,optional"`
	Tools        []rawSelection      `hcl:"tools,block"`
	Prompts      []rawSelection      `hcl:"prompts,block"`
	Resources    []rawSelection      `hcl:"resources,block"`
	Search       []rawEndpointSearch `hcl:"search,block"`
	LabelRange   hcl.Range           `hcl:"name,label_range"`
	DefRange     hcl.Range           `hcl:",def_range"`
}

type rawEndpointSearch struct {
	Limit                *hcl.Attribute `hcl:"limit,optional"`
	MaxLimit             *hcl.Attribute `hcl:"max_limit,optional"`
	MaxActive            *hcl.Attribute `hcl:"max_active,optional"`
	Ranker               *hcl.Attribute `hcl:"ranker,optional"`
	ToolReferenceClients *hcl.Attribute `hcl:"tool_reference_clients,optional"`
	ToolReferencePrefix  *hcl.Attribute `hcl:"tool_reference_prefix,optional"`
	DefRange             hcl.Range      `hcl:",def_range"`
}

// decodeEndpoints decodes the endpoint blocks; what needs the rest of the file (the
// upstreams, the listen path, the plugins) is checked by checkEndpoints.
func decodeEndpoints(e *evaluator, raws []rawEndpoint) []Endpoint {
	var out []Endpoint
	seen := map[string]bool{}
	for i := range raws {
		raw := &raws[i]
		e.unique(seen, raw.Name, "endpoint", "an endpoint", raw.LabelRange)
		switch {
		case !validLabel(raw.Name):
			e.blockErrorf(raw.LabelRange, "Invalid endpoint name",
				"Endpoint name %q must match ^[A-Za-z0-9_-]+$ (it names the endpoint in paths, policy rules, metrics and audit records).", raw.Name)
		case raw.Name == DefaultEndpointName:
			e.blockErrorf(raw.LabelRange, "Reserved endpoint name",
				"%q names the proxy's own face (its listen path, and stdio without --endpoint) in policy rules; give the endpoint another name.", raw.Name)
		}
		out = append(out, decodeEndpoint(e, raw))
	}
	return out
}

func decodeEndpoint(e *evaluator, raw *rawEndpoint) Endpoint {
	ep := Endpoint{Name: raw.Name, Mode: ModeAll, Ranges: map[string]hcl.Range{}, DeclRange: raw.DefRange,
		Search: EndpointSearch{Limit: DefaultSearchLimit, MaxLimit: DefaultSearchMaxLimit, MaxActive: DefaultSearchMaxActive}}
	if s, ok := e.string(raw.Path); ok {
		ep.Ranges["path"] = raw.Path.Expr.Range()
		if !strings.HasPrefix(s, "/") || strings.ContainsAny(s, "?# ") {
			e.errorf(raw.Path, "Invalid path", "\"path\" must start with / and hold no '?', '#' or space, got %q.", s)
		} else {
			ep.Path = strings.TrimSuffix(s, "/")
			if ep.Path == "" {
				e.errorf(raw.Path, "Invalid path", "\"path\" must not be the root path /.")
			}
		}
	}
	if raw.Upstreams != nil {
		ep.Ranges["upstreams"] = raw.Upstreams.Expr.Range()
		if list, ok := e.stringList(raw.Upstreams); ok {
			if len(list) == 0 {
				e.errorf(raw.Upstreams, "Empty upstream list", "upstreams = [] would serve nothing: remove it to serve every upstream, or name the upstreams to serve.")
			}
			ep.Upstreams = list
		}
	}
	if s, ok := e.oneOf(raw.Mode, "mode", ModeAll, ModeSearch); ok {
		ep.Mode = s
	}
	if raw.Always != nil {
		ep.Ranges["always"] = raw.Always.Expr.Range()
		if list, ok := e.stringList(raw.Always); ok {
			for _, n := range list {
				if !validItemName(n) {
					e.errorf(raw.Always, "Invalid tool name", "\"always\" lists tool names as clients see them (1 to 128 letters, digits, '_', '.' or '-'), got %q.", n)
				}
			}
			ep.Always = list
		}
	}
	if s, ok := e.string(raw.Instructions); ok {
		ep.Instructions = &s
	}
	for _, k := range []struct {
		dst  *Patterns
		sels []rawSelection
		kind string
	}{{&ep.Tools, raw.Tools, "tools"}, {&ep.Prompts, raw.Prompts, "prompts"}, {&ep.Resources, raw.Resources, "resources"}} {
		*k.dst = single(e, k.sels, k.kind, func(r *rawSelection) hcl.Range { return r.DefRange },
			func(r *rawSelection) Patterns {
				if r.Include != nil {
					ep.Ranges[k.kind+".include"] = r.Include.Expr.Range()
				}
				if r.Exclude != nil {
					ep.Ranges[k.kind+".exclude"] = r.Exclude.Expr.Range()
				}
				return Patterns{Include: globPatterns(e, r.Include), Exclude: globPatterns(e, r.Exclude)}
			})
	}
	ep.Search = single(e, raw.Search, "search", func(r *rawEndpointSearch) hcl.Range { return r.DefRange },
		func(r *rawEndpointSearch) EndpointSearch { return decodeEndpointSearch(e, r, ep.Ranges) })
	if len(raw.Search) == 0 {
		ep.Search = EndpointSearch{Limit: DefaultSearchLimit, MaxLimit: DefaultSearchMaxLimit, MaxActive: DefaultSearchMaxActive}
	}
	if ep.Mode == ModeAll && len(ep.Always) > 0 {
		e.warnf(raw.Always, "Setting has no effect", "\"always\" lists tools to show in search mode; endpoint %q lists every tool (mode = %q).", ep.Name, ModeAll)
	}
	return ep
}

func decodeEndpointSearch(e *evaluator, raw *rawEndpointSearch, ranges map[string]hcl.Range) EndpointSearch {
	s := EndpointSearch{Limit: DefaultSearchLimit, MaxLimit: DefaultSearchMaxLimit, MaxActive: DefaultSearchMaxActive}
	bounded := func(attr *hcl.Attribute, lo, hi int, dst *int) {
		if n, ok := e.int(attr); ok {
			if n < lo || n > hi {
				e.errorf(attr, "Invalid "+attr.Name, "%q must be between %d and %d, got %d.", attr.Name, lo, hi, n)
				return
			}
			*dst = n
		}
	}
	bounded(raw.Limit, 1, maxSearchLimit, &s.Limit)
	bounded(raw.MaxLimit, 1, maxSearchLimit, &s.MaxLimit)
	bounded(raw.MaxActive, 1, maxSearchActive, &s.MaxActive)
	if raw.Limit != nil && raw.MaxLimit != nil && s.Limit > s.MaxLimit {
		e.errorf(raw.Limit, "Invalid limit", "\"limit\" (%d) must not exceed \"max_limit\" (%d).", s.Limit, s.MaxLimit)
	} else if s.Limit > s.MaxLimit {
		s.MaxLimit = s.Limit // a larger default limit alone raises the cap with it
	}
	if v, ok := e.string(raw.Ranker); ok {
		ranges["search.ranker"] = raw.Ranker.Expr.Range()
		s.Ranker = v
	}
	if list, ok := e.stringList(raw.ToolReferenceClients); ok && len(list) > 0 { // [] is none, as absent
		s.ToolReferenceClients = globPatterns(e, raw.ToolReferenceClients)
	}
	if v, ok := e.string(raw.ToolReferencePrefix); ok {
		s.ToolReferencePrefix = v
	}
	if raw.ToolReferencePrefix != nil && raw.ToolReferenceClients == nil {
		e.warnf(raw.ToolReferencePrefix, "Setting has no effect", "\"tool_reference_prefix\" applies to the clients \"tool_reference_clients\" names, and it names none.")
	}
	return s
}

// EndpointPaths returns the HTTP paths an endpoint is served on: Streamable HTTP,
// the legacy HTTP+SSE stream, and its messages.
func EndpointPaths(path string) (streamable, sse, message string) {
	return path, path + "/sse", path + "/message"
}

// checkEndpoints runs once the upstreams, the listen block and the plugins are decoded:
// default paths, unknown upstreams, path collisions, patterns and always names that can
// match nothing in the endpoint, unknown rankers.
func checkEndpoints(e *evaluator, cfg *Config) {
	listenPath := DefaultListen().Path
	if len(cfg.Listen) > 0 {
		listenPath = cfg.Listen[0].Path
	}
	// Every path the front end serves, and who serves it.
	claimed := map[string]string{listenPath: "the listen block's path", "/sse": "the legacy HTTP+SSE stream (/sse)",
		"/message": "the legacy HTTP+SSE messages (/message)"}
	ups := map[string]*Upstream{}
	for i := range cfg.Upstreams {
		ups[cfg.Upstreams[i].Name] = &cfg.Upstreams[i]
	}
	plugins := map[string]bool{}
	for _, p := range cfg.Plugins {
		plugins[p.Name] = true
	}
	for i := range cfg.Endpoints {
		ep := &cfg.Endpoints[i]
		at := func(attr string) *hcl.Range {
			if r, ok := ep.Ranges[attr]; ok {
				return &r
			}
			return ep.DeclRange.Ptr()
		}
		if ep.Path == "" {
			ep.Path = strings.TrimSuffix(listenPath, "/") + "/" + ep.Name
		}
		streamable, sse, message := EndpointPaths(ep.Path)
		for _, p := range []string{streamable, sse, message} {
			if who, taken := claimed[p]; taken {
				e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Path collision",
					Detail: fmt.Sprintf("Endpoint %q is served at %s (Streamable HTTP), %s and %s (HTTP+SSE); %s is already %s.",
						ep.Name, streamable, sse, message, p, who),
					Subject: at("path")})
				break
			}
		}
		for _, p := range []string{streamable, sse, message} {
			if _, taken := claimed[p]; !taken {
				claimed[p] = fmt.Sprintf("endpoint %q's", ep.Name)
			}
		}
		// The upstreams the endpoint serves, as far as they are known.
		var members []*Upstream
		known := true
		if ep.Upstreams == nil {
			for i := range cfg.Upstreams {
				if !cfg.Upstreams[i].Disabled {
					members = append(members, &cfg.Upstreams[i])
				}
			}
		}
		for _, name := range ep.Upstreams {
			u := ups[name]
			switch {
			case u == nil:
				known = false
				e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown upstream",
					Detail: fmt.Sprintf("Endpoint %q names upstream %q, which is not configured (upstreams: %s).",
						ep.Name, name, strings.Join(upstreamNames(cfg), ", ")),
					Subject: at("upstreams")})
			case u.Disabled:
				e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Disabled upstream",
					Detail:  fmt.Sprintf("Endpoint %q names upstream %q, which is disabled: it serves nothing of it.", ep.Name, name),
					Subject: at("upstreams")})
			default:
				members = append(members, u)
			}
		}
		if ep.Search.Ranker != "" && !plugins[ep.Search.Ranker] {
			e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown plugin",
				Detail:  fmt.Sprintf("Endpoint %q's search ranker names plugin %q, which is not configured.", ep.Name, ep.Search.Ranker),
				Subject: at("search.ranker")})
		}
		if !known {
			continue
		}
		prefixes, open := toolPrefixes(cfg, members)
		if !open {
			for _, kind := range []string{"tools", "prompts"} {
				pats := ep.Tools.Include
				if kind == "prompts" {
					pats = ep.Prompts.Include
				}
				for _, p := range pats {
					if !canMatchPrefix(p, prefixes) {
						e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Pattern matches nothing",
							Detail: fmt.Sprintf("Endpoint %q includes %s %q, but the names of its upstreams' %s start with %s: it can match none of them.",
								ep.Name, kind, p, kind, strings.Join(prefixes, ", ")),
							Subject: at(kind + ".include")})
					}
				}
			}
		}
		for _, name := range ep.Always {
			switch {
			case !ep.Tools.Selects(name):
				e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Tool not in the endpoint",
					Detail:  fmt.Sprintf("Endpoint %q lists %q in \"always\", but its tools block leaves that name out.", ep.Name, name),
					Subject: at("always")})
			case !open && !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }):
				e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Tool not in the endpoint",
					Detail: fmt.Sprintf("Endpoint %q lists %q in \"always\", but the names of its upstreams' tools start with %s.",
						ep.Name, name, strings.Join(prefixes, ", ")),
					Subject: at("always")})
			}
		}
	}
}

// toolPrefixes returns how the exposed names of the upstreams' tools start (namespace
// and separator); open is true when one of them exposes its names unprefixed, so that a
// name can be anything.
func toolPrefixes(cfg *Config, members []*Upstream) (prefixes []string, open bool) {
	for _, u := range members {
		if u.Namespace == "" {
			return nil, true
		}
		prefixes = append(prefixes, u.Namespace+cfg.Proxy.Separator)
	}
	return prefixes, false
}

// canMatchPrefix reports whether glob pattern p can match a name starting with one of
// prefixes: its literal start (before its first wildcard) and the prefix must agree.
func canMatchPrefix(p string, prefixes []string) bool {
	lit := p
	if i := strings.IndexAny(p, `*?\`); i >= 0 {
		lit = p[:i]
	}
	if _, err := glob.Compile(p); err != nil {
		return true // reported already
	}
	for _, pre := range prefixes {
		if strings.HasPrefix(lit, pre) || strings.HasPrefix(pre, lit) {
			return true
		}
	}
	return false
}

func upstreamNames(cfg *Config) []string {
	names := make([]string, 0, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		names = append(names, u.Name)
	}
	return names
}
