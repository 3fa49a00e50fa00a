package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Strict types. cty converts leniently: 42 and true become the strings "42" and "true",
// "8" becomes a number, and ["a", 1] a list of strings. A value of the wrong type in a
// configuration file is more often a mistake than an intent (namespace = 42 where a name
// was meant, rate = 10 without its unit, a quoted "false" copied from a format where any
// non-empty string is true), so every attribute's value must already have the type its
// setting takes, element by element, before it is converted; each mismatch is reported
// at the element it is about.
//
// One exception: env() and the other functions return strings, and there is no other
// way to take a number or a flag from the environment, so where a number or true/false
// is expected, a string computed by an expression (max_in_flight = env("N")) is still
// converted if it reads as one. A string written out ("8", "true") is not: it is
// reported with the hint to drop the quotes.

// checkType reports, with their positions, the parts of v (the value of attr, or of expr
// inside it) that do not have type want, and returns whether there were none. what
// names the part for the message (`"namespace"`, `Element 2 of "command"`). Null parts
// pass: the helpers report nulls with their own messages.
func (e *evaluator) checkType(attr *hcl.Attribute, expr hcl.Expression, v cty.Value, want cty.Type, what string) bool {
	if v.IsNull() || !v.IsKnown() {
		return true
	}
	got := v.Type()
	switch {
	case want.IsPrimitiveType():
		if got.Equals(want) || got == cty.String && !isStatic(expr) {
			return true
		}
		e.typeError(attr, expr, "%s must be %s, not %s%s.", what, typeName(want), typeName(got), typeHint(v, want))
		return false
	case want.IsListType() || want.IsSetType():
		if !got.IsListType() && !got.IsSetType() && !got.IsTupleType() {
			e.typeError(attr, expr, "%s must be %s, not %s.", what, typeName(want), typeName(got))
			return false
		}
		elems := v.AsValueSlice()
		exprs, diags := hcl.ExprList(expr)
		if diags.HasErrors() || len(exprs) != len(elems) {
			exprs = nil // not written as [...]: report at the whole expression
		}
		ok := true
		for i, ev := range elems {
			ex := expr
			if exprs != nil {
				ex = exprs[i]
			}
			ok = e.checkType(attr, ex, ev, want.ElementType(), fmt.Sprintf("Element %d of %s", i, what)) && ok
		}
		return ok
	case want.IsMapType():
		if !got.IsMapType() && !got.IsObjectType() {
			e.typeError(attr, expr, "%s must be %s, not %s.", what, typeName(want), typeName(got))
			return false
		}
		m := v.AsValueMap()
		exprs := e.itemExprs(expr)
		ok := true
		for _, k := range sortedKeys(m) { // in order: the diagnostics do not depend on map iteration
			ex, found := exprs[k]
			if !found {
				ex = expr
			}
			ok = e.checkType(attr, ex, m[k], want.ElementType(), fmt.Sprintf("The value of %q in %s", k, what)) && ok
		}
		return ok
	}
	return true // other types are left to conversion
}

// itemExprs maps the keys of an object written as { k = v, ... } to their value
// expressions; nil when expr is not written that way.
func (e *evaluator) itemExprs(expr hcl.Expression) map[string]hcl.Expression {
	pairs, diags := hcl.ExprMap(expr)
	if diags.HasErrors() {
		return nil
	}
	out := make(map[string]hcl.Expression, len(pairs))
	for _, p := range pairs {
		k, diags := p.Key.Value(e.ctx)
		if diags.HasErrors() || k.IsNull() || !k.IsKnown() || k.Type() != cty.String {
			continue
		}
		out[k.AsString()] = p.Value
	}
	return out
}

// typeError records a type mismatch at expr, within attr.
func (e *evaluator) typeError(attr *hcl.Attribute, expr hcl.Expression, format string, args ...any) {
	e.diags = append(e.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid value",
		Detail:   fmt.Sprintf(format, args...),
		Subject:  expr.Range().Ptr(),
		Context:  attr.Range.Ptr(),
	})
}

// isStatic reports whether expr is written out in full: it evaluates without functions
// (or variables), as a literal or a template of literals does.
func isStatic(expr hcl.Expression) bool {
	_, diags := expr.Value(nil)
	return !diags.HasErrors()
}

// typeName names a type as a setting's description does.
func typeName(t cty.Type) string {
	switch {
	case t == cty.String:
		return "a string"
	case t == cty.Number:
		return "a number"
	case t == cty.Bool:
		return "true or false"
	case t.IsListType() && t.ElementType() == cty.String:
		return "a list of strings"
	case t.IsMapType() && t.ElementType() == cty.String:
		return "a map of strings"
	case t.IsMapType() && t.ElementType() == cty.Bool:
		return "a map of true/false values"
	case t.IsListType() || t.IsSetType() || t.IsTupleType():
		return "a list"
	case t.IsMapType() || t.IsObjectType():
		return "a map"
	}
	return t.FriendlyName()
}

// typeHint suggests the spelling that was probably meant, or "".
func typeHint(v cty.Value, want cty.Type) string {
	switch got := v.Type(); {
	case want == cty.String && (got == cty.Number || got == cty.Bool):
		var s string
		if got == cty.Number {
			s = v.AsBigFloat().Text('f', -1)
		} else {
			s = fmt.Sprint(v.True())
		}
		return fmt.Sprintf("; if the text is meant, quote it: %q", s)
	case want == cty.Number && got == cty.String:
		return "; write the number without quotes"
	case want == cty.Bool && got == cty.String:
		return "; write true or false without quotes"
	}
	return ""
}
