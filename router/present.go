package router

import (
	"bytes"
	"encoding/json"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
)

// Presenter changes how the merged catalogue is presented: the catalogue hooks of
// plugins. It runs when the catalogue changes, never per list request, with every listed
// item in a new snapshot; what it decides is cached in that snapshot. It may hide items
// (they are then neither listed nor routable: they do not exist for clients) and replace
// how an item is listed (description, title, annotations), never its name, URI or URI
// template: routing stays the router's. It must not keep items after it returns.
type Presenter interface {
	Present(items []Listed)
}

// Listed is one item of the merged catalogue as a Presenter sees it. Present sets Hide
// or replaces Raw.
type Listed struct {
	Kind     TargetKind // TargetTool, TargetPrompt or TargetResource
	Template bool       // a resource template (Name is its URI template)
	Name     string     // exposed name, URI or URI template
	Original string     // the upstream's own name or URI
	Upstream string
	Raw      json.RawMessage
	Hide     bool
}

// SetPresenter installs the catalogue's presenter (nil: none). Before Start it only
// installs it; after, the catalogue is presented anew (a reload changed the plugins) and
// clients are told of the lists that came out different.
func (r *Router) SetPresenter(p Presenter) {
	r.rebuildMu.Lock()
	r.presenter = p
	r.rebuildMu.Unlock()
	if r.started() {
		r.rebuild()
	}
}

// Represent rebuilds the catalogue for a presenter whose view changed (a plugin that
// restarted or came back): clients are told of the lists that came out different.
func (r *Router) Represent() { r.rebuild() }

// present applies p to a freshly built snapshot (not yet published).
func (s *snapshot) present(p Presenter, r *Router) {
	items := make([]Listed, 0, len(s.tools)+len(s.prompts)+len(s.resources)+len(s.templates))
	for _, e := range s.tools {
		items = append(items, Listed{Kind: TargetTool, Name: e.exposed, Original: e.original, Upstream: e.owner.name, Raw: e.raw})
	}
	for _, e := range s.prompts {
		items = append(items, Listed{Kind: TargetPrompt, Name: e.exposed, Original: e.original, Upstream: e.owner.name, Raw: e.raw})
	}
	for _, x := range s.resources {
		items = append(items, Listed{Kind: TargetResource, Name: x.exposed, Original: x.original, Upstream: x.owner.name, Raw: x.raw})
	}
	for _, t := range s.templates {
		name, _, _ := jsonx.GetString(t.raw, "uriTemplate")
		items = append(items, Listed{Kind: TargetResource, Template: true, Name: name, Original: name, Upstream: t.owner.name, Raw: t.raw})
	}
	p.Present(items)
	i := 0
	next := func() *Listed { i++; return &items[i-1] }
	// keep applies one item's decision to what it was built from and reports whether it
	// stays listed.
	keep := func(it *Listed, key string, raw *json.RawMessage) bool {
		if it.Hide {
			return false
		}
		if !bytes.Equal(it.Raw, *raw) {
			if name, ok, _ := jsonx.GetString(it.Raw, key); ok && name == it.Name && jsonx.CheckUnique(it.Raw) == nil {
				*raw = it.Raw
			} else {
				r.log.Warn().Str("upstream", it.Upstream).Str("item", it.Name).
					Msg("a catalogue hook's replacement of an item is not a JSON object with the same " + key + "; the item is listed as it was")
			}
		}
		return true
	}
	tools := s.tools[:0]
	for _, e := range s.tools {
		if keep(next(), "name", &e.raw) {
			tools = append(tools, e)
		} else {
			delete(s.toolByName, e.exposed)
		}
	}
	s.tools = tools
	prompts := s.prompts[:0]
	for _, e := range s.prompts {
		if keep(next(), "name", &e.raw) {
			prompts = append(prompts, e)
		} else {
			delete(s.promptByName, e.exposed)
		}
	}
	s.prompts = prompts
	resources := s.resources[:0]
	for _, x := range s.resources {
		if keep(next(), "uri", &x.raw) {
			resources = append(resources, x)
			continue
		}
		delete(s.resByURI, x.exposed)
		for k, v := range s.resByCanon {
			if v == x {
				delete(s.resByCanon, k)
			}
		}
		if s.hidden == nil {
			s.hidden = map[string]bool{}
		}
		for _, f := range append([]string{x.exposed, x.original}, x.forms...) {
			s.hidden[f] = true
		}
	}
	s.resources = resources
	templates := s.templates[:0]
	for _, t := range s.templates {
		if keep(next(), "uriTemplate", &t.raw) {
			templates = append(templates, t)
		}
	}
	s.templates = templates
	spec := s.byTemplateSpecificity[:0]
	for _, t := range s.byTemplateSpecificity {
		for _, kept := range templates {
			if kept == t {
				spec = append(spec, t)
				break
			}
		}
	}
	s.byTemplateSpecificity = spec
}
