package upstream

import (
	"encoding/json"
	"strconv"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// paramHeader is one tool argument a modern HTTP server wants mirrored into a request
// header (2026-07-28, x-mcp-header), as declared in the upstream's own input schema.
type paramHeader struct {
	arg, header string
}

// paramHeaders reads the x-mcp-header annotations of every tool: only top-level
// properties of type string, integer or boolean count, as the spec requires.
func paramHeaders(tools []json.RawMessage) map[string][]paramHeader {
	out := map[string][]paramHeader{}
	for _, raw := range tools {
		name, _, _ := jsonx.GetString(raw, "name")
		schema, ok, _ := jsonx.Get(raw, "inputSchema")
		if !ok {
			continue
		}
		var s struct {
			Properties map[string]struct {
				Type   any    `json:"type"`
				Header string `json:"x-mcp-header"`
			} `json:"properties"`
		}
		if json.Unmarshal(schema, &s) != nil {
			continue
		}
		for arg, p := range s.Properties {
			if p.Header == "" {
				continue
			}
			switch p.Type {
			case "string", "integer", "boolean":
				out[name] = append(out[name], paramHeader{arg: arg, header: "Mcp-Param-" + p.Header})
			}
		}
	}
	return out
}

// headersFor returns the Mcp-Param-* headers of a tools/call with these params.
func headersFor(phs []paramHeader, params json.RawMessage) map[string]string {
	if len(phs) == 0 {
		return nil
	}
	args, ok, _ := jsonx.Get(params, "arguments")
	if !ok {
		return nil
	}
	var h map[string]string
	for _, ph := range phs {
		v, ok, _ := jsonx.Get(args, ph.arg)
		if !ok || len(v) == 0 || string(v) == "null" {
			continue // absent or null: no header
		}
		var value string
		switch v[0] {
		case '"':
			s, err := jsonx.Unquote(v)
			if err != nil {
				continue
			}
			value = transport.HeaderValue(s)
		case 't', 'f':
			value = string(v)
		default:
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				value = strconv.FormatInt(n, 10)
			} else {
				continue
			}
		}
		if h == nil {
			h = map[string]string{}
		}
		h[ph.header] = value
	}
	return h
}
