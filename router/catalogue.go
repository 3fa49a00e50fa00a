package router

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// entry is one tool or prompt in the merged catalogue.
type entry struct {
	exposed  string            // the name clients see and call
	original string            // the upstream's own name
	quoted   []byte            // original as a JSON string, ready to splice into params
	owner    *backend          // who serves it
	raw      json.RawMessage   // the item as clients see it (name rewritten)
	headers  []mcp.ParamHeader // a tool's x-mcp-header annotations (2026-07-28 HTTP)
}

// resource is one listed resource.
type resource struct {
	exposed  string // the URI clients see (the original unless two upstreams claim it)
	original string
	owner    *backend
	raw      json.RawMessage
	// forms are the other spellings policy rules see: the original URI when it was
	// rewritten, and the normal forms of both (mcp.URIForms).
	forms []string
}

// template is one resource template.
type template struct {
	tmpl  *uriTemplate
	owner *backend
	raw   json.RawMessage
}

// snapshot is an immutable merged catalogue with its routing tables. A new one is built
// whenever an upstream's catalogue or state changes; requests read the current one
// through an atomic pointer, so routing takes no lock.
type snapshot struct {
	tools     []*entry
	prompts   []*entry
	resources []*resource
	templates []*template

	toolByName   map[string]*entry
	promptByName map[string]*entry
	resByURI     map[string]*resource // by exposed URI
	// resByCanon finds a listed resource by the normal form of its exposed URI, so
	// that any spelling of it reaches the upstream as the upstream listed it.
	resByCanon map[string]*resource
	// byTemplateSpecificity orders templates most specific first, then config order.
	byTemplateSpecificity []*template
	// rewritten maps (owner, original URI) to the exposed URI for the few URIs that had
	// to be rewritten because two upstreams claimed them.
	rewritten map[ownerURI]string
	// views caches each list as each class of principal sees it (viewKey →
	// []json.RawMessage), filled on first use; nviews counts what was stored.
	views  sync.Map
	nviews atomic.Int32
	// pages caches the encoded pages of the views (pageKey → json.RawMessage), filled on
	// first use; npages counts what was stored.
	pages  sync.Map
	npages atomic.Int32
	// hidden are the URIs (in every spelling) of resources a Presenter hid: not routable,
	// even through a template that matches them. Nil when none.
	hidden map[string]bool
	// hints are the merged caching hints of each list (indexed by list id).
	hints [listTemplates + 1]upstream.CacheHint
	// eps are the endpoints' views of this catalogue, by endpoint name; nil without
	// endpoints.
	eps map[string]*epView
}

type ownerURI struct {
	owner *backend
	uri   string
}

// build merges the catalogues of bs (in config order), as v lets them be served, into a
// snapshot.
func build(bs []*backend, v Vetter, sep string, maxName int, log zerolog.Logger) *snapshot {
	s := &snapshot{
		toolByName:   map[string]*entry{},
		promptByName: map[string]*entry{},
		resByURI:     map[string]*resource{},
		resByCanon:   map[string]*resource{},
		rewritten:    map[ownerURI]string{},
	}
	var vetted []*upstream.Catalogue
	if v != nil {
		vetted = vet(v, bs)
	}
	for i, b := range bs {
		cat := b.up.Catalogue()
		if vetted != nil {
			cat = vetted[i]
		}
		st, _ := b.up.State()
		ready := st == upstream.StateReady
		s.tools = appendNamed(s.tools, s.toolByName, b, b.prepare(filterTools, cat.Tools, "tool", ready, log), cat.ParamHeaders, sep, maxName, "tool", log)
		s.prompts = appendNamed(s.prompts, s.promptByName, b, b.prepare(filterPrompts, cat.Prompts, "prompt", ready, log), nil, sep, maxName, "prompt", log)
		s.appendResources(b, cat.Resources, log)
		for _, raw := range sortedBy(cat.Templates, "uriTemplate") {
			t, ok, _ := jsonx.GetString(raw, "uriTemplate")
			if !ok {
				log.Warn().Str("upstream", b.name).Msg("resource template without uriTemplate; skipped")
				continue
			}
			ut, ok := compileTemplate(t)
			if !ok {
				log.Warn().Str("upstream", b.name).Str("uri_template", t).Msg("unparseable resource template; listed but not routable")
			}
			s.templates = append(s.templates, &template{tmpl: ut, owner: b, raw: raw})
		}
	}
	s.hints = mergeHints(bs)
	for _, t := range s.templates {
		if t.tmpl != nil {
			s.byTemplateSpecificity = append(s.byTemplateSpecificity, t)
		}
	}
	sort.SliceStable(s.byTemplateSpecificity, func(i, j int) bool {
		return s.byTemplateSpecificity[i].tmpl.literal > s.byTemplateSpecificity[j].tmpl.literal
	})
	return s
}

