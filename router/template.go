package router

import (
	"regexp"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/lazyre"
)

// uriTemplate matches URIs against an RFC 6570 URI template, to find the upstream that
// owns a resource that was not listed. Matching is deliberately lenient (a variable
// matches any run of characters its operator could have produced); it only has to tell
// owners apart, not decode values.
type uriTemplate struct {
	raw     string
	re      *regexp.Regexp
	literal int // characters outside expressions: more literal text = more specific
}

var templateExpr = lazyre.New(`\{[^{}]*\}`)

func compileTemplate(t string) (*uriTemplate, bool) {
	var b strings.Builder
	b.WriteString("^")
	last, literal := 0, 0
	for _, loc := range templateExpr.FindAllStringIndex(t, -1) {
		b.WriteString(regexp.QuoteMeta(t[last:loc[0]]))
		literal += loc[0] - last
		expr := t[loc[0]+1 : loc[1]-1]
		op := byte(0)
		if expr != "" && strings.IndexByte("+#./;?&", expr[0]) >= 0 {
			op = expr[0]
		}
		switch op {
		case 0:
			b.WriteString(`[^/?#]*`)
		case '+', '#':
			b.WriteString(`.*`)
		case '.':
			b.WriteString(`(?:\.[^/?#]*)*`)
		case '/':
			b.WriteString(`(?:/[^?#]*)*`)
		case ';':
			b.WriteString(`(?:;[^/?#]*)*`)
		case '?', '&':
			b.WriteString(`(?:[?&][^#]*)?`)
		}
		last = loc[1]
	}
	b.WriteString(regexp.QuoteMeta(t[last:]))
	literal += len(t) - last
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, false
	}
	return &uriTemplate{raw: t, re: re, literal: literal}, true
}

func (t *uriTemplate) match(uri string) bool { return t.re.MatchString(uri) }
