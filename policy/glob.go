package policy

import (
	"github.com/mcp-proxy/mcp-proxy/internal/glob"
)

// Glob matches names and URIs: '*' stands for any run of characters (slashes
// included), '?' for exactly one, '\' escapes the next character (see internal/glob, the
// syntax the upstream filters share).
type Glob = glob.Glob

// CompileGlob compiles a pattern; an error for an empty pattern or a dangling escape.
func CompileGlob(p string) (Glob, error) { return glob.Compile(p) }

// MustGlob is CompileGlob for patterns known to be valid.
func MustGlob(p string) Glob { return glob.MustCompile(p) }

// globs is a set of patterns; an empty set matches everything.
type globs []Glob

// compileGlobs compiles patterns into a set.
func compileGlobs(pats []string) (globs, error) {
	var gs globs
	for _, p := range pats {
		g, err := CompileGlob(p)
		if err != nil {
			return nil, err
		}
		gs = append(gs, g)
	}
	return gs, nil
}

func (gs globs) match(s string) bool {
	if len(gs) == 0 {
		return true
	}
	for _, g := range gs {
		if g.Match(s) {
			return true
		}
	}
	return false
}
