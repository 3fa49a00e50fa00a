package router

import (
	"encoding/json"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/glob"
	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/search"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// An endpoint is a face of the proxy that is an MCP server of its own: a view of the
// merged catalogue (some upstreams, some of their items), not a second router. A
// request names the endpoint it came through (Request.Endpoint; "" for none: the whole
// catalogue, as without endpoints); the router serves its lists from the endpoint's
// view and resolves its calls in it, so that an item outside the view is as unknown as
// a name nobody lists. The views are computed with each snapshot, per endpoint, and the
// per-principal views (Guard) are cached per endpoint too: nothing of an endpoint runs
// per request but a map lookup.
//
// An endpoint in search mode lists search_tools and call_tool (and its Always tools, and
// the tools a session's searches activated: Active) instead of its whole catalogue; its
// index (package search) is built with the snapshot, so that a query touches no upstream.

// Endpoint configures one endpoint.
type Endpoint struct {
	Name string
	Path string // where the HTTP front end serves it, for the status page ("" on stdio)
	// Upstreams are the configured names of the upstreams it serves; nil: all of them.
	Upstreams []string
	// Tools, Prompts and Resources select items by exposed name (resources: by URI, and
	// templates by URI template); a zero Patterns selects every item.
	Tools, Prompts, Resources Patterns
	// Search lists search_tools and call_tool, Always and the session's activated tools
	// instead of every tool.
	Search bool
	Always []string // exposed tool names listed in search mode too, in this order
	// Instructions replace the front end's own in this endpoint's initialize answer;
	// nil: the front end's.
	Instructions *string
	// Limit is the number of results of a query that gives none, MaxLimit the most one
	// query gets, MaxActive the most tools a session keeps activated. Zero: 5, 20, 20.
	Limit, MaxLimit, MaxActive int
	// Ranker builds this endpoint's index; nil: Options.Ranker.
	Ranker search.Ranker
	// ToolReference says which clients get search results as tool_reference blocks.
	ToolReference ToolReference
}

// ToolReference says which clients get search_tools' matches as tool_reference content
// blocks ({"type":"tool_reference","tool_name":...}, which Anthropic's API expands into
// the tool's definition) rather than the definitions as text.
type ToolReference struct {
	Clients []string // patterns over the client's clientInfo.name; nil: none
	Prefix  string   // before the exposed name: the name the client knows the tool by
}

// Patterns include and exclude items by name (glob syntax).
type Patterns struct {
	Include []string // nil: every item
	Exclude []string
}

// Default search settings (Endpoint's zero values).
const (
	defaultSearchLimit     = 5
	defaultSearchMaxLimit  = 20
	defaultSearchMaxActive = 20
)

// compiledEndpoint is an Endpoint ready to select items.
type compiledEndpoint struct {
	Endpoint
	upstreams                 map[string]bool // nil: all
	tools, prompts, resources matcher
	refClients                []glob.Glob
	warned                    map[string]bool // always names already reported missing; guarded by Router.rebuildMu
}

// matcher is compiled Patterns.
type matcher struct {
	include []glob.Glob // nil: every name
	exclude []glob.Glob
}

func compilePatterns(p Patterns) (matcher, error) {
	var m matcher
	for _, pat := range p.Include {
		g, err := glob.Compile(pat)
		if err != nil {
			return m, err
		}
		m.include = append(m.include, g)
	}
	for _, pat := range p.Exclude {
		g, err := glob.Compile(pat)
		if err != nil {
			return m, err
		}
		m.exclude = append(m.exclude, g)
	}
	return m, nil
}

// selects reports whether the patterns select any of names (a resource's spellings).
func (m *matcher) selects(names ...string) bool {
	if m.include == nil && m.exclude == nil {
		return true
	}
	match := func(gs []glob.Glob) bool {
		for _, g := range gs {
			for _, n := range names {
				if g.Match(n) {
					return true
				}
			}
		}
		return false
	}
	return (m.include == nil || match(m.include)) && !match(m.exclude)
}

func compileEndpoint(ep Endpoint) (*compiledEndpoint, error) {
	c := &compiledEndpoint{Endpoint: ep, warned: map[string]bool{}}
	if ep.Name == "" {
		return nil, fmt.Errorf("an endpoint needs a name")
	}
	if ep.Upstreams != nil {
		c.upstreams = map[string]bool{}
		for _, u := range ep.Upstreams {
			c.upstreams[u] = true
		}
	}
	var err error
	if c.tools, err = compilePatterns(ep.Tools); err != nil {
		return nil, fmt.Errorf("endpoint %q: tools: %w", ep.Name, err)
	}
	if c.prompts, err = compilePatterns(ep.Prompts); err != nil {
		return nil, fmt.Errorf("endpoint %q: prompts: %w", ep.Name, err)
	}
	if c.resources, err = compilePatterns(ep.Resources); err != nil {
		return nil, fmt.Errorf("endpoint %q: resources: %w", ep.Name, err)
	}
	for _, p := range ep.ToolReference.Clients {
		g, err := glob.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("endpoint %q: tool_reference clients: %w", ep.Name, err)
		}
		c.refClients = append(c.refClients, g)
	}
	if c.Limit <= 0 {
		c.Limit = defaultSearchLimit
	}
	if c.MaxLimit <= 0 {
		c.MaxLimit = max(defaultSearchMaxLimit, c.Limit)
	}
	if c.MaxActive <= 0 {
		c.MaxActive = defaultSearchMaxActive
	}
	return c, nil
}

