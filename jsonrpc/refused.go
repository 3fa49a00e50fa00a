package jsonrpc

import (
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
)

// Refused reads what an audit needs of bytes refused as a message (see Decode), without
// taking them as one: the string values of the top-level members named "method" (in any
// case, as a case-insensitive reader would take them: a refused request may name one
// method to the proxy and another to such a reader), in order, and the raw
// params.arguments value, when there is one. It reads the object's members up to the
// first that is not valid JSON, so it serves a truncated message (the head of a message
// over the size limit) too. It is meant for refusal paths only: it allocates.
func Refused(b []byte) (methods []string, arguments []byte) {
	sc := jsonx.NewObjectScanner(b)
	for sc.Next() {
		key, err := jsonx.Unquote(sc.Key())
		if err != nil {
			continue
		}
		v := sc.Value()
		switch {
		case strings.EqualFold(key, "method"):
			if len(v) > 0 && v[0] == '"' {
				if s, err := jsonx.Unquote(v); err == nil {
					methods = append(methods, s)
				}
			}
		case key == "params" && arguments == nil && len(v) > 0 && v[0] == '{':
			if args, ok, _ := jsonx.Get(v, "arguments"); ok {
				arguments = args
			}
		}
	}
	return methods, arguments
}
