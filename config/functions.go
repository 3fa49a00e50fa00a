package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// newEvalContext returns the context every expression in the file is
// evaluated in: functions only, no variables. It is built per parse because
// env() closes over the caller's lookup.
func newEvalContext(lookupEnv func(string) (string, bool)) *hcl.EvalContext {
	return &hcl.EvalContext{
		Functions: map[string]function.Function{
			"env":       envFunc(lookupEnv),
			"secret":    secretFunc(),
			"upper":     stdlib.UpperFunc,
			"lower":     stdlib.LowerFunc,
			"trimspace": stdlib.TrimSpaceFunc,
			"join":      stdlib.JoinFunc,
			"format":    boundedFormatFunc(),
		},
	}
}

// envFunc implements env("NAME") and env("NAME", "default"). An unset
// variable without a default is an error, so a missing secret is caught when
// the file is loaded rather than when an upstream misbehaves; a variable set
// to the empty string counts as set.
func envFunc(lookupEnv func(string) (string, bool)) function.Function {
	return function.New(&function.Spec{
		Description: "Returns the value of an environment variable, or the optional default when it is unset.",
		Params: []function.Parameter{{
			Name:        "name",
			Description: "The name of the environment variable.",
			Type:        cty.String,
		}},
		VarParam: &function.Parameter{
			Name:        "default",
			Description: "The value to return when the variable is unset.",
			Type:        cty.String,
		},
		Type:         function.StaticReturnType(cty.String),
		RefineResult: func(b *cty.RefinementBuilder) *cty.RefinementBuilder { return b.NotNull() },
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if len(args) > 2 {
				return cty.UnknownVal(cty.String), function.NewArgErrorf(2,
					"env takes at most one default, as in env(%q, \"default\")", args[0].AsString())
			}
			name := args[0].AsString()
			if name == "" {
				return cty.UnknownVal(cty.String), function.NewArgErrorf(0, "the variable name must not be empty")
			}
			if v, ok := lookupEnv(name); ok {
				return cty.StringVal(v), nil
			}
			if len(args) == 2 {
				return args[1], nil
			}
			return cty.UnknownVal(cty.String), fmt.Errorf(
				"environment variable %q is not set; set it, or give a default with env(%q, \"default\")", name, name)
		},
	})
}

// maxFormatWidth bounds the field width format() accepts. cty pads to any
// width it is given, so "%999999999s" alone would allocate a gigabyte.
const maxFormatWidth = 1000

// boundedFormatFunc is stdlib's format with field widths limited to
// maxFormatWidth.
func boundedFormatFunc() function.Function {
	return function.New(&function.Spec{
		Description:  stdlib.FormatFunc.Description(),
		Params:       stdlib.FormatFunc.Params(),
		VarParam:     stdlib.FormatFunc.VarParam(),
		Type:         function.StaticReturnType(cty.String),
		RefineResult: func(b *cty.RefinementBuilder) *cty.RefinementBuilder { return b.NotNull() },
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if w := largestFormatWidth(args[0].AsString()); w > maxFormatWidth {
				return cty.UnknownVal(cty.String), function.NewArgErrorf(0,
					"field width %d is larger than the maximum of %d", w, maxFormatWidth)
			}
			return stdlib.FormatFunc.Call(args)
		},
	})
}

// largestFormatWidth returns the largest field width among the verbs of a
// format() string: the digits that follow '%', its flags and an optional [n]
// argument index. A width too long to parse counts as over the limit.
func largestFormatWidth(f string) int {
	largest := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			continue // "%%" is a literal percent sign
		}
		for i < len(f) && strings.IndexByte(" +-#0", f[i]) >= 0 {
			i++
		}
		if i < len(f) && f[i] == '[' {
			if end := strings.IndexByte(f[i:], ']'); end >= 0 {
				i += end + 1
			}
		}
		start := i
		for i < len(f) && f[i] >= '0' && f[i] <= '9' {
			i++
		}
		if i > start {
			w, err := strconv.Atoi(f[start:i])
			if err != nil {
				w = maxFormatWidth + 1
			}
			largest = max(largest, w)
		}
		i-- // the loop's i++ moves on to the verb letter
	}
	return largest
}
