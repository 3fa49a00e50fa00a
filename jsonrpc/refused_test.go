package jsonrpc

import (
	"slices"
	"testing"
)

// TestRefused pins what an audit reads of refused bytes: every top-level "method" in any
// case, and params.arguments, up to the first member that is not valid JSON.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		methods  []string
		args     string
	}{
		{"a request", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":1}}}`, []string{"tools/call"}, `{"a":1}`},
		{"two methods", `{"method":"ping","METHOD":"tools/call"}`, []string{"ping", "tools/call"}, ""},
		{"an escaped key", `{"m\u0065thod":"prompts/get"}`, []string{"prompts/get"}, ""},
		{"cut short in params", `{"method":"tools/call","params":{"name":"x","arguments":{"a":"xxxx`, []string{"tools/call"}, ""},
		{"cut short before the method", `{"params":{"arguments":{"a":1}},"id":1,"method":"tools/c`, nil, `{"a":1}`},
		{"params not an object", `{"method":"tools/call","params":"x"}`, []string{"tools/call"}, ""},
		{"a method that is not a string", `{"method":5}`, nil, ""},
		{"not an object", `[{"method":"tools/call"}]`, nil, ""},
		{"not JSON", `{"method"`, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			methods, args := Refused([]byte(tc.in))
			if !slices.Equal(methods, tc.methods) || string(args) != tc.args {
				t.Errorf("Refused(%s) = %q, %s; want %q, %s", tc.in, methods, args, tc.methods, tc.args)
			}
		})
	}
}
