package router

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// The merged lists, each with its own cursor namespace.
const (
	listTools byte = iota + 1
	listPrompts
	listResources
	listTemplates
)

var listKeys = map[byte]string{
	listTools:     "tools",
	listPrompts:   "prompts",
	listResources: "resources",
	listTemplates: "resourceTemplates",
}

// listPage serves one page of a merged list from the current snapshot: each page is
// encoded once per snapshot and view (principal class) and then served as is, so that
// a list costs the same whatever the size of the whole catalogue.
func (r *Router) listPage(req *Request, list byte) (json.RawMessage, error) {
	offset := 0
	if cur, ok, err := jsonx.Get(req.Params, "cursor"); err == nil && ok && string(cur) != "null" {
		s, err := jsonx.Unquote(cur)
		if err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: cursor must be a string")
		}
		if offset, err = r.cursors.decode(list, s); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: invalid cursor")
		}
	}
	snap := r.snap.Load()
	key := pageKey{view: viewKey{list: list, endpoint: req.Endpoint}, offset: offset, modern: req.Modern}
	if g := r.Guard(); g != nil {
		key.view.class, key.guarded = principalClass(req), true
	}
	if list == listTools && req.Endpoint != "" {
		if v := snap.viewOf(req); v.ep != nil && v.ep.Search {
			if items, personal := r.searchModeTools(snap, req, v); personal {
				return r.encodeItems(snap, items, key), nil // a session's own: not cached
			}
		}
	}
	if p, ok := snap.pages.Load(key); ok {
		return p.(json.RawMessage), nil
	}
	page := r.encodeItems(snap, snap.view(r, req, list), key)
	if snap.npages.Add(1) <= maxPages {
		snap.pages.Store(key, page)
	}
	return page, nil
}

// maxPages bounds the cached pages of one snapshot (views × offsets × eras); past it,
// pages are encoded and not kept.
const maxPages = 4096

// pageKey names one encoded page of a view: the page starting at offset, for the legacy
// or the modern era (which adds caching hints).
type pageKey struct {
	view    viewKey
	offset  int
	modern  bool
	guarded bool // a guard was installed: the page is never public
}

// encodeItems encodes the page of items key names. A page of a view is shared by every
// request for that page of that snapshot: nobody may modify it (its capacity is its
// length, so an append copies).
func (r *Router) encodeItems(snap *snapshot, items []json.RawMessage, key pageKey) json.RawMessage {
	list, offset := key.view.list, key.offset
	if offset > len(items) {
		offset = len(items) // the list shrank since the cursor was minted
	}
	end := min(offset+r.opts.PageSize, len(items))
	size := 32
	for _, it := range items[offset:end] {
		size += len(it) + 1
	}
	out := make([]byte, 0, size+128)
	out = append(out, '{')
	if key.modern {
		// The modern era's fields come first, so that the front end, which adds
		// resultType, ttlMs and cacheScope to results that lack them, finds them without
		// scanning the items.
		h := snap.hints[list]
		out = append(out, `"resultType":"complete","ttlMs":`...)
		out = strconv.AppendInt(out, h.TTLMs, 10)
		if h.Public && !key.guarded { // a list filtered per principal is never public
			out = append(out, `,"cacheScope":"public",`...)
		} else {
			out = append(out, `,"cacheScope":"private",`...)
		}
	}
	out = append(out, '"')
	out = append(out, listKeys[list]...)
	out = append(out, `":[`...)
	for i, it := range items[offset:end] {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	out = append(out, ']')
	if end < len(items) {
		out = append(out, `,"nextCursor":`...)
		out = jsonrpc.AppendString(out, r.cursors.encode(list, end))
	}
	out = append(out, '}')
	return out[:len(out):len(out)]
}

// maxViews bounds the cached views of one snapshot (principal classes × lists); past it,
// views are computed and not kept.
const maxViews = 4096

// viewKey names one cached view: a list, as seen by one class of principal.
type viewKey struct {
	list     byte
	class    string
	endpoint string // the endpoint whose view it is; "" for the whole catalogue
}

// principalClass is what visibility depends on (see Guard): the principal's identity
// (not its name alone: an API key and a token of the same name are two people whom
// rules may tell apart) and groups; "" for requests made for nobody in particular. Each
// part is written after its length, so that no name or group can spell another
// principal's class (a token's subject may hold any character, NUL included).
func principalClass(req *Request) string {
	p := req.Principal
	if p == nil {
		return ""
	}
	id := p.ID()
	n := 4 + len(id)
	for _, g := range p.Groups {
		n += 4 + len(g)
	}
	var b strings.Builder
	b.Grow(n)
	part := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	part(id)
	for _, g := range p.Groups {
		part(g)
	}
	return b.String()
}

// view returns the raw items of a list that the request's principal may see. The guard
// is asked once per item for each catalogue change and principal class, not on every
// list request: views are cached in the snapshot, which a change replaces.
func (s *snapshot) view(r *Router, req *Request, list byte) []json.RawMessage {
	key := viewKey{list: list, endpoint: req.Endpoint}
	if r.Guard() != nil {
		key.class = principalClass(req)
	}
	if v, ok := s.views.Load(key); ok {
		return v.([]json.RawMessage)
	}
	tools, prompts, resources, templates := s.tools, s.prompts, s.resources, s.templates
	var meta []json.RawMessage
	if v := s.viewOf(req); v != nil {
		tools, prompts, resources, templates = v.tools, v.prompts, v.resources, v.templates
		if v.ep != nil && v.ep.Search && list == listTools {
			tools, meta = v.always, v.metaFor(r, s, req) // the rest is found by searching
		}
	}
	var items []json.RawMessage
	switch list {
	case listTools:
		items = visibleOf(r, req, tools, func(e *entry) (json.RawMessage, Target) {
			return e.raw, Target{Kind: TargetTool, Name: e.exposed, Original: e.original, Upstream: e.owner.name, Raw: e.raw}
		})
		if meta != nil {
			items = append(slices.Clip(meta), items...)
		}
	case listPrompts:
		items = visibleOf(r, req, prompts, func(e *entry) (json.RawMessage, Target) {
			return e.raw, Target{Kind: TargetPrompt, Name: e.exposed, Original: e.original, Upstream: e.owner.name, Raw: e.raw}
		})
	case listResources:
		items = visibleOf(r, req, resources, func(x *resource) (json.RawMessage, Target) {
			return x.raw, Target{Kind: TargetResource, Name: x.exposed, Original: x.original, Upstream: x.owner.name, Raw: x.raw, Forms: x.forms}
		})
	case listTemplates:
		items = visibleOf(r, req, templates, func(x *template) (json.RawMessage, Target) {
			return x.raw, Target{Kind: TargetResource, Name: x.tmpl.raw, Original: x.tmpl.raw, Upstream: x.owner.name, Raw: x.raw}
		})
	}
	if s.nviews.Add(1) <= maxViews {
		s.views.Store(key, items)
	}
	return items
}

// visibleOf returns the raw items of a list the request's principal may see.
func visibleOf[T any](r *Router, req *Request, xs []T, f func(T) (json.RawMessage, Target)) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(xs))
	g := r.Guard()
	for _, x := range xs {
		raw, t := f(x)
		if g == nil || g.Visible(req, &t) {
			out = append(out, raw)
		}
	}
	return out
}
