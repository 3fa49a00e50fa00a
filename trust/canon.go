package trust

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"

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

var (
	errDepth    = errors.New("definition nested too deeply")
	errTooLarge = errors.New("definition larger than 2 GiB")
)

// text is one string of a definition, with where it is: a member's value, or a member's
// key (a schema's property names are read by the model too).
type text struct {
	node  int32 // where it is: an index into the definition's nodes (see pathOf)
	key   bool  // value is an object key at that node
	ascii bool  // value has no byte ≥ 0x80
	value string
}

// node is one step of a path into a definition: its key under its parent's node.
type node struct {
	parent int32 // -1 for a top-level member
	key    string
}

// The canonicaliser's own records hold no pointers (its buffers are appended to for
// every string of every definition; without pointers the garbage collector neither
// scans them nor makes each append pay a write barrier): a string is a span of src, or
// an index into decoded.
type (
	sref struct {
		off, n int32 // src[off:off+n]; when n < 0, decoded[off]
	}
	ctext struct {
		v     sref
		node  int32
		key   bool
		ascii bool
	}
	cnode struct {
		parent int32
		key    sref
	}
)

// str is the string r stands for.
func (c *canonicaliser) str(r sref) string {
	if r.n < 0 {
		return c.decoded[r.off]
	}
	return c.src[r.off : r.off+r.n]
}

// text is the i-th text, as the checks read it.
func (c *canonicaliser) text(i int) text {
	t := c.texts[i]
	return text{node: t.node, key: t.key, ascii: t.ascii, value: c.str(t.v)}
}

