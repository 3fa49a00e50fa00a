package importer

import (
	"strings"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// value is a string of the generated file: literal text and HCL expressions (env("X")),
// rendered as a quoted template, or as the bare expression when it is all there is.
type value []part

// part is literal text, or an HCL expression when expr is set.
type part struct {
	lit  string
	expr string
}

// literal is a value of plain text.
func literal(s string) value { return value{{lit: s}} }

// expression is a value that is one HCL expression.
func expression(e string) value { return value{{expr: e}} }

// envCall is the HCL expression env("name") or env("name", default).
func envCall(name string, def *value) string {
	if def == nil {
		return "env(" + quote(name) + ")"
	}
	return "env(" + quote(name) + ", " + def.hcl() + ")"
}

// text is v's literal text with each expression left out.
func (v value) text() string {
	var b strings.Builder
	for _, p := range v {
		b.WriteString(p.lit)
	}
	return b.String()
}

// plain reports whether v is literal text only.
func (v value) plain() bool {
	for _, p := range v {
		if p.expr != "" {
			return false
		}
	}
	return true
}

// hcl renders v as an HCL expression.
func (v value) hcl() string {
	if len(v) == 1 && v[0].expr != "" {
		return v[0].expr
	}
	var b strings.Builder
	b.WriteByte('"')
	for i, p := range v {
		if p.expr != "" {
			b.WriteString("${" + p.expr + "}")
			continue
		}
		s := p.lit
		// A literal "$" or "%" right before an interpolation would read as the escape
		// "$${": write that one character as an interpolated string instead.
		var tail string
		if i+1 < len(v) && v[i+1].expr != "" && (strings.HasSuffix(s, "$") || strings.HasSuffix(s, "%")) {
			s, tail = s[:len(s)-1], "${"+quote(s[len(s)-1:])+"}"
		}
		b.WriteString(escape(s))
		b.WriteString(tail)
	}
	b.WriteByte('"')
	return b.String()
}

// quote renders s as an HCL quoted string, template sequences escaped ("$${").
func quote(s string) string {
	return string(hclwrite.TokensForValue(cty.StringVal(s)).Bytes())
}

// escape is quote without the quotes.
func escape(s string) string {
	q := quote(s)
	return q[1 : len(q)-1]
}