// serves reports whether the endpoint serves the upstream named name.
func (c *compiledEndpoint) serves(name string) bool { return c.upstreams == nil || c.upstreams[name] }

// endpointSet is one version of the configured endpoints, replaced whole.
type endpointSet struct {
	list   []*compiledEndpoint
	byName map[string]*compiledEndpoint
}

// CheckEndpoints reports what SetEndpoints would refuse of eps (an invalid pattern, a
// duplicate name), without installing anything: a reload checks them before it
// switches anything.
func CheckEndpoints(eps []Endpoint) error {
	seen := map[string]bool{}
	for _, ep := range eps {
		if _, err := compileEndpoint(ep); err != nil {
			return err
		}
		if seen[ep.Name] {
			return fmt.Errorf("two endpoints named %q", ep.Name)
		}
		seen[ep.Name] = true
	}
	return nil
}

// SetEndpoints installs the endpoints (replacing those installed before) and rebuilds
// the views: after Start, each subscriber is told of the lists that changed for it (its
// endpoint's view, as its principal sees it; see Viewer), and a client that is not a
// Viewer of every list, since an endpoint's view may differ though the merged catalogue
// does not. An error for an invalid pattern or a duplicate name, and nothing changes.
func (r *Router) SetEndpoints(eps []Endpoint) error {
	set := &endpointSet{byName: map[string]*compiledEndpoint{}}
	for _, ep := range eps {
		c, err := compileEndpoint(ep)
		if err != nil {
			return err
		}
		if set.byName[c.Name] != nil {
			return fmt.Errorf("two endpoints named %q", c.Name)
		}
		if old := r.endpoints.Load(); old != nil && old.byName[c.Name] != nil {
			c.warned = old.byName[c.Name].warned // a reload does not report the same names again
		}
		set.list = append(set.list, c)
		set.byName[c.Name] = c
	}
	r.endpoints.Store(set) // the views before it are the current snapshot's: built with the old set
	if r.started() {
		r.rebuildWith(0, upstream.AllKinds, nil)
	} else {
		r.rebuild()
	}
	return nil
}

// EndpointInfo describes an endpoint to the front end and the CLI.
type EndpointInfo struct {
	Name         string
	Path         string
	Upstreams    []string // the configured upstreams it serves, in config order
	Search       bool
	Always       []string // in search mode: the tools listed besides search_tools and call_tool
	Instructions *string
	Tools        int // tools in its view (before the per-principal view)
}