// pathOf spells a node of the last definition as a dotted path.
func (c *canonicaliser) pathOf(i int32) string {
	if i < 0 {
		return ""
	}
	var keys []string
	for ; i >= 0; i = c.nodes[i].parent {
		keys = append(keys, c.str(c.nodes[i].key))
	}
	slices.Reverse(keys)
	return strings.Join(keys, ".")
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
// returns nothing else (the vetter reads the canonicaliser's texts).
func canonical(k Kind, raw []byte) (canon []byte, err error) {
	var c canonicaliser
	if err := c.run(k, raw, string(raw)); err != nil {
		return nil, err
	}
	return c.out, nil
}

// hashOf is the hex SHA-256 of a canonical form.
func hashOf(canon []byte) string {
	h := sha256.Sum256(canon)
	return hex.EncodeToString(h[:])
}

// canonicaliser makes canonical forms. It reads each byte of a definition once, writing
// the canonical form as it goes and reordering an object's members in place when they
// were not sent in order. Its buffers are reused from one definition to the next: what
// a caller keeps of one run it copies.
type canonicaliser struct {
	// src is the definition's bytes as a string: a string without escapes is a
	// substring of it (texts and keys cost no allocation).
	src     string
	decoded []string // the strings with escapes, decoded
	out     []byte
	texts   []ctext
	nodes   []cnode
	spans   []span // a stack of the members of the objects being read

	top      []topMember // the definition's pinned members, in the order sent
	sorted   []span      // scratch for reordering an object's members
	body     []byte      // scratch for reordering an object's members
	topTexts []ctext     // scratch for putting texts in the order of the sorted members

	name, uriTemplate string // the first top-level "name" and "uriTemplate" strings
	hasName, hasURI   bool   // a "name" ("uriTemplate") member was met, string or not
	topOrdered        bool   // the pinned members were sent in increasing key order
}

// topMember is a pinned member of a definition, where its canonical form is in out and
// where its texts are in texts.
type topMember struct {
	key                sref
	start, end         int
	textStart, textEnd int
}

type span struct {
	key        sref
	start, end int // of the member ("key":value) in c.out
}

// run canonicalises raw (src is the same bytes as a string) into c.out, c.texts and
// c.nodes. The canonical form is the one the first implementation made (pinned by
// TestCanonicalGolden and compared with it by FuzzMatchesReference): the same bytes
// for every definition it accepted, and an error for every one it refused.
func (c *canonicaliser) run(k Kind, raw []byte, src string) error {
	if len(raw) > math.MaxInt32 {
		return errTooLarge
	}
	c.src = src
	c.out, c.texts, c.nodes, c.spans, c.top = c.out[:0], c.texts[:0], c.nodes[:0], c.spans[:0], c.top[:0]
	clear(c.decoded)
	c.decoded = c.decoded[:0]
	c.name, c.uriTemplate, c.hasName, c.hasURI, c.topOrdered = "", "", false, false, true
	keep := pinned[k]
	b := raw
	i := jsonx.SkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return jsonx.ErrNotObject
	}
	c.out = append(c.out, '{')
	i = jsonx.SkipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		c.out = append(c.out, '}')
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return jsonx.ErrSyntax
		}
		kr, _, verbatim, end, err := c.string(b, i)
		if err != nil {
			return err
		}
		key := c.str(kr)
		lit := b[i:end]
		i = jsonx.SkipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return jsonx.ErrSyntax
		}
		i = jsonx.SkipWS(b, i+1)
		if !slices.Contains(keep, key) {
			// Not pinned: skipped as the first implementation did, without validating.
			if i, err = jsonx.SkipValue(b, i); err != nil {
				return err
			}
		} else {
			if len(c.top) > 0 {
				c.out = append(c.out, ',')
			}
			m := topMember{key: kr, start: len(c.out), textStart: len(c.texts)}
			c.out = appendString(c.out, lit, kr, verbatim, c)
			c.out = append(c.out, ':')
			c.nodes = append(c.nodes, cnode{parent: -1, key: kr})
			isString := i < len(b) && b[i] == '"'
			if i, err = c.next(b, i, int32(len(c.nodes)-1), 1); err != nil {
				return err
			}
			m.end, m.textEnd = len(c.out), len(c.texts)
			if n := len(c.top); n > 0 && c.str(c.top[n-1].key) >= c.str(m.key) {
				c.topOrdered = false
			}
			c.top = append(c.top, m)
			// The name an item is listed by: the first "name" member's value when it is
			// a string (as jsonx.GetString reads it); for a template without one, the
			// first "uriTemplate".
			switch {
			case key == "name" && !c.hasName:
				c.hasName = true
				if isString {
					c.name = c.str(c.texts[len(c.texts)-1].v)
				}
			case key == "uriTemplate" && !c.hasURI:
				c.hasURI = true
				if isString {
					c.uriTemplate = c.str(c.texts[len(c.texts)-1].v)
				}
			}
		}
		i = jsonx.SkipWS(b, i)
		if i >= len(b) {
			return jsonx.ErrSyntax
		}
		if b[i] == '}' {
			break
		}
		if b[i] != ',' {
			return jsonx.ErrSyntax
		}
		i = jsonx.SkipWS(b, i+1)
	}
	c.out = append(c.out, '}')
	c.sortTop()
	return nil
}

// sortTop puts the top-level members in key order, as the first implementation did:
// with slices.SortFunc (which is not stable), so that a definition with a duplicate
// top-level key keeps the order that sort gave it.
func (c *canonicaliser) sortTop() {
	if len(c.top) < 2 || c.topOrdered { // in increasing order, no key twice: as sorted
		return
	}
	slices.SortFunc(c.top, func(a, b topMember) int { return strings.Compare(c.str(a.key), c.str(b.key)) })
	if slices.IsSortedFunc(c.top, func(a, b topMember) int { return a.start - b.start }) {
		return
	}
	c.body = c.body[:0]
	c.topTexts = c.topTexts[:0]
	for i, m := range c.top {
		if i > 0 {
			c.body = append(c.body, ',')
		}
		c.body = append(c.body, c.out[m.start:m.end]...)
		c.topTexts = append(c.topTexts, c.texts[m.textStart:m.textEnd]...)
	}
	c.out = append(append(c.out[:1], c.body...), '}')
	copy(c.texts, c.topTexts)
}

