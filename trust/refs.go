package trust

import (
	"fmt"
	"slices"
	"strings"
)

// The cross-reference check (tool shadowing): the words of a definition's texts that may
// name a tool, kept with its verdict, against the tool names of the other upstreams.

// ref is a name-like word of a definition's text that may name a tool, and where (a
// node of the verdict's nodes).
type ref struct {
	name string
	node int32
}

// keepRefs copies refs for a verdict to keep, with the nodes of their paths only (named
// only for a finding). A node's parent comes before it in nodes.
func (v *Vetter) keepRefs(refs []ref, c *canonicaliser) ([]ref, []node) {
	const unused, used = -1, -2
	nodes := c.nodes
	remap := slices.Grow(v.remap[:0], len(nodes))[:len(nodes)]
	for i := range remap {
		remap[i] = unused
	}
	n := 0
	for _, r := range refs {
		for i := r.node; i >= 0 && remap[i] == unused; i = nodes[i].parent {
			remap[i] = used
			n++
		}
	}
	path := make([]node, 0, n)
	for i, nd := range nodes {
		if remap[i] == used {
			parent := nd.parent
			if parent >= 0 {
				parent = remap[parent]
			}
			remap[i] = int32(len(path))
			path = append(path, node{parent: parent, key: c.str(nd.key)})
		}
	}
	kept := make([]ref, len(refs))
	for i, r := range refs {
		kept[i] = ref{name: r.name, node: -1}
		if r.node >= 0 {
			kept[i].node = remap[r.node]
		}
	}
	v.remap = remap
	return kept, path
}

// toolOwners maps every distinctive tool name to the upstreams that list it (in name
// order), for the cross-reference check.
func toolOwners(last map[string]*seen) map[string]owners {
	n := 0
	for _, s := range last {
		n += len(s.items[0])
	}
	out := make(map[string]owners, n)
	for _, up := range sortedKeys(last) {
		for _, vd := range last[up].items[0] {
			if !distinctive(vd.name) {
				continue
			}
			o, ok := out[vd.name]
			switch {
			case !ok:
				out[vd.name] = owners{first: up}
			case o.first != up && !slices.Contains(o.more, up):
				o.more = append(o.more, up)
				out[vd.name] = o
			}
		}
	}
	return out
}

// owners are the upstreams that list a tool name: most names have one.
type owners struct {
	first string
	more  []string
}

// others returns the owners but up.
func (o owners) others(up string) []string {
	var out []string
	if o.first != up {
		out = append(out, o.first)
	}
	for _, u := range o.more {
		if u != up {
			out = append(out, u)
		}
	}
	return out
}

// distinctive reports whether a tool name is specific enough that its appearance in
// another server's text is a reference to it, not an ordinary word: it has a separator
// or an inner capital, and some length.
func distinctive(name string) bool {
	if len(name) < 5 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == '_' || c == '-' || c == '.' || i > 0 && c >= 'A' && c <= 'Z' {
			return true
		}
	}
	return false
}

// minRef is the length of the shortest text whose words may name tools.
const minRef = 5

// addRef adds a distinctive word of a definition's text (a value, not a key) at node to
// refs, with the names it may stand for: itself, and what follows a client's or the
// proxy's prefix (mcp_tool_send_email, github__create_issue). A name already in refs
// keeps its first node.
func addRef(refs *[]ref, w string, node int32) {
	if !distinctive(w) {
		return
	}
	add := func(name string) {
		for _, r := range *refs {
			if r.name == name {
				return
			}
		}
		*refs = append(*refs, ref{name, node})
	}
	add(w)
	for j := 0; j < len(w)-1; j++ {
		if w[j] == '_' || w[j] == '.' {
			if rest := strings.TrimLeft(w[j:], "_."); rest != w && distinctive(rest) {
				add(rest)
			}
		}
	}
}

// crossReferences reports the tool names of other upstreams that a definition's texts
// mention (tool shadowing: a description that tells the model how to use another
// server's tool).
func crossReferences(vd *verdict, up string, own map[string]bool, owners map[string]owners) []Finding {
	var out []Finding
	for _, r := range vd.refs {
		o, ok := owners[r.name]
		if !ok || own[r.name] {
			continue
		}
		others := o.others(up)
		if len(others) == 0 {
			continue
		}
		out = append(out, Finding{Check: CheckCrossReference, Severity: Medium, Field: pathOf(vd.nodes, r.node),
			Detail: fmt.Sprintf("names %q, a tool of upstream %s", r.name, strings.Join(others, ", "))})
	}
	if len(out) > 1 {
		out = dedupe(out)
	}
	return out
}

// eachName calls fn with every name-like word of s, five characters or longer: runs of
// letters, digits, '_', '-' and '.', without leading or trailing '.' and '-'.
func eachName(s string, fn func(string)) {
	start := -1
	for i := 0; i <= len(s); i++ {
		c := byte(0)
		if i < len(s) {
			c = s[i]
		}
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			if i-start >= 5 {
				if w := trimDotsDashes(s[start:i]); len(w) >= 5 {
					fn(w)
				}
			}
			start = -1
		}
	}
}

// trimDotsDashes is strings.Trim(s, ".-") without building the cut set on each call.
func trimDotsDashes(s string) string {
	for len(s) > 0 && (s[0] == '.' || s[0] == '-') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == '.' || s[len(s)-1] == '-') {
		s = s[:len(s)-1]
	}
	return s
}
