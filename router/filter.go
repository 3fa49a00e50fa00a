package router

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/glob"
	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// Filter selects and presents one upstream's tools and prompts. It works on the
// upstream's own names, before namespacing, when the merged catalogue is built: an item
// it leaves out is neither listed nor routable (it does not exist for clients), and a
// renamed item is listed and called by its new name and reaches the upstream under its
// own. Nothing of it runs per request.
type Filter struct {
	Tools   Selection
	Prompts Selection
}

// Selection is what a Filter does to one list.
type Selection struct {
	Include   []string            // glob patterns (policy syntax); nil: every item
	Exclude   []string            // patterns applied after Include; nil: none
	Overrides map[string]Override // by the upstream's own name
}

// Override changes how one item is listed.
type Override struct {
	// Name is exposed (then namespaced) instead of the upstream's name; "" keeps it. It
	// must obey the spec's name rules. It takes part in collisions like any other name.
	Name        string
	Title       *string // replaces the item's title; nil keeps it
	Description *string // replaces the item's description; nil keeps it
}

// SetFilter applies f to the upstream added under the given name; call it before Start.
// An error for an invalid pattern or new name, or an unknown upstream, and nothing is
// applied.
func (r *Router) SetFilter(name string, f Filter) error {
	var b *backend
	for _, x := range r.all() {
		if x.name == name {
			b = x
		}
	}
	if b == nil {
		return fmt.Errorf("filtering upstream %q: no such upstream", name)
	}
	tools, err := compileSelection(&f.Tools)
	if err != nil {
		return fmt.Errorf("filtering the tools of upstream %q: %w", name, err)
	}
	prompts, err := compileSelection(&f.Prompts)
	if err != nil {
		return fmt.Errorf("filtering the prompts of upstream %q: %w", name, err)
	}
	b.filters = [2]*selection{tools, prompts}
	return nil
}

// The lists a Filter applies to, indexing backend.filters and backend.prepared.
const (
	filterTools = iota
	filterPrompts
)

// selection is a compiled Selection.
type selection struct {
	include   []glob.Glob // nil: every item
	exclude   []glob.Glob
	overrides map[string]override
	labels    []string // the keys of overrides, sorted: warnings come out in a stable order
}

// override is an Override with its replacements encoded as JSON.
type override struct {
	name               string
	title, description []byte // JSON strings; nil: keep
}

// compileSelection compiles s; nil when it changes nothing.
func compileSelection(s *Selection) (*selection, error) {
	if s.Include == nil && s.Exclude == nil && len(s.Overrides) == 0 {
		return nil, nil
	}
	c := &selection{overrides: make(map[string]override, len(s.Overrides))}
	var err error
	if s.Include != nil {
		if c.include, err = compileAll(s.Include); err != nil {
			return nil, err
		}
		if len(c.include) == 0 {
			return nil, fmt.Errorf("include: an empty list selects nothing")
		}
	}
	if c.exclude, err = compileAll(s.Exclude); err != nil {
		return nil, err
	}
	for orig, o := range s.Overrides {
		if o.Name != "" && !ValidName(o.Name, specMaxNameLength) {
			return nil, fmt.Errorf("%q: invalid new name %q", orig, o.Name)
		}
		co := override{name: o.Name}
		if o.Name == orig {
			co.name = ""
		}
		if o.Title != nil {
			co.title = jsonrpc.AppendString(nil, *o.Title)
		}
		if o.Description != nil {
			co.description = jsonrpc.AppendString(nil, *o.Description)
		}
		c.overrides[orig] = co
		c.labels = append(c.labels, orig)
	}
	slices.Sort(c.labels)
	return c, nil
}

func compileAll(pats []string) ([]glob.Glob, error) {
	out := make([]glob.Glob, 0, len(pats))
	for _, p := range pats {
		g, err := glob.Compile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// selects reports whether the upstream's item called name is served.
func (s *selection) selects(name string) bool {
	match := func(gs []glob.Glob) bool {
		for _, g := range gs {
			if g.Match(name) {
				return true
			}
		}
		return false
	}
	return (s.include == nil || match(s.include)) && !match(s.exclude)
}

// named is one of an upstream's tools or prompts, selected and presented as its filter
// says, before namespacing.
type named struct {
	original string          // the upstream's own name
	base     string          // the name to namespace: the override's, or original
	raw      json.RawMessage // as listed, with the title and description overrides applied
	renamed  bool
}

// preparedList caches what prepare made of one list of an upstream, keyed by the list's
// identity: a Catalogue is immutable once published and every fetch makes new slices,
// so the same first element and length mean the same list.
type preparedList struct {
	valid bool
	first *json.RawMessage
	n     int
	items []named
}

// prepare returns an upstream's items of one list as they take part in the merge: those
// its filter selects, with their overrides applied, ordered by the name they are
// namespaced under (then the upstream's own names before renamed ones, then by original
// name), which decides who keeps a name when two of one upstream's items collide.
// Without a filter that is every item in order of name, as the upstream named it. A
// filtered list is worked out once per catalogue fetch (warnings included), not on every
// rebuild; ready says the upstream is up (an empty list while it is down is no news).
// b.prepared is guarded by Router.rebuildMu.
func (b *backend) prepare(list int, items []json.RawMessage, what string, ready bool, log zerolog.Logger) []named {
	f := b.filters[list]
	if f == nil {
		out := make([]named, 0, len(items))
		for _, raw := range sortedBy(items, "name") {
			name, _, _ := jsonx.GetString(raw, "name")
			out = append(out, named{original: name, base: name, raw: raw})
		}
		return out
	}
	var first *json.RawMessage
	if len(items) > 0 {
		first = &items[0]
	}
	if c := &b.prepared[list]; c.valid && c.first == first && c.n == len(items) {
		return c.items
	}
	out := make([]named, 0, len(items))
	seen := make(map[string]bool, len(f.overrides))
	for _, raw := range items {
		name, ok, _ := jsonx.GetString(raw, "name")
		if !ok || name == "" {
			out = append(out, named{raw: raw}) // appendNamed reports it
			continue
		}
		o, has := f.overrides[name]
		if has {
			seen[name] = true
		}
		if !f.selects(name) {
			continue
		}
		it := named{original: name, base: name, raw: raw}
		if has {
			var changes []jsonx.Change
			if o.title != nil {
				changes = append(changes, jsonx.Change{Key: "title", Value: o.title})
			}
			if o.description != nil {
				changes = append(changes, jsonx.Change{Key: "description", Value: o.description})
			}
			if len(changes) > 0 {
				edited, err := jsonx.Edit(raw, changes)
				if err != nil {
					log.Warn().Str("upstream", b.name).Str(what, name).Err(err).Msgf("malformed %s; listed without its overrides", what)
				} else {
					it.raw = edited
				}
			}
			if o.name != "" {
				it.base, it.renamed = o.name, true
			}
		}
		out = append(out, it)
	}
	slices.SortStableFunc(out, func(x, y named) int {
		if c := strings.Compare(x.base, y.base); c != 0 {
			return c
		}
		if x.renamed != y.renamed {
			if x.renamed {
				return 1
			}
			return -1
		}
		return strings.Compare(x.original, y.original)
	})
	if ready {
		for _, l := range f.labels {
			if !seen[l] {
				log.Warn().Str("upstream", b.name).Str(what, l).
					Msgf("the configuration has a %s %q block, but the upstream does not list that %s; it applies once the upstream lists it", what, l, what)
			}
		}
		b.prepared[list] = preparedList{valid: true, first: first, n: len(items), items: out}
	}
	return out
}