// next appends the canonical form of the JSON value at b[i] (after optional whitespace)
// and returns the index just past it. path is the node the value is at.
func (c *canonicaliser) next(b []byte, i int, path int32, depth int) (int, error) {
	if depth > maxDepth {
		return 0, errDepth
	}
	i = jsonx.SkipWS(b, i)
	if i >= len(b) {
		return 0, jsonx.ErrSyntax
	}
	switch b[i] {
	case '{':
		c.out = append(c.out, '{')
		base := len(c.out)
		first := len(c.spans) // on an error the spans are dropped with the rest (see run)
		ordered := true       // the keys so far are in increasing order (so none twice)
		i = jsonx.SkipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			c.out = append(c.out, '}')
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return 0, jsonx.ErrSyntax
			}
			kr, ascii, verbatim, end, err := c.string(b, i)
			if err != nil {
				return 0, err
			}
			lit := b[i:end]
			i = jsonx.SkipWS(b, end)
			if i >= len(b) || b[i] != ':' {
				return 0, jsonx.ErrSyntax
			}
			if len(c.spans) > first {
				c.out = append(c.out, ',')
			}
			m := span{key: kr, start: len(c.out)}
			c.texts = append(c.texts, ctext{node: path, v: kr, key: true, ascii: ascii})
			c.out = appendString(c.out, lit, kr, verbatim, c)
			c.out = append(c.out, ':')
			c.nodes = append(c.nodes, cnode{parent: path, key: kr})
			if i, err = c.next(b, i+1, int32(len(c.nodes)-1), depth+1); err != nil {
				return 0, err
			}
			m.end = len(c.out)
			if ordered && len(c.spans) > first && c.str(c.spans[len(c.spans)-1].key) >= c.str(m.key) {
				ordered = false // not sent in order, or a key twice
			}
			c.spans = append(c.spans, m)
			i = jsonx.SkipWS(b, i)
			if i >= len(b) {
				return 0, jsonx.ErrSyntax
			}
			if b[i] == '}' {
				i++
				break
			}
			if b[i] != ',' {
				return 0, jsonx.ErrSyntax
			}
			i = jsonx.SkipWS(b, i+1)
		}
		if !ordered {
			if err := c.order(base, c.spans[first:]); err != nil {
				return 0, err
			}
		}
		c.spans = c.spans[:first]
		c.out = append(c.out, '}')
		return i, nil
	case '[':
		c.out = append(c.out, '[')
		i = jsonx.SkipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			c.out = append(c.out, ']')
			return i + 1, nil
		}
		for n := 0; ; n++ {
			if n > 0 {
				c.out = append(c.out, ',')
			}
			var err error
			if i, err = c.next(b, i, path, depth+1); err != nil {
				return 0, err
			}
			i = jsonx.SkipWS(b, i)
			if i >= len(b) {
				return 0, jsonx.ErrSyntax
			}
			if b[i] == ']' {
				c.out = append(c.out, ']')
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, jsonx.ErrSyntax
			}
			i++
		}
	case '"':
		r, ascii, verbatim, end, err := c.string(b, i)
		if err != nil {
			return 0, err
		}
		c.texts = append(c.texts, ctext{node: path, v: r, ascii: ascii})
		c.out = appendString(c.out, b[i:end], r, verbatim, c)
		return end, nil
	default: // numbers, true, false, null: as written
		end, err := jsonx.ScanValue(b[i:], 0)
		if err != nil {
			return 0, err
		}
		c.out = append(c.out, b[i:i+end]...)
		return i + end, nil
	}
}

// order puts an object's members (written from out[base:]) in key order; a duplicate key
// is an error, having no one meaning. It is called only when the keys were not sent in
// increasing order.
func (c *canonicaliser) order(base int, members []span) error {
	c.sorted = append(c.sorted[:0], members...)
	slices.SortStableFunc(c.sorted, func(a, b span) int { return strings.Compare(c.str(a.key), c.str(b.key)) })
	if c.hasDup(c.sorted) {
		return jsonx.ErrSyntax
	}
	c.body = c.body[:0]
	for i, m := range c.sorted {
		if i > 0 {
			c.body = append(c.body, ',')
		}
		c.body = append(c.body, c.out[m.start:m.end]...)
	}
	c.out = append(c.out[:base], c.body...)
	return nil
}