type keyed struct {
	key string
	raw json.RawMessage
}

// sortedBy returns items ordered by the string field key (items without it keep their
// relative order at the end).
func sortedBy(items []json.RawMessage, key string) []json.RawMessage {
	ks := make([]keyed, len(items))
	for i, raw := range items {
		k, _, _ := jsonx.GetString(raw, key)
		ks[i] = keyed{k, raw}
	}
	sort.SliceStable(ks, func(i, j int) bool { return ks[i].key < ks[j].key })
	out := make([]json.RawMessage, len(ks))
	for i := range ks {
		out[i] = ks[i].raw
	}
	return out
}

// appendNamed adds one upstream's prepared tools or prompts to the merged list. Names are
// claimed in config order of upstreams, and in the prepared order within one: the first
// to claim an exposed name keeps it, a later one is exposed under a disambiguated name
// (a hash of its upstream and original name appended), with a warning.
func appendNamed(list []*entry, index map[string]*entry, b *backend, items []named, headers map[string][]mcp.ParamHeader,
	sep string, maxName int, what string, log zerolog.Logger) []*entry {
	for _, it := range items {
		name := it.original
		if name == "" {
			log.Warn().Str("upstream", b.name).Str("kind", what).Msg("item without a name; skipped")
			continue
		}
		exposed := exposedName(b.namespace, sep, it.base, maxName)
		if exposed != it.base && exposed != b.namespace+sep+it.base {
			ev := log.Info().Str("upstream", b.name).Str(what, name).Str("exposed", exposed)
			if it.renamed {
				ev = ev.Str("renamed_to", it.base)
			}
			ev.Msgf("%s name is not valid or too long for clients; exposed under a shortened name", what)
		}
		if prev, taken := index[exposed]; taken {
			alt := withHash(exposed, maxName, b.name, name)
			for n := 2; index[alt] != nil; n++ { // practically never loops
				alt = withHash(exposed, maxName, b.name, name, string(rune('0'+n%10)))
			}
			ev := log.Warn().Str("upstream", b.name).Str(what, name).Str("exposed", alt).
				Str("conflicts_with_upstream", prev.owner.name).Str("conflicting_name", exposed)
			if it.renamed {
				ev = ev.Str("renamed_to", it.base)
			}
			if prev.owner == b {
				ev.Str("conflicts_with", prev.original).
					Msgf("%s name collides with another %s of the same upstream (a configured rename, or a name listed twice); "+
						"the %s the upstream itself calls so keeps the name, else the first in order of original name; "+
						"this one is exposed under a disambiguated name", what, what, what)
			} else {
				ev.Msgf("%s name collides with another upstream's; the earlier upstream in the config keeps the name, this one is exposed under a disambiguated name", what)
			}
			exposed = alt
		}
		out := it.raw
		if exposed != name {
			var err error
			out, err = jsonx.Set(out, "name", jsonrpc.AppendString(nil, exposed))
			if err != nil {
				log.Warn().Str("upstream", b.name).Err(err).Msgf("malformed %s; skipped", what)
				continue
			}
		}
		e := &entry{exposed: exposed, original: name, quoted: jsonrpc.AppendString(nil, name), owner: b, raw: out,
			headers: headers[name]}
		index[exposed] = e
		list = append(list, e)
	}
	return list
}

