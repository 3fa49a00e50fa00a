package policy

import (
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// Match selects items and principals with the matchers of a rule (tools, prompts,
// resources, upstreams, principals, groups), without a condition: how plugins and other
// stages say what they apply to, in the policy's syntax. Empty matchers match everything;
// the kinds selected are those whose pattern list is set (all when none is).
type Match struct {
	Tools, Prompts, Resources []string
	Upstreams                 []string
	Principals, Groups        []string
}

// Selector is a compiled Match; immutable, safe for concurrent use, and free of
// allocations when it decides.
type Selector struct {
	c compiledRule
}

// NewSelector compiles m; an error names a bad pattern.
func NewSelector(name string, m Match) (*Selector, error) {
	c, err := compileMatchers(Rule{Name: name, Tools: m.Tools, Prompts: m.Prompts, Resources: m.Resources,
		Upstreams: m.Upstreams, Principals: m.Principals, Groups: m.Groups})
	if err != nil {
		return nil, err
	}
	return &Selector{c: c}, nil
}

// Selects reports whether the item and the principal are selected.
func (s *Selector) Selects(p *principal.Principal, it *Item) bool { return s.c.applies(p, it) }

// SelectsItem reports whether the item is selected, whoever asks (principals and
// groups are not considered): for what is decided once for everyone, such as how the
// catalogue is presented.
func (s *Selector) SelectsItem(it *Item) bool {
	c := s.c
	c.who = who{}
	return c.applies(nil, it)
}

// ItemOf is the item a routed request's target is, as rules and selectors see it.
func ItemOf(t *router.Target) Item { return itemOf(t) }
