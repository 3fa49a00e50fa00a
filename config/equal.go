package config

import (
	"bytes"
	"reflect"

	"github.com/hashicorp/hcl/v2"
)

// Equal reports whether two decoded values of configurations (two Upstreams, two
// Policies, two Plugins…) configure the same thing, the first taken from a's file and the
// second from b's: what a reload compares to apply only the difference. Positions in
// the file do not count (a block that moved is the same block), expressions and bodies
// kept for later evaluation (rule conditions, plugin config blocks) compare by their
// source text, and evaluation contexts are not compared (a changed environment variable
// is not seen unless the value it gave was decoded).
func Equal(a, b any, fromA, fromB *Config) bool {
	return equalValue(reflect.ValueOf(a), reflect.ValueOf(b), fromA.Source, fromB.Source)
}

var (
	rangeType = reflect.TypeFor[hcl.Range]()
	exprType  = reflect.TypeFor[hcl.Expression]()
	bodyType  = reflect.TypeFor[hcl.Body]()
	evalType  = reflect.TypeFor[*hcl.EvalContext]()
)

func equalValue(a, b reflect.Value, srcA, srcB []byte) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch t := a.Type(); {
	case t == rangeType, t == evalType:
		return true
	case t == exprType, t == bodyType:
		return equalSource(a, b, srcA, srcB)
	case t.Kind() == reflect.Map && t.Elem() == rangeType:
		return true
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return equalValue(a.Elem(), b.Elem(), srcA, srcB)
	case reflect.Struct:
		for i := range a.NumField() {
			if !equalValue(a.Field(i), b.Field(i), srcA, srcB) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equalValue(a.Index(i), b.Index(i), srcA, srcB) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		it := a.MapRange()
		for it.Next() {
			v := b.MapIndex(it.Key())
			if !v.IsValid() || !equalValue(it.Value(), v, srcA, srcB) {
				return false
			}
		}
		return true
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	}
	return false // functions, channels: not configuration
}

// ranged is an expression or a body that knows where it is in its file (every one the
// native syntax parser makes).
type ranged interface{ Range() hcl.Range }

// equalSource compares two expressions or bodies by their text in their files.
func equalSource(a, b reflect.Value, srcA, srcB []byte) bool {
	if a.IsNil() || b.IsNil() {
		return a.IsNil() == b.IsNil()
	}
	ra, okA := a.Interface().(ranged)
	rb, okB := b.Interface().(ranged)
	if !okA || !okB {
		return a.Interface() == b.Interface()
	}
	ta, okA := sourceText(ra.Range(), srcA)
	tb, okB := sourceText(rb.Range(), srcB)
	return okA && okB && bytes.Equal(ta, tb)
}

func sourceText(r hcl.Range, src []byte) ([]byte, bool) {
	if r.Start.Byte < 0 || r.End.Byte > len(src) || r.Start.Byte > r.End.Byte {
		return nil, false
	}
	return src[r.Start.Byte:r.End.Byte], true
}
