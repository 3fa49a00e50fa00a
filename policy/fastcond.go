package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
)

// Conditions are HCL expressions, and evaluating one through HCL costs several
// microseconds (converting the arguments to cty values, calling functions through cty).
// The shapes rules use most, string tests on one argument combined with && || !, are
// compiled here to plain Go that reads the argument straight from the JSON. The compiled
// form gives the same decision as HCL: where the arguments are not plain strings it
// reports that it cannot tell, and the expression is evaluated by HCL after all.

// fastCond evaluates a compiled condition: ok is false when it cannot decide (HCL must).
type fastCond func(args json.RawMessage) (val bool, err error, ok bool)

var errMissingArg = errors.New("the argument is missing")

// compileFast compiles the supported subset; nil when expr is outside it.
func compileFast(expr hcl.Expression) fastCond {
	switch e := expr.(type) {
	case *hclsyntax.ParenthesesExpr:
		return compileFast(e.Expression)
	case *hclsyntax.UnaryOpExpr:
		if e.Op != hclsyntax.OpLogicalNot {
			return nil
		}
		inner := compileFast(e.Val)
		if inner == nil {
			return nil
		}
		return func(args json.RawMessage) (bool, error, bool) {
			v, err, ok := inner(args)
			return !v, err, ok
		}
	case *hclsyntax.BinaryOpExpr:
		switch e.Op {
		case hclsyntax.OpLogicalAnd, hclsyntax.OpLogicalOr:
			l, r := compileFast(e.LHS), compileFast(e.RHS)
			if l == nil || r == nil {
				return nil
			}
			and := e.Op == hclsyntax.OpLogicalAnd
			return func(args json.RawMessage) (bool, error, bool) {
				// HCL evaluates both sides, and an error on either is the result.
				lv, lerr, lok := l(args)
				rv, rerr, rok := r(args)
				if !lok || !rok {
					return false, nil, false
				}
				if err := errors.Join(lerr, rerr); err != nil {
					return false, err, true
				}
				if and {
					return lv && rv, nil, true
				}
				return lv || rv, nil, true
			}
		case hclsyntax.OpEqual, hclsyntax.OpNotEqual:
			key, lit, ok := argAndLiteral(e.LHS, e.RHS)
			if !ok {
				if key, lit, ok = argAndLiteral(e.RHS, e.LHS); !ok {
					return nil
				}
			}
			eq := e.Op == hclsyntax.OpEqual
			return func(args json.RawMessage) (bool, error, bool) {
				s, err, ok := stringArg(args, key)
				if !ok || err != nil {
					return false, err, ok
				}
				return (s == lit) == eq, nil, true
			}
		}
	case *hclsyntax.FunctionCallExpr:
		if len(e.Args) != 2 || e.ExpandFinal {
			return nil
		}
		var f func(s, lit string) bool
		switch e.Name {
		case "startswith":
			f = strings.HasPrefix
		case "endswith":
			f = strings.HasSuffix
		case "contains":
			f = strings.Contains
		case "under":
			f = Under
		default:
			return nil
		}
		key, ok := argKey(e.Args[0])
		lit, lok := stringLiteral(e.Args[1])
		if !ok || !lok {
			return nil
		}
		return func(args json.RawMessage) (bool, error, bool) {
			s, err, ok := stringArg(args, key)
			if !ok || err != nil {
				return false, err, ok
			}
			return f(s, lit), nil, true
		}
	}
	return nil
}

// argAndLiteral matches args.KEY on one side and a string literal on the other.
func argAndLiteral(a, b hclsyntax.Expression) (key, lit string, ok bool) {
	key, ok = argKey(a)
	if !ok {
		return "", "", false
	}
	lit, ok = stringLiteral(b)
	return key, lit, ok
}

// argKey matches args.KEY (or args["KEY"]).
func argKey(e hclsyntax.Expression) (string, bool) {
	st, ok := e.(*hclsyntax.ScopeTraversalExpr)
	if !ok || len(st.Traversal) != 2 || st.Traversal.RootName() != "args" {
		return "", false
	}
	switch step := st.Traversal[1].(type) {
	case hcl.TraverseAttr:
		return step.Name, true
	case hcl.TraverseIndex:
		if step.Key.Type().FriendlyName() == "string" {
			return step.Key.AsString(), true
		}
	}
	return "", false
}

// stringLiteral matches a string literal without interpolation.
func stringLiteral(e hclsyntax.Expression) (string, bool) {
	t, ok := e.(*hclsyntax.TemplateExpr)
	if !ok || !t.IsStringLiteral() {
		return "", false
	}
	lit := t.Parts[0].(*hclsyntax.LiteralValueExpr)
	if lit.Val.Type().FriendlyName() != "string" || lit.Val.IsNull() {
		return "", false
	}
	return lit.Val.AsString(), true
}

// stringArg reads a string argument: an error when it is missing (as HCL's "unsupported
// attribute"), ok false when it is not a JSON string (HCL would convert or refuse it).
func stringArg(args json.RawMessage, key string) (string, error, bool) {
	v, found, err := jsonx.Get(args, key)
	if err != nil || !found {
		return "", fmt.Errorf("args.%s: %w", key, errMissingArg), true
	}
	if len(v) == 0 || v[0] != '"' {
		return "", nil, false
	}
	s, err := jsonx.Unquote(v)
	if err != nil {
		return "", nil, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return "", nil, false // HCL normalizes Unicode (NFC): let it decide
		}
	}
	return s, nil, true
}
