package trust

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// Kind is which list a definition comes from.
type Kind string

// The kinds of definition that are pinned and screened.
const (
	KindTool     Kind = "tool"
	KindPrompt   Kind = "prompt"
	KindTemplate Kind = "template"
)

// Kinds in the order they are reported.
var Kinds = []Kind{KindTool, KindPrompt, KindTemplate}

// pinned lists, per kind, the members of a definition that make it up: what the model
// reads and what the call is shaped by. Other members (icons, _meta, execution hints)
// are not pinned.
var pinned = map[Kind][]string{
	KindTool:     {"annotations", "description", "inputSchema", "name", "outputSchema", "title"},
	KindPrompt:   {"arguments", "description", "name", "title"},
	KindTemplate: {"annotations", "description", "mimeType", "name", "title", "uriTemplate"},
}

// maxDepth bounds the nesting canonicalisation follows (the transport already bounds
// message depth; this keeps the recursion bounded on its own).
const maxDepth = 64

var errDepth = errors.New("definition nested too deeply")

// text is one string of a definition, with where it is: a member's value, or a member's
// key (a schema's property names are read by the model too).
type text struct {
	node  int32 // where it is: an index into the definition's nodes (see pathOf)
	value string
	key   bool // value is an object key at that node
}

// node is one step of a path into a definition: its key under its parent's node.
type node struct {
	parent int32 // -1 for a top-level member
	key    string
}

// pathOf spells a node as a dotted path, e.g. inputSchema.properties.path.description.
func pathOf(nodes []node, i int32) string {
	if i < 0 {
		return ""
	}
	var keys []string
	for ; i >= 0; i = nodes[i].parent {
		keys = append(keys, nodes[i].key)
	}
	slices.Reverse(keys)
	return strings.Join(keys, ".")
}

// canonical returns the canonical form of a definition of kind k: its pinned members
// only, keys sorted at every level, no insignificant whitespace, strings re-encoded one
// way. Two definitions are the same exactly when their canonical forms are. It also
// returns the definition's strings, for screening.
func canonical(k Kind, raw []byte) (canon []byte, texts []text, err error) {
	canon, texts, _, err = canonicalNodes(k, raw)
	return canon, texts, err
}