// Endpoint describes the endpoint named name; false when there is none.
func (r *Router) Endpoint(name string) (EndpointInfo, bool) {
	set := r.endpoints.Load()
	if set == nil || set.byName[name] == nil {
		return EndpointInfo{}, false
	}
	c := set.byName[name]
	info := EndpointInfo{Name: c.Name, Path: c.Path, Search: c.Search, Always: c.Always, Instructions: c.Instructions}
	for _, b := range r.all() {
		if c.serves(b.name) {
			info.Upstreams = append(info.Upstreams, b.name)
		}
	}
	if v := r.snap.Load().eps[name]; v != nil {
		info.Tools = len(v.tools)
	}
	return info, true
}

// Endpoints describes every endpoint, in configuration order.
func (r *Router) Endpoints() []EndpointInfo {
	set := r.endpoints.Load()
	if set == nil {
		return nil
	}
	out := make([]EndpointInfo, 0, len(set.list))
	for _, c := range set.list {
		if info, ok := r.Endpoint(c.Name); ok {
			out = append(out, info)
		}
	}
	return out
}

// EndpointTools lists the tools of an endpoint's view in catalogue order (in search
// mode too: its whole catalogue, not what a session lists); false when there is no such
// endpoint.
func (r *Router) EndpointTools(name string) ([]Tool, bool) {
	v := r.snap.Load().eps[name]
	if v == nil {
		return nil, false
	}
	return toolsOf(v.tools), true
}

// epView is one endpoint's view of one snapshot: its items, its routing tables, its
// index. Immutable once the snapshot is published.
type epView struct {
	ep           *compiledEndpoint
	tools        []*entry
	toolByName   map[string]*entry
	prompts      []*entry
	promptByName map[string]*entry
	resources    []*resource
	templates    []*template
	owners       map[*backend]bool // the backends it serves (catalogue instances included)
	always       []*entry          // Always, as found in the view
	meta         []json.RawMessage // search_tools and call_tool (search mode), for whoever sees every tool; nil otherwise
	services     []service         // the upstreams of its tools (search mode), for search_tools' description
	shadowed     map[string]*entry // tools of the view named like a meta tool (reached by call_tool only)
	index        search.Index      // nil without a ranker
	docs         []search.Doc      // what index was built from, by position in tools
}

// goneView is the view of an endpoint a reload removed while some of its sessions
// remain: nothing, so that every name is unknown.
var goneView = &epView{toolByName: map[string]*entry{}, promptByName: map[string]*entry{}, owners: map[*backend]bool{}}

