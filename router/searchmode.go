package router

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/search"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// The tools an endpoint in search mode lists in place of its catalogue.
const (
	SearchToolsName = "search_tools"
	CallToolName    = "call_tool"
)

// searchToolsDescription is search_tools' description before the services.
const searchToolsDescription = "Find the tools of this server that do what you need. This server has many tools and lists only a few: " +
	"search before saying a tool does not exist. Describe the task in a few words, as you would to a colleague " +
	"(\"open a pull request\", \"read a file\", \"post to a Slack channel\"); name the service when you know it. " +
	"Returns the best matches, best first, with their full definitions (name, description, input schema). " +
	"The tools found join your tool list, so you can call them by name; if your tool list does not change, " +
	"call them through " + CallToolName + ". Search again with other words if nothing fits."

// metaTools are the definitions of search_tools and call_tool for endpoint c;
// services, when not "", ends search_tools' description (servicesSummary).
func metaTools(c *compiledEndpoint, services string) []json.RawMessage {
	desc := searchToolsDescription
	if services != "" {
		desc += " " + services
	}
	st := map[string]any{
		"name":        SearchToolsName,
		"title":       "Search tools",
		"description": desc,
		"inputSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"query": map[string]any{"type": "string", "description": "What you want to do, in a few words."},
				"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": c.MaxLimit, "default": c.Limit,
					"description": "How many tools to return at most."},
			},
			"required": []string{"query"},
		},
		"outputSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"tools": map[string]any{"type": "array", "items": map[string]any{"type": "object"},
					"description": "The matching tools' definitions, best match first."},
			},
			"required": []string{"tools"},
		},
		"annotations": map[string]any{"readOnlyHint": true, "openWorldHint": false},
	}
	ct := map[string]any{
		"name":  CallToolName,
		"title": "Call a tool found by searching",
		"description": "Call a tool that " + SearchToolsName + " found, by its name, with its arguments. " +
			"Use it when that tool is not in your tool list.",
		"inputSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name":      map[string]any{"type": "string", "description": "The tool's name, as " + SearchToolsName + " returned it."},
				"arguments": map[string]any{"type": "object", "description": "The tool's arguments, as its input schema says."},
			},
			"required": []string{"name"},
		},
	}
	out := make([]json.RawMessage, 0, 2)
	for _, t := range []map[string]any{st, ct} {
		b, _ := jsonx.Marshal(t)
		out = append(out, b)
	}
	return out
}

// searchModeTools returns the tools list of a search-mode endpoint for a request whose
// session activated tools (personal: true); personal is false when the shared page
// serves it.
func (r *Router) searchModeTools(snap *snapshot, req *Request, v *epView) (items []json.RawMessage, personal bool) {
	if req.Active == nil {
		return nil, false
	}
	names := req.Active.list()
	if len(names) == 0 {
		return nil, false
	}
	base := snap.view(r, req, listTools)
	visible := r.classViewOf(snap, req, v).visible
	items = append(make([]json.RawMessage, 0, len(base)+len(names)), base...)
	for _, n := range names {
		e := v.toolByName[n]
		if e == nil || v.shadowed[n] != nil || v.isAlways(e) || (visible != nil && !visible(n)) {
			continue // gone from the catalogue, or listed already, or not the principal's to see
		}
		items = append(items, e.raw)
	}
	return items, true
}

// isAlways reports whether e is one of the view's always-listed tools.
func (v *epView) isAlways(e *entry) bool {
	for _, a := range v.always {
		if a == e {
			return true
		}
	}
	return false
}

// classView is what one class of principal may see of an endpoint view's tools, for
// searching: the names it may see (visible; nil: all) and the index to search (the
// view's, restricted to those names once when the index can precompute that, so that a
// query pays nothing for visibility).
type classView struct {
	visible func(name string) bool
	index   search.Index // nil without a ranker
	narrow  bool         // index is not restricted: pass visible to Search
}

// restricter is an index that can precompute a principal's view (search.Restricter).
type restricter interface {
	Restrict(visible func(name string) bool) search.Index
}

// classViewOf returns what a request's principal may see of a view's tools, computed
// once per snapshot, endpoint and principal class, like the lists.
func (r *Router) classViewOf(snap *snapshot, req *Request, v *epView) *classView {
	g := r.Guard()
	if g == nil && len(v.shadowed) == 0 {
		return &classView{index: v.index}
	}
	key := viewKey{list: listVisible, endpoint: req.Endpoint}
	if g != nil {
		key.class = principalClass(req)
	}
	if x, ok := snap.views.Load(key); ok {
		return x.(*classView)
	}
	set := make(map[string]struct{}, len(v.tools))
	for _, e := range v.tools {
		t := Target{Kind: TargetTool, Name: e.exposed, Original: e.original, Upstream: e.owner.name, Raw: e.raw}
		if v.shadowed[e.exposed] == nil && (g == nil || g.Visible(req, &t)) {
			set[e.exposed] = struct{}{}
		}
	}
	cv := &classView{visible: func(name string) bool {
		_, ok := set[name]
		return ok
	}, index: v.index, narrow: true}
	if rs, ok := v.index.(restricter); ok {
		cv.index, cv.narrow = rs.Restrict(cv.visible), false
	}
	if snap.nviews.Add(1) <= maxViews {
		snap.views.Store(key, cv)
	}
	return cv
}