// canonicalNodes is canonical with the nodes its texts' paths are made of.
func canonicalNodes(k Kind, raw []byte) (canon []byte, texts []text, nodes []node, err error) {
	type member struct {
		key string
		val []byte
	}
	var ms []member
	keep := pinned[k]
	err = jsonx.Each(raw, func(f jsonx.Field) bool {
		key, e := jsonx.Unquote(f.RawKey)
		if e != nil {
			err = e
			return false
		}
		if slices.Contains(keep, key) {
			ms = append(ms, member{key, f.Value})
		}
		return true
	})
	if err != nil {
		return nil, nil, nil, err
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	c := canonicaliser{out: make([]byte, 0, len(raw)+16), texts: make([]text, 0, 32), nodes: make([]node, 0, 32)}
	c.out = append(c.out, '{')
	for i, m := range ms {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = jsonrpc.AppendString(c.out, m.key)
		c.out = append(c.out, ':')
		c.nodes = append(c.nodes, node{parent: -1, key: m.key})
		if err := c.value(m.val, int32(len(c.nodes)-1), 1); err != nil {
			return nil, nil, nil, err
		}
	}
	c.out = append(c.out, '}')
	return c.out, c.texts, c.nodes, nil
}

// hashOf is the hex SHA-256 of a canonical form.
func hashOf(canon []byte) string {
	h := sha256.Sum256(canon)
	return hex.EncodeToString(h[:])
}

type canonicaliser struct {
	out   []byte
	texts []text
	nodes []node
	spans []span // a stack of the members of the objects being read
}

// value appends the canonical form of the JSON value at the start of v (after optional
// whitespace) and returns the rest of v after it. Each byte is read once; an object's
// members are canonicalised into the output, then reordered by key in place.
func (c *canonicaliser) value(v []byte, path int32, depth int) error {
	rest, err := c.next(v, path, depth)
	if err != nil {
		return err
	}
	if len(bytesTrimWS(rest)) != 0 {
		return jsonx.ErrSyntax
	}
	return nil
}

func bytesTrimWS(b []byte) []byte {
	i := jsonx.SkipWS(b, 0)
	return b[i:]
}

type span struct {
	key        string
	start, end int // of the member ("key":value) in c.out
}

func (c *canonicaliser) next(v []byte, path int32, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, errDepth
	}
	v = bytesTrimWS(v)
	if len(v) == 0 {
		return nil, jsonx.ErrSyntax
	}
	switch v[0] {
	case '{':
		c.out = append(c.out, '{')
		base := len(c.out)
		first := len(c.spans)
		defer func() { c.spans = c.spans[:first] }()
		v = bytesTrimWS(v[1:])
		if len(v) > 0 && v[0] == '}' {
			c.out = append(c.out, '}')
			return v[1:], nil
		}
		for {
			if len(v) == 0 || v[0] != '"' {
				return nil, jsonx.ErrSyntax
			}
			end, err := jsonx.ScanValue(v, 0)
			if err != nil {
				return nil, err
			}
			key, err := internKey(v[:end])
			if err != nil {
				return nil, err
			}
			v = bytesTrimWS(v[end:])
			if len(v) == 0 || v[0] != ':' {
				return nil, jsonx.ErrSyntax
			}
			if len(c.spans) > first {
				c.out = append(c.out, ',')
			}
			m := span{key: key, start: len(c.out)}
			c.texts = append(c.texts, text{node: path, value: key, key: true})
			c.out = jsonrpc.AppendString(c.out, key)
			c.out = append(c.out, ':')
			c.nodes = append(c.nodes, node{parent: path, key: key})
			if v, err = c.next(v[1:], int32(len(c.nodes)-1), depth+1); err != nil {
				return nil, err
			}
			m.end = len(c.out)
			c.spans = append(c.spans, m)
			v = bytesTrimWS(v)
			if len(v) == 0 {
				return nil, jsonx.ErrSyntax
			}
			if v[0] == '}' {
				v = v[1:]
				break
			}
			if v[0] != ',' {
				return nil, jsonx.ErrSyntax
			}
			v = bytesTrimWS(v[1:])
		}
		members := c.spans[first:]
		if !slices.IsSortedFunc(members, func(a, b span) int { return strings.Compare(a.key, b.key) }) || hasDup(members) {
			sorted := slices.Clone(members)
			slices.SortStableFunc(sorted, func(a, b span) int { return strings.Compare(a.key, b.key) })
			if hasDup(sorted) {
				return nil, jsonx.ErrSyntax // a duplicate key has no one meaning
			}
			body := make([]byte, 0, len(c.out)-base)
			for i, m := range sorted {
				if i > 0 {
					body = append(body, ',')
				}
				body = append(body, c.out[m.start:m.end]...)
			}
			c.out = append(c.out[:base], body...)
		}
		c.out = append(c.out, '}')
		return v, nil
	case '[':
		c.out = append(c.out, '[')
		v = bytesTrimWS(v[1:])
		if len(v) > 0 && v[0] == ']' {
			c.out = append(c.out, ']')
			return v[1:], nil
		}
		for n := 0; ; n++ {
			if n > 0 {
				c.out = append(c.out, ',')
			}
			var err error
			if v, err = c.next(v, path, depth+1); err != nil {
				return nil, err
			}
			v = bytesTrimWS(v)
			if len(v) == 0 {
				return nil, jsonx.ErrSyntax
			}
			if v[0] == ']' {
				c.out = append(c.out, ']')
				return v[1:], nil
			}
			if v[0] != ',' {
				return nil, jsonx.ErrSyntax
			}
			v = v[1:]
		}
	case '"':
		end, err := jsonx.ScanValue(v, 0)
		if err != nil {
			return nil, err
		}
		s, err := jsonx.Unquote(v[:end])
		if err != nil {
			return nil, err
		}
		c.texts = append(c.texts, text{node: path, value: s})
		c.out = jsonrpc.AppendString(c.out, s)
		return v[end:], nil
	default: // numbers, true, false, null: as written
		end, err := jsonx.ScanValue(v, 0)
		if err != nil {
			return nil, err
		}
		c.out = append(c.out, v[:end]...)
		return v[end:], nil
	}
}

func hasDup(sorted []span) bool {
	for i := 1; i < len(sorted); i++ {
		if sorted[i].key == sorted[i-1].key {
			return true
		}
	}
	return false
}

// internKey decodes an object key, without allocating for the keys schemas repeat.
func internKey(lit []byte) (string, error) {
	switch string(lit) { // the conversion does not allocate in a switch
	case `"type"`:
		return "type", nil
	case `"description"`:
		return "description", nil
	case `"properties"`:
		return "properties", nil
	case `"required"`:
		return "required", nil
	case `"items"`:
		return "items", nil
	case `"enum"`:
		return "enum", nil
	case `"default"`:
		return "default", nil
	case `"title"`:
		return "title", nil
	case `"additionalProperties"`:
		return "additionalProperties", nil
	case `"$schema"`:
		return "$schema", nil
	case `"format"`:
		return "format", nil
	case `"minimum"`:
		return "minimum", nil
	case `"maximum"`:
		return "maximum", nil
	case `"anyOf"`:
		return "anyOf", nil
	case `"readOnlyHint"`:
		return "readOnlyHint", nil
	case `"destructiveHint"`:
		return "destructiveHint", nil
	case `"idempotentHint"`:
		return "idempotentHint", nil
	case `"openWorldHint"`:
		return "openWorldHint", nil
	}
	return jsonx.Unquote(lit)
}
