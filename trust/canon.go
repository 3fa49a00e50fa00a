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
	path  string // dotted, e.g. inputSchema.properties.path.description
	value string
	key   bool // value is an object key at path
}

// canonical returns the canonical form of a definition of kind k: its pinned members
// only, keys sorted at every level, no insignificant whitespace, strings re-encoded one
// way. Two definitions are the same exactly when their canonical forms are. It also
// returns the definition's strings, for screening.
func canonical(k Kind, raw []byte) (canon []byte, texts []text, err error) {
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
		return nil, nil, err
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	c := canonicaliser{out: make([]byte, 0, len(raw))}
	c.out = append(c.out, '{')
	for i, m := range ms {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = jsonrpc.AppendString(c.out, m.key)
		c.out = append(c.out, ':')
		if err := c.value(m.val, m.key, 1); err != nil {
			return nil, nil, err
		}
	}
	c.out = append(c.out, '}')
	return c.out, c.texts, nil
}

// hashOf is the hex SHA-256 of a canonical form.
func hashOf(canon []byte) string {
	h := sha256.Sum256(canon)
	return hex.EncodeToString(h[:])
}

type canonicaliser struct {
	out   []byte
	texts []text
}

func (c *canonicaliser) value(v []byte, path string, depth int) error {
	if depth > maxDepth {
		return errDepth
	}
	i := jsonx.SkipWS(v, 0)
	if i >= len(v) {
		return jsonx.ErrSyntax
	}
	switch v[i] {
	case '{':
		type member struct {
			key string
			val []byte
		}
		var ms []member
		var err error
		if e := jsonx.Each(v[i:], func(f jsonx.Field) bool {
			key, e := jsonx.Unquote(f.RawKey)
			if e != nil {
				err = e
				return false
			}
			ms = append(ms, member{key, f.Value})
			return true
		}); e != nil {
			return e
		}
		if err != nil {
			return err
		}
		slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
		c.out = append(c.out, '{')
		for j, m := range ms {
			if j > 0 {
				if m.key == ms[j-1].key {
					return jsonx.ErrSyntax // a duplicate key has no one meaning
				}
				c.out = append(c.out, ',')
			}
			c.texts = append(c.texts, text{path: path, value: m.key, key: true})
			c.out = jsonrpc.AppendString(c.out, m.key)
			c.out = append(c.out, ':')
			if err := c.value(m.val, path+"."+m.key, depth+1); err != nil {
				return err
			}
		}
		c.out = append(c.out, '}')
	case '[':
		c.out = append(c.out, '[')
		j := jsonx.SkipWS(v, i+1)
		n := 0
		for j < len(v) && v[j] != ']' {
			end, err := jsonx.ScanValue(v, j)
			if err != nil {
				return err
			}
			if n > 0 {
				c.out = append(c.out, ',')
			}
			if err := c.value(v[j:end], path, depth+1); err != nil {
				return err
			}
			n++
			j = jsonx.SkipWS(v, end)
			if j < len(v) && v[j] == ',' {
				j = jsonx.SkipWS(v, j+1)
			}
		}
		c.out = append(c.out, ']')
	case '"':
		end, err := jsonx.ScanValue(v, i)
		if err != nil {
			return err
		}
		s, err := jsonx.Unquote(v[i:end])
		if err != nil {
			return err
		}
		c.texts = append(c.texts, text{path: path, value: s})
		c.out = jsonrpc.AppendString(c.out, s)
	default: // numbers, true, false, null: as written
		end, err := jsonx.ScanValue(v, i)
		if err != nil {
			return err
		}
		c.out = append(c.out, v[i:end]...)
	}
	return nil
}
