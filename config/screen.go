package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// ScreenChecks are the names of the screening checks (package trust runs them), as
// screen_allow names them.
var ScreenChecks = []string{
	"unicode-tags", "bidi-control", "zero-width", "instruction-markup", "model-directive",
	"credential-file", "cross-reference", "long-description",
}

// decodeScreenAllow reads a screen_allow attribute: a list of check names whose findings
// are accepted (reported as accepted, never withholding). An unknown name is an error
// at the element, with the nearest check's name; so is a name listed twice.
func decodeScreenAllow(e *evaluator, attr *hcl.Attribute) []string {
	if attr == nil {
		return nil
	}
	list, ok := e.stringList(attr)
	if !ok {
		return nil
	}
	var out []string
	for i, name := range list {
		at := elementRange(attr, i)
		switch {
		case slices.Contains(out, name):
			e.blockErrorf(at, "Duplicate check", "%q is listed twice in screen_allow.", name)
		case !slices.Contains(ScreenChecks, name):
			hint := ""
			if s := closest(name, ScreenChecks); s != "" {
				hint = fmt.Sprintf(" Did you mean %q?", s)
			}
			e.blockErrorf(at, "Unknown check", "screen_allow names the screening checks whose findings are accepted; %q is not one.%s The checks are %s.",
				name, hint, strings.Join(ScreenChecks, ", "))
		default:
			out = append(out, name)
		}
	}
	return out
}

// elementRange is where the i-th element of a list attribute is written, or the whole
// value when it is not written as a list.
func elementRange(attr *hcl.Attribute, i int) hcl.Range {
	if t, ok := attr.Expr.(*hclsyntax.TupleConsExpr); ok && i < len(t.Exprs) {
		return t.Exprs[i].Range()
	}
	return attr.Expr.Range()
}