func (c *canonicaliser) hasDup(sorted []span) bool {
	for i := 1; i < len(sorted); i++ {
		if c.str(sorted[i].key) == c.str(sorted[i-1].key) {
			return true
		}
	}
	return false
}

// string reads the string literal at b[i] == '"', strictly (as jsonx.ScanValue does),
// and returns its value, whether the value is ASCII, whether the literal is its own
// canonical encoding (no escape, valid UTF-8, no U+2028 or U+2029: most strings), and
// the index just past it. A value without escapes is a span of c.src.
func (c *canonicaliser) string(b []byte, i int) (s sref, ascii, verbatim bool, end int, err error) {
	j := i + 1
	plain, high := true, false
	for {
		// Eight bytes at a time while none of them ends the string, escapes, is a
		// control character or (until one is met) is not ASCII; then straight to the
		// first that is (the lowest bit of the tests is exact: a borrow only goes up).
		highMask := uint64(hi)
		if high {
			highMask = 0
		}
		for j+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[j:])
			if m := (hasZero(x^(lo*'"'))|hasZero(x^(lo*'\\'))|hasLess(x, 0x20))&hi | x&highMask; m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		if j >= len(b) {
			return sref{}, false, false, 0, jsonx.ErrSyntax
		}
		switch ch := b[j]; {
		case ch == '"':
			end = j + 1
			inner := b[i+1 : j]
			if plain && (!high || utf8.Valid(inner)) {
				return sref{int32(i + 1), int32(j - i - 1)}, !high, !high || !hasLineSeparator(inner), end, nil
			}
			s, err := jsonx.Unquote(b[i:end])
			if err != nil {
				return sref{}, false, false, 0, err
			}
			c.decoded = append(c.decoded, s)
			return sref{int32(len(c.decoded) - 1), -1}, isASCII(s), false, end, nil
		case ch == '\\':
			plain = false
			if j+1 >= len(b) {
				return sref{}, false, false, 0, jsonx.ErrSyntax
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) || !isHex(b[j+5]) {
					return sref{}, false, false, 0, jsonx.ErrSyntax
				}
				j += 6
			default:
				return sref{}, false, false, 0, jsonx.ErrSyntax
			}
		case ch < 0x20:
			return sref{}, false, false, 0, jsonx.ErrSyntax
		case ch >= utf8.RuneSelf:
			high = true
			j++
		default:
			j++
		}
	}
}

// Word-at-a-time tests of eight bytes: lo has a one in every byte, hi the top bit.
const (
	lo = 0x0101010101010101
	hi = 0x8080808080808080
)

// hasZero has the top bit set in some byte (and then only the test against hi is
// meaningful) when a byte of x is zero.
func hasZero(x uint64) uint64 { return (x - lo) &^ x }

// hasLess is hasZero for "a byte of x is less than n" (n ≤ 128).
func hasLess(x uint64, n byte) uint64 { return (x - lo*uint64(n)) &^ x }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// hasLineSeparator reports whether s has U+2028 or U+2029, which the canonical form
// escapes.
func hasLineSeparator(s []byte) bool {
	for {
		i := bytes.IndexByte(s, 0xE2)
		if i < 0 || i+2 >= len(s) {
			return false
		}
		if s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9) {
			return true
		}
		s = s[i+1:]
	}
}

// appendString appends a string's canonical encoding: its literal as sent when that is
// already canonical, else its value (r) encoded.
func appendString(out, lit []byte, r sref, verbatim bool, c *canonicaliser) []byte {
	if verbatim {
		return append(out, lit...)
	}
	return jsonrpc.AppendString(out, c.str(r))
}
