package config

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/gocty"
)

// evaluator turns attributes into Go values, appending a located diagnostic
// for every problem to diags instead of stopping. Each helper returns ok=false
// when the attribute is absent, null or invalid; callers then fall back to the
// default, which keeps one mistake from causing a cascade of follow-on errors
// (the returned diagnostics already make the whole load fail).
type evaluator struct {
	ctx   *hcl.EvalContext
	diags hcl.Diagnostics
	// secrets lets the next values hold secret() references (an upstream's env and
	// headers, see secrets.go); anywhere else they are an error.
	secrets bool
}

// errorf records an error diagnostic about attr's value.
func (e *evaluator) errorf(attr *hcl.Attribute, summary, format string, args ...any) {
	e.diags = append(e.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  attr.Expr.Range().Ptr(),
		Context:  attr.Range.Ptr(),
	})
}

// blockErrorf records an error diagnostic about a block or label at rng.
func (e *evaluator) blockErrorf(rng hcl.Range, summary, format string, args ...any) {
	e.diags = append(e.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  rng.Ptr(),
	})
}

// unique records an error when name was seen before among blocks of kind (written with
// its article, "a rule"), and remembers it.
func (e *evaluator) unique(seen map[string]bool, name, kind, aKind string, rng hcl.Range) {
	if seen[name] {
		e.blockErrorf(rng, "Duplicate "+kind, "There is already %s %q.", aKind, name)
	}
	seen[name] = true
}

// warnf records a warning diagnostic about attr.
func (e *evaluator) warnf(attr *hcl.Attribute, summary, format string, args ...any) {
	e.diags = append(e.diags, &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  attr.NameRange.Ptr(),
		Context:  attr.Range.Ptr(),
	})
}

// value evaluates attr, checks that the result has type ty (strict.go) and converts it
// to ty. want describes ty for the error message ("a string", "a list of strings").
func (e *evaluator) value(attr *hcl.Attribute, ty cty.Type, want string) (cty.Value, bool) {
	if attr == nil {
		return cty.NilVal, false
	}
	v, diags := attr.Expr.Value(e.ctx)
	e.diags = append(e.diags, diags...)
	if diags.HasErrors() {
		return cty.NilVal, false
	}
	v, ok := e.unmark(attr, v)
	if !ok || v.IsNull() {
		return cty.NilVal, false
	}
	if !v.IsWhollyKnown() {
		e.errorf(attr, "Invalid value", "The value of %q must be known when the file is loaded.", attr.Name)
		return cty.NilVal, false
	}
	if !e.checkType(attr, attr.Expr, v, ty, fmt.Sprintf("%q", attr.Name)) {
		return cty.NilVal, false
	}
	cv, err := convert.Convert(v, ty)
	if err != nil {
		e.errorf(attr, "Invalid value", "%q must be %s: %s.", attr.Name, want, err)
		return cty.NilVal, false
	}
	return cv, true
}

// string evaluates attr as a string.
func (e *evaluator) string(attr *hcl.Attribute) (string, bool) {
	v, ok := e.value(attr, cty.String, "a string")
	if !ok {
		return "", false
	}
	return v.AsString(), true
}

// int evaluates attr as a whole number that fits in an int.
func (e *evaluator) int(attr *hcl.Attribute) (int, bool) {
	v, ok := e.value(attr, cty.Number, "a whole number")
	if !ok {
		return 0, false
	}
	var n int
	if err := gocty.FromCtyValue(v, &n); err != nil {
		e.errorf(attr, "Invalid value", "Unusable value for %q: %s.", attr.Name, err)
		return 0, false
	}
	return n, true
}

// bool evaluates attr as true or false.
func (e *evaluator) bool(attr *hcl.Attribute) (bool, bool) {
	v, ok := e.value(attr, cty.Bool, "true or false")
	if !ok {
		return false, false
	}
	return v.True(), true
}

// stringList evaluates attr as a list of strings; null elements are errors.
func (e *evaluator) stringList(attr *hcl.Attribute) ([]string, bool) {
	v, ok := e.value(attr, cty.List(cty.String), "a list of strings")
	if !ok {
		return nil, false
	}
	out := make([]string, 0, v.LengthInt())
	ok = true
	for i, ev := range v.AsValueSlice() {
		if ev.IsNull() {
			e.errorf(attr, "Invalid value", "Element %d of %q is null; it must be a string.", i, attr.Name)
			ok = false // every null element is reported
			continue
		}
		out = append(out, ev.AsString())
	}
	if !ok {
		return nil, false
	}
	return out, true
}

// stringMap evaluates attr as an object or map of strings; null values are
// errors.
func (e *evaluator) stringMap(attr *hcl.Attribute) (map[string]string, bool) {
	v, ok := e.value(attr, cty.Map(cty.String), "a map of strings, such as { NAME = \"value\" }")
	if !ok {
		return nil, false
	}
	out := make(map[string]string, v.LengthInt())
	m := v.AsValueMap()
	ok = true
	for _, k := range sortedKeys(m) { // in order: the diagnostics do not depend on map iteration
		if m[k].IsNull() {
			e.errorf(attr, "Invalid value", "The value of %q in %q is null; it must be a string.", k, attr.Name)
			ok = false // every null value is reported
			continue
		}
		out[k] = m[k].AsString()
	}
	if !ok {
		return nil, false
	}
	return out, true
}

// durationHint is appended to every duration error.
const durationHint = `use a duration string such as "60s", "1m30s" or "500ms"`

// duration evaluates attr as a Go duration string and requires it to be
// positive. A bare number is rejected rather than guessed at: "5" could mean
// seconds or nanoseconds.
func (e *evaluator) duration(attr *hcl.Attribute) (time.Duration, bool) {
	return e.durationMin(attr, false)
}

// durationOrZero is duration for settings where zero means "none": it also takes "0s".
func (e *evaluator) durationOrZero(attr *hcl.Attribute) (time.Duration, bool) {
	return e.durationMin(attr, true)
}

func (e *evaluator) durationMin(attr *hcl.Attribute, zero bool) (time.Duration, bool) {
	if attr == nil {
		return 0, false
	}
	v, diags := attr.Expr.Value(e.ctx)
	e.diags = append(e.diags, diags...)
	if diags.HasErrors() {
		return 0, false
	}
	v, ok := e.unmark(attr, v)
	if !ok || v.IsNull() {
		return 0, false
	}
	if v.Type() == cty.Number {
		e.errorf(attr, "Invalid duration", "%q must be a duration string, not a number; %s.", attr.Name, durationHint)
		return 0, false
	}
	if !v.IsWhollyKnown() || v.Type() != cty.String {
		e.errorf(attr, "Invalid duration", "%q must be a duration string; %s.", attr.Name, durationHint)
		return 0, false
	}
	s := v.AsString()
	d, err := time.ParseDuration(s)
	if err != nil {
		e.errorf(attr, "Invalid duration", "%q is not a valid duration for %q; %s.", s, attr.Name, durationHint)
		return 0, false
	}
	if d < 0 || d == 0 && !zero {
		want := "greater than zero"
		if zero {
			want = "zero or more"
		}
		e.errorf(attr, "Invalid duration", "%q must be %s, got %q; %s.", attr.Name, want, s, durationHint)
		return 0, false
	}
	return d, true
}
