// Package lazyre holds regular expressions that are compiled on first use rather than at
// program start. A package-level regexp.MustCompile runs in every start-up of every
// command, whether or not the code that matches with it ever runs, and its compiled
// program stays on the heap for good (issue 17: the idle proxy's memory). A Regexp
// from New costs a string until it is first used.
//
// It must not be used for patterns built from input: a bad pattern panics on first use,
// so each one must be exercised by a test of the package that declares it.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled the first time one of its methods is called.
// It is safe for concurrent use, as *regexp.Regexp is.
type Regexp struct {
	expr string
	once sync.Once
	re   *regexp.Regexp // set once, under once
}

// New returns expr, to be compiled with regexp.MustCompile on first use.
func New(expr string) *Regexp { return &Regexp{expr: expr} }

// Compiled returns the compiled expression, compiling it now if no call has yet.
func (r *Regexp) Compiled() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.expr) })
	return r.re
}

// String returns the source text of the expression.
func (r *Regexp) String() string { return r.expr }

// MatchString reports whether s contains a match of the expression.
func (r *Regexp) MatchString(s string) bool { return r.Compiled().MatchString(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.Compiled().FindStringSubmatch(s) }

// FindAllStringIndex is regexp.Regexp.FindAllStringIndex.
func (r *Regexp) FindAllStringIndex(s string, n int) [][]int {
	return r.Compiled().FindAllStringIndex(s, n)
}
