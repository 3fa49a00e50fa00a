package trust

// The first implementation of the canonical form, the text checks and the collection of
// words that may name tools, kept as the reference the faster one is compared with
// (TestMatchesReference, FuzzMatchesReference): the same bytes, texts and findings for
// every input.

import (
	"slices"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

func refCanonicalNodes(k Kind, raw []byte) (canon []byte, texts []text, nodes []node, err error) {
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
	c := refCanonicaliser{out: make([]byte, 0, len(raw)+16), texts: make([]text, 0, 32), nodes: make([]node, 0, 32)}
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

type refCanonicaliser struct {
	out   []byte
	texts []text
	nodes []node
	spans []refSpan // a stack of the members of the objects being read
}

func (c *refCanonicaliser) value(v []byte, path int32, depth int) error {
	rest, err := c.next(v, path, depth)
	if err != nil {
		return err
	}
	if len(bytesTrimWS(rest)) != 0 {
		return jsonx.ErrSyntax
	}
	return nil
}

type refSpan struct {
	key        string
	start, end int // of the member ("key":value) in c.out
}

func (c *refCanonicaliser) next(v []byte, path int32, depth int) ([]byte, error) {
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
			key, err := refInternKey(v[:end])
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
			m := refSpan{key: key, start: len(c.out)}
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
		if !slices.IsSortedFunc(members, func(a, b refSpan) int { return strings.Compare(a.key, b.key) }) || refHasDup(members) {
			sorted := slices.Clone(members)
			slices.SortStableFunc(sorted, func(a, b refSpan) int { return strings.Compare(a.key, b.key) })
			if refHasDup(sorted) {
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

func refHasDup(sorted []refSpan) bool {
	for i := 1; i < len(sorted); i++ {
		if sorted[i].key == sorted[i-1].key {
			return true
		}
	}
	return false
}

func refInternKey(lit []byte) (string, error) {
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

func refScreenTexts(texts []text, nodes []node, clean map[refCleanKey]bool) []Finding {
	var out []Finding
	var hits []uint8 // by phrase: which of its word groups the text has (reused)
	for i := range texts {
		t := &texts[i]
		short := len(t.value) <= maxCleanCached
		if short && clean[refCleanKey{t.value, t.key}] {
			continue
		}
		before := len(out)
		field := refFieldOf{nodes, t}
		if !isASCII(t.value) {
			out = screenUnicode(out, field.String(), t.value)
		}
		if len(t.value) >= minScreened {
			lower := strings.ToLower(t.value) // no copy for text without capitals
			if !t.key {                       // property names carry credential files (full-schema poisoning), not phrases
				out = refScreenPhrases(out, t.value, lower, field, &hits)
			}
			if strings.ContainsAny(lower, "._/~") || strings.Contains(lower, "claude_desktop") {
				for _, c := range credentialFiles {
					if strings.Contains(lower, c) {
						out = append(out, Finding{Check: CheckCredentialFile, Severity: High, Field: field.String(), Detail: quoteExcerpt(c)})
						break
					}
				}
			}
		}
		if short && len(out) == before && clean != nil {
			if len(clean) >= maxClean {
				clear(clean)
			}
			clean[refCleanKey{t.value, t.key}] = true
		}
	}
	if len(out) > 1 {
		out = dedupe(out)
	}
	return out
}

type refCleanKey struct {
	text string
	key  bool
}

func refScreenPhrases(out []Finding, orig, lower string, field refFieldOf, hits *[]uint8) []Finding {
	if *hits == nil {
		*hits = make([]uint8, len(phrases))
	}
	h := *hits
	clear(h)
	any := false
	refEachWord(lower, func(w string) {
		for _, tr := range refTriggers[w] {
			h[tr.phrase] |= tr.bit
			any = true
		}
	})
	for i, p := range phrases {
		if p.mark != "" && strings.Contains(lower, p.mark) {
			h[i] |= 1
			any = true
		}
	}
	if !any {
		return out
	}
	for i, p := range phrases {
		if uint64(h[i]) != p.need() {
			continue
		}
		if loc := p.re.FindStringIndex(lower); loc != nil {
			m := lower[loc[0]:loc[1]]
			if len(lower) == len(orig) { // quote it as written when lowering kept the offsets
				m = orig[loc[0]:loc[1]]
			}
			out = append(out, Finding{Check: p.check, Severity: p.severity, Field: field.String(), Detail: quoteExcerpt(m)})
		}
	}
	return out
}

func refEachWord(s string, fn func(string)) {
	start := -1
	for i := 0; i <= len(s); i++ {
		if i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] == '\'') {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			fn(s[start:i])
			start = -1
		}
	}
}

var refTriggers = func() map[string][]trigger {
	m := map[string][]trigger{}
	for i, p := range phrases {
		for _, w := range p.words {
			m[w] = append(m[w], trigger{i, 1})
		}
		for g, ws := range p.also {
			for _, w := range ws {
				m[w] = append(m[w], trigger{i, 2 << g})
			}
		}
	}
	return m
}()

func refRefsOf(texts []text) []ref {
	var out []ref
	add := func(name string, t *text) {
		for _, r := range out {
			if r.name == name {
				return
			}
		}
		out = append(out, ref{name, t.node})
	}
	for i := range texts {
		t := &texts[i]
		if t.key || len(t.value) < 5 {
			continue
		}
		refEachName(t.value, func(w string) {
			if !distinctive(w) {
				return
			}
			add(w, t)
			for j := 0; j < len(w)-1; j++ { // what follows a prefix: mcp_tool_send_email, github__create_issue
				if w[j] == '_' || w[j] == '.' {
					if rest := strings.TrimLeft(w[j:], "_."); rest != w && distinctive(rest) {
						add(rest, t)
					}
				}
			}
		})
	}
	return out
}

func refEachName(s string, fn func(string)) {
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
				if w := strings.Trim(s[start:i], ".-"); len(w) >= 5 {
					fn(w)
				}
			}
			start = -1
		}
	}
}

// trigger is a word's part in a phrase: the bit of the group it belongs to.
type trigger struct {
	phrase int
	bit    uint8
}

// The clean-text cache of the first implementation.
const (
	maxCleanCached = 64
	maxClean       = 1 << 14
)

func bytesTrimWS(b []byte) []byte {
	i := jsonx.SkipWS(b, 0)
	return b[i:]
}

// refFieldOf is the first implementation's fieldOf.
type refFieldOf struct {
	nodes []node
	t     *text
}

func (f refFieldOf) String() string {
	s := pathOf(f.nodes, f.t.node)
	if f.t.key {
		s += " (a key)"
	}
	return s
}