func (s *snapshot) appendResources(b *backend, items []json.RawMessage, log zerolog.Logger) {
	for _, raw := range sortedBy(items, "uri") {
		uri, ok, _ := jsonx.GetString(raw, "uri")
		if !ok || uri == "" {
			log.Warn().Str("upstream", b.name).Msg("resource without a uri; skipped")
			continue
		}
		exposed := uri
		out := raw
		canon, err := mcp.NormalizeURI(uri)
		if err != nil {
			canon = uri // refused when a client asks for it in another spelling
		}
		prev, taken := s.resByURI[uri]
		if !taken {
			prev, taken = s.resByCanon[canon]
		}
		if taken {
			if prev.owner == b {
				continue // listed twice by the same upstream
			}
			exposed = "mcp-proxy://" + url.PathEscape(b.name) + "/" + url.PathEscape(uri)
			if out, err = jsonx.Set(raw, "uri", jsonrpc.AppendString(nil, exposed)); err != nil {
				continue
			}
			s.rewritten[ownerURI{b, uri}] = exposed
			log.Warn().Str("upstream", b.name).Str("uri", uri).Str("exposed", exposed).
				Str("conflicts_with_upstream", prev.owner.name).
				Msg("resource URI is also listed by an earlier upstream; exposed under a proxy URI")
		}
		r := &resource{exposed: exposed, original: uri, owner: b, raw: out, forms: mcp.URIForms(exposed)}
		if exposed != uri {
			r.forms = append(r.forms, uri)
		}
		for _, f := range mcp.URIForms(uri) {
			if f != exposed && !slices.Contains(r.forms, f) {
				r.forms = append(r.forms, f)
			}
		}
		s.resByURI[exposed] = r
		if c, err := mcp.NormalizeURI(exposed); err == nil {
			if _, dup := s.resByCanon[c]; !dup {
				s.resByCanon[c] = r
			}
		}
		s.resources = append(s.resources, r)
	}
}

// resolveURI finds what a client's URI names: a listed resource (by its exact exposed
// URI, then by the normal form canon), or else the upstream whose template matches canon
// (most specific first). It returns the owner and the URI to send upstream (the
// upstream's own spelling of a listed resource, the normal form otherwise), and the
// listed resource when there is one; a nil owner when nobody owns the URI.
func (s *snapshot) resolveURI(uri, canon string) (*backend, string, *resource) {
	if s.hidden != nil && (s.hidden[uri] || s.hidden[canon]) {
		return nil, "", nil
	}
	if r := s.resByURI[uri]; r != nil {
		return r.owner, r.original, r
	}
	if r := s.resByCanon[canon]; r != nil {
		return r.owner, r.original, r
	}
	for _, t := range s.byTemplateSpecificity {
		if t.tmpl.match(canon) {
			return t.owner, canon, nil
		}
	}
	return nil, "", nil
}

// templateOwner finds the upstream that listed exactly this template string.
func (s *snapshot) templateOwner(t string) *backend {
	for _, tm := range s.templates {
		if v, _, _ := jsonx.GetString(tm.raw, "uriTemplate"); v == t {
			return tm.owner
		}
	}
	return nil
}

// equalLists reports whether two lists present the same items to clients.
func equalLists[T any](a, b []T, raw func(T) json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(raw(a[i]), raw(b[i])) {
			return false
		}
	}
	return true
}

// mergeHints merges the caching hints of each list over the upstreams serving it: the
// smallest ttl, and private when any is (legacy upstreams count as ttl 0, private).
func mergeHints(bs []*backend) (out [listTemplates + 1]upstream.CacheHint) {
	started := [listTemplates + 1]bool{}
	add := func(list byte, has bool, h upstream.CacheHint) {
		if !has {
			return
		}
		if !started[list] {
			out[list], started[list] = h, true
			return
		}
		out[list] = out[list].Merge(h)
	}
	for _, b := range bs {
		if st, _ := b.up.State(); st != upstream.StateReady {
			continue
		}
		info, cat := b.up.Info(), b.up.Catalogue()
		add(listTools, info.HasTools(), cat.Hints.Tools)
		add(listPrompts, info.HasPrompts(), cat.Hints.Prompts)
		add(listResources, info.HasResources(), cat.Hints.Resources)
		add(listTemplates, info.HasResources(), cat.Hints.Templates)
	}
	return out
}
