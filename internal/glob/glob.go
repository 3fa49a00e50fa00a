// Package glob is the one pattern syntax of the configuration: the policy's rules and
// limits and the upstreams' tool and prompt filters match names and URIs with it. It
// knows nothing of either.
package glob

import (
	"fmt"
	"strings"
)

// Glob matches names and URIs: '*' stands for any run of characters (slashes
// included), '?' for exactly one, '\' escapes the next character. Matching is
// case-sensitive, like MCP names and URIs.
type Glob struct {
	src    string
	parts  []string // literal runs between '*'
	single []bool   // per part: positions holding '?' (encoded as \x00 in parts)
	lead   bool     // pattern starts with '*'
	trail  bool     // pattern ends with '*'
	exact  bool     // no wildcard at all
}

// Compile compiles a pattern; an error for an empty pattern, a dangling escape or a NUL
// byte.
func Compile(p string) (Glob, error) {
	if p == "" {
		return Glob{}, fmt.Errorf("empty pattern")
	}
	g := Glob{src: p}
	var cur strings.Builder
	wild := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch c {
		case '\\':
			if i+1 == len(p) {
				return Glob{}, fmt.Errorf("pattern %q ends with a lone backslash", p)
			}
			i++
			if p[i] == 0 {
				return Glob{}, fmt.Errorf("pattern %q holds a NUL byte", p)
			}
			cur.WriteByte(p[i])
		case '*':
			wild = true
			if i == 0 {
				g.lead = true
			}
			if i == len(p)-1 {
				g.trail = true
			}
			g.parts = append(g.parts, cur.String())
			cur.Reset()
		case '?':
			wild = true
			cur.WriteByte(0)
		case 0:
			return Glob{}, fmt.Errorf("pattern %q holds a NUL byte", p)
		default:
			cur.WriteByte(c)
		}
	}
	g.parts = append(g.parts, cur.String())
	g.exact = !wild
	return g, nil
}

// MustCompile is Compile for patterns known to be valid.
func MustCompile(p string) Glob {
	g, err := Compile(p)
	if err != nil {
		panic(err)
	}
	return g
}

func (g Glob) String() string { return g.src }

// Match reports whether s matches the whole pattern.
func (g Glob) Match(s string) bool {
	if g.exact {
		return s == g.parts[0]
	}
	parts := g.parts
	// First part anchored at the start, last at the end, the rest found left to right.
	first := parts[0]
	if !hasPrefixQ(s, first) {
		return false
	}
	s = s[len(first):]
	if len(parts) == 1 { // only '?' wildcards
		return s == ""
	}
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := indexQ(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return len(s) >= len(last) && hasPrefixQ(s[len(s)-len(last):], last)
}

// hasPrefixQ is strings.HasPrefix where \x00 in prefix matches any one byte.
func hasPrefixQ(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if prefix[i] != 0 && prefix[i] != s[i] {
			return false
		}
	}
	return true
}

// indexQ is strings.Index where \x00 in sub matches any one byte.
func indexQ(s, sub string) int {
	if strings.IndexByte(sub, 0) < 0 {
		return strings.Index(s, sub)
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		if hasPrefixQ(s[i:], sub) {
			return i
		}
	}
	return -1
}
