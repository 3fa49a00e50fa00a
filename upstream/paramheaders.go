package upstream

import (
	"encoding/json"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// paramHeaders reads the x-mcp-header annotations of every tool (2026-07-28): the
// arguments a modern HTTP server wants mirrored into Mcp-Param-* request headers.
func paramHeaders(tools []json.RawMessage) map[string][]mcp.ParamHeader {
	out := map[string][]mcp.ParamHeader{}
	for _, raw := range tools {
		schema, ok, _ := jsonx.Get(raw, "inputSchema")
		if !ok {
			continue
		}
		phs, err := mcp.ParamHeaders(schema)
		if err != nil || len(phs) == 0 {
			continue
		}
		name, _, _ := jsonx.GetString(raw, "name")
		out[name] = phs
	}
	return out
}

// dropInvalidHeaderTools removes the tools whose x-mcp-header annotations break the
// spec's constraints, as a Streamable HTTP client must, with a warning for each.
func dropInvalidHeaderTools(tools []json.RawMessage, log zerolog.Logger) []json.RawMessage {
	out := tools[:0:0]
	for _, raw := range tools {
		schema, _, _ := jsonx.Get(raw, "inputSchema")
		if _, err := mcp.ParamHeaders(schema); err != nil {
			name, _, _ := jsonx.GetString(raw, "name")
			log.Warn().Str("tool", name).Err(err).Msg("tool left out: invalid x-mcp-header annotation")
			continue
		}
		out = append(out, raw)
	}
	return out
}