// endpointViews computes each endpoint's view of snapshot s; prev is the snapshot it
// replaces, whose indexes are handed to the rankers to reuse. settled: every upstream
// has started once, so that a tool missing from a view is worth a warning.
func endpointViews(s, prev *snapshot, set *endpointSet, ranker search.Ranker, settled bool, log zerolog.Logger) map[string]*epView {
	if set == nil || len(set.list) == 0 {
		return nil
	}
	out := make(map[string]*epView, len(set.list))
	for _, c := range set.list {
		v := &epView{ep: c, toolByName: map[string]*entry{}, promptByName: map[string]*entry{}, owners: map[*backend]bool{}}
		servedBy := func(b *backend) bool {
			if in, seen := v.owners[b]; seen {
				return in
			}
			in := c.serves(b.name)
			v.owners[b] = in
			return in
		}
		for _, e := range s.tools {
			if servedBy(e.owner) && c.tools.selects(e.exposed) {
				v.tools = append(v.tools, e)
				v.toolByName[e.exposed] = e
			}
		}
		for _, e := range s.prompts {
			if servedBy(e.owner) && c.prompts.selects(e.exposed) {
				v.prompts = append(v.prompts, e)
				v.promptByName[e.exposed] = e
			}
		}
		for _, x := range s.resources {
			if servedBy(x.owner) && c.resources.selects(x.exposed) {
				v.resources = append(v.resources, x)
			}
		}
		for _, t := range s.templates {
			if servedBy(t.owner) && c.resources.selects(t.tmpl.raw) {
				v.templates = append(v.templates, t)
			}
		}
		if c.Search {
			for _, name := range []string{SearchToolsName, CallToolName} {
				if e := v.toolByName[name]; e != nil {
					if v.shadowed == nil {
						v.shadowed = map[string]*entry{}
					}
					v.shadowed[name] = e
					log.Warn().Str("endpoint", c.Name).Str("tool", name).Str("upstream", e.owner.name).
						Msg("a tool of the endpoint has the name of a search-mode tool of the proxy's: listed and called as the proxy's; reach it with call_tool")
				}
			}
			for _, name := range c.Always {
				if e := v.toolByName[name]; e != nil && v.shadowed[name] == nil {
					v.always = append(v.always, e)
				} else if settled && !c.warned[name] {
					c.warned[name] = true
					log.Warn().Str("endpoint", c.Name).Str("tool", name).
						Msg("a tool the endpoint lists in always is not in its catalogue")
				}
			}
		}
		if c.Search {
			v.services = servicesOf(v)
			v.meta = metaTools(c, servicesSummary(v.services, nil))
		}
		var prevIndex search.Index
		if prev != nil {
			if pv := prev.eps[c.Name]; pv != nil {
				prevIndex = pv.index
			}
		}
		rk := c.Ranker
		if rk == nil {
			rk = ranker
		}
		if rk != nil {
			v.docs = make([]search.Doc, len(v.tools))
			for i, e := range v.tools {
				v.docs[i] = docOf(e)
			}
			v.index = rk.Build(v.docs, prevIndex)
		}
		out[c.Name] = v
	}
	return out
}

// docOf is the search document of a tool.
func docOf(e *entry) search.Doc {
	d, err := search.DocFromTool(e.raw, e.owner.namespace)
	if err != nil { // a definition the catalogue took is an object; keep its name at least
		d = search.Doc{Name: e.exposed, Namespace: e.owner.namespace, Raw: e.raw}
	}
	d.Name, d.Raw = e.exposed, e.raw
	return d
}

// viewOf returns the endpoint view a request is served from: nil for a request through
// no endpoint (the whole catalogue), goneView for an endpoint a reload removed.
func (s *snapshot) viewOf(req *Request) *epView {
	if req.Endpoint == "" {
		return nil
	}
	if v := s.eps[req.Endpoint]; v != nil {
		return v
	}
	return goneView
}

// toolIndex is the table a request's tool names are looked up in.
func (s *snapshot) toolIndex(req *Request) map[string]*entry {
	if v := s.viewOf(req); v != nil {
		return v.toolByName
	}
	return s.toolByName
}

// promptIndex is the table a request's prompt names are looked up in.
func (s *snapshot) promptIndex(req *Request) map[string]*entry {
	if v := s.viewOf(req); v != nil {
		return v.promptByName
	}
	return s.promptByName
}

// servesResource reports whether a request's endpoint serves a resource that resolved
// to t, owned by owner (every resource, without an endpoint).
func (s *snapshot) servesResource(req *Request, t *Target, owner *backend) bool {
	v := s.viewOf(req)
	if v == nil {
		return true
	}
	if !v.servesBackend(owner) {
		return false
	}
	names := append([]string{t.Name, t.Original}, t.Forms...)
	return v.ep != nil && v.ep.resources.selects(names...)
}

// servesBackend reports whether the view serves owner (a per-client catalogue instance
// counts as its upstream).
func (v *epView) servesBackend(owner *backend) bool {
	if owner == nil {
		return false
	}
	if in, seen := v.owners[owner]; seen {
		return in
	}
	return v.ep != nil && v.ep.serves(owner.name)
}

// toolsOf describes entries for the CLI.
func toolsOf(es []*entry) []Tool {
	out := make([]Tool, len(es))
	for i, e := range es {
		desc, _, _ := jsonx.GetString(e.raw, "description")
		out[i] = Tool{Name: e.exposed, Upstream: e.owner.name, OriginalName: e.original, Description: desc, Raw: e.raw}
	}
	return out
}
