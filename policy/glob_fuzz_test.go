package policy

import (
	"regexp"
	"strings"
	"testing"
)

// globRegexp is a reference implementation of Glob through regexp.
func globRegexp(p string) (*regexp.Regexp, bool) {
	var b strings.Builder
	b.WriteString(`^(?s:`)
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '\\':
			if i+1 == len(p) {
				return nil, false
			}
			i++
			b.WriteString(regexp.QuoteMeta(string(p[i])))
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`)$`)
	re, err := regexp.Compile(b.String())
	return re, err == nil
}

// FuzzGlob checks Glob.Match against the regexp reference on ASCII inputs (the
// reference's '.' matches a rune, Glob's '?' a byte).
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{{"fs__*", "fs__read"}, {"a*b*b", "abxb"}, {"*?x", "yx"}, {`l\*`, "l*"}, {"?", ""}, {"**", "a"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pat, s string) {
		for _, r := range pat + s {
			if r >= 0x80 || r == 0 {
				return
			}
		}
		g, err := CompileGlob(pat)
		re, ok := globRegexp(pat)
		if (err == nil) != (ok && pat != "") {
			t.Fatalf("CompileGlob(%q) err=%v, reference ok=%v", pat, err, ok)
		}
		if err != nil {
			return
		}
		if got, want := g.Match(s), re.MatchString(s); got != want {
			t.Fatalf("%q.Match(%q) = %v, reference %v", pat, s, got, want)
		}
	})
}