// listVisible keys the cached class views in snapshot.views (not a list clients see).
const listVisible byte = 0xff

// find runs a query against a request's view: the entries found, best first, at most
// limit, only what the principal may see. When the view's tools all come from one
// upstream that declares tools.filtering (SEP-1821), the query goes to it; its answer
// is taken when it comes, the index is asked otherwise.
func (r *Router) find(ctx context.Context, snap *snapshot, req *Request, v *epView, query string, limit int) []*entry {
	cv := r.classViewOf(snap, req, v)
	visible := cv.visible
	if found, ok := r.findUpstream(ctx, req, v, query, limit, visible); ok {
		return found
	}
	if cv.index == nil {
		return nil
	}
	var narrow func(string) bool
	if cv.narrow {
		narrow = visible
	}
	hits := cv.index.Search(query, limit, narrow)
	out := make([]*entry, 0, len(hits))
	for _, h := range hits {
		if e := v.toolByName[h.Doc.Name]; e != nil && (visible == nil || visible(e.exposed)) {
			out = append(out, e) // visible is the index's promise; checked again all the same
		}
	}
	return out
}

// findUpstream passes a query to the one upstream a view's tools come from, when it
// declares tools.filtering; ok is false when there is no such upstream, or it failed.
func (r *Router) findUpstream(ctx context.Context, req *Request, v *epView, query string, limit int, visible func(string) bool) ([]*entry, bool) {
	if len(v.tools) == 0 {
		return nil, false
	}
	owner := v.tools[0].owner
	for _, e := range v.tools[1:] {
		if e.owner != owner {
			return nil, false
		}
	}
	if !declaresFiltering(owner.up.Info().Capabilities) {
		return nil, false
	}
	target, _, err := r.route(owner, req)
	if err != nil {
		return nil, false
	}
	params, _ := jsonx.Marshal(map[string]string{"query": query})
	resp, err := callUpstream(ctx, target.up, &upstream.Request{Method: mcp.MethodToolsList, Params: params, Meta: req.Meta})
	if err != nil || resp.Error != nil {
		r.log.Debug().Err(err).Str("upstream", owner.name).Msg("a tools/list query upstream failed; the proxy's index answers")
		return nil, false
	}
	raw, _, _ := jsonx.Get(resp.Result, "tools")
	var listed []json.RawMessage
	if json.Unmarshal(raw, &listed) != nil {
		return nil, false
	}
	byOriginal := make(map[string]*entry, len(v.tools))
	for _, e := range v.tools {
		byOriginal[e.original] = e
	}
	var out []*entry
	for _, it := range listed {
		name, _, _ := jsonx.GetString(it, "name")
		if e := byOriginal[name]; e != nil && (visible == nil || visible(e.exposed)) && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, true
}

// declaresFiltering reports whether server capabilities declare tools.filtering.
func declaresFiltering(caps json.RawMessage) bool {
	tools, ok, _ := jsonx.Get(caps, "tools")
	if !ok {
		return false
	}
	f, ok, _ := jsonx.Get(tools, "filtering")
	return ok && (string(f) == "true" || (len(f) > 0 && f[0] == '{'))
}

// searchTools answers a call of search_tools: the best matches with their definitions,
// activated in the session (a list_changed tells it when the set changed).
func (r *Router) searchTools(ctx context.Context, snap *snapshot, req *Request, v *epView, reply Reply) {
	notify := false
	answer := func(ctx context.Context, req *Request) (json.RawMessage, error) {
		args, _, _ := jsonx.Get(req.Params, "arguments")
		query, _, _ := jsonx.GetString(args, "query")
		if strings.TrimSpace(query) == "" {
			return toolError("search_tools needs a query: what you want to do, in a few words."), nil
		}
		limit := v.ep.Limit
		if raw, ok, _ := jsonx.Get(args, "limit"); ok && string(raw) != "null" {
			n, err := strconv.Atoi(string(raw))
			if err != nil || n < 1 {
				return toolError("limit must be a whole number of at least 1."), nil
			}
			limit = min(n, v.ep.MaxLimit)
		}
		found := r.find(ctx, snap, req, v, query, limit)
		defs := make([]json.RawMessage, len(found))
		names := make([]string, len(found))
		for i, e := range found {
			defs[i], names[i] = e.raw, e.exposed
		}
		res := r.searchResult(req, v, defs, names)
		notify = req.Active != nil && len(names) > 0 && req.Active.activate(names, v.ep.MaxActive) && req.Session != nil
		return res, nil
	}
	r.localTool(ctx, req, SearchToolsName, answer, func(res json.RawMessage, err error) {
		reply(res, err)
		if notify {
			req.Session.Notify(mcp.NotificationToolsListChanged, nil) // the session's list grew: after the answer
		}
	})
}

// searchResult is search_tools' result: the definitions as structured content, and as
// text, or as tool_reference blocks for the clients the endpoint names.
func (r *Router) searchResult(req *Request, v *epView, defs []json.RawMessage, names []string) json.RawMessage {
	tools := jsonArray(defs)
	structured := append(append([]byte(`{"tools":`), tools...), '}')
	var content []byte
	if v.ep.toolReference(req) && len(names) > 0 {
		blocks := make([]json.RawMessage, len(names))
		for i, n := range names {
			blocks[i] = append(jsonrpc.AppendString([]byte(`{"type":"tool_reference","tool_name":`), v.ep.ToolReference.Prefix+n), '}')
		}
		content = jsonArray(blocks)
	} else {
		text := string(structured)
		if len(names) == 0 {
			text = `{"tools":[]} (no tool matches; try other words)`
		}
		content, _ = jsonx.Marshal([]map[string]string{{"type": "text", "text": text}})
	}
	out := append([]byte(`{"content":`), content...)
	out = append(out, `,"structuredContent":`...)
	out = append(out, structured...)
	return append(out, '}')
}

// toolReference reports whether the client of req gets tool_reference blocks.
func (c *compiledEndpoint) toolReference(req *Request) bool {
	if len(c.refClients) == 0 || req.Meta == nil || len(req.Meta.Info) == 0 {
		return false
	}
	name, _, _ := jsonx.GetString(req.Meta.Info, "name")
	for _, g := range c.refClients {
		if g.Match(name) {
			return true
		}
	}
	return false
}

// callTool serves call_tool: the named tool of the view, called with the arguments
// given, through the middleware chain as a direct call to it would be (the policy, the
// audit and the metrics see that tool, not call_tool).
func (r *Router) callTool(ctx context.Context, req *Request, v *epView, reply Reply) {
	args, _, _ := jsonx.Get(req.Params, "arguments")
	name, ok, err := jsonx.GetString(args, "name")
	if err != nil || !ok || name == "" {
		r.refuse(ctx, req, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: call_tool needs the name of the tool to call"), reply)
		return
	}
	inner, ok, _ := jsonx.Get(args, "arguments")
	if !ok || string(inner) == "null" {
		inner = json.RawMessage("{}")
	}
	params, err := jsonx.Edit(req.Params, []jsonx.Change{
		{Key: "name", Value: jsonrpc.AppendString(nil, name)},
		{Key: "arguments", Value: inner},
	})
	if err != nil {
		r.refuse(ctx, req, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err), reply)
		return
	}
	call := *req
	call.Params = params
	e := v.toolByName[name]
	if s := v.shadowed[name]; s != nil {
		e = s // the upstream's tool of that name, not the proxy's
	}
	if e == nil && !r.Settled() {
		go r.callWhenStarted(ctx, &call, "tool", reply)
		return
	}
	r.callEntry(ctx, &call, e, name, "tool", reply)
}

// listQuery answers tools/list with a query (SEP-1821) on an endpoint: the best
// matches, one page, no cursor.
func (r *Router) listQuery(ctx context.Context, snap *snapshot, req *Request, v *epView, query string) json.RawMessage {
	var found []*entry
	if v.ep != nil { // not removed by a reload
		found = r.find(ctx, snap, req, v, query, v.ep.MaxLimit)
	}
	defs := make([]json.RawMessage, len(found))
	for i, e := range found {
		defs[i] = e.raw
	}
	out := []byte{'{'}
	if req.Modern {
		out = append(out, `"resultType":"complete","ttlMs":0,"cacheScope":"private",`...)
	}
	out = append(out, `"tools":`...)
	out = append(out, jsonArray(defs)...)
	return append(out, '}')
}

// toolError is a tool result reporting an error to the model.
func toolError(text string) json.RawMessage {
	b, _ := jsonx.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}, "isError": true})
	return b
}

// jsonArray joins raw items into a JSON array.
func jsonArray(items []json.RawMessage) []byte {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, it := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	return append(out, ']')
}
