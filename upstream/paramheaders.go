package upstream

import (
	"encoding/json"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// paramHeaders reads the x-mcp-header annotations of every tool once (2026-07-28): the
// arguments a modern HTTP server wants mirrored into Mcp-Param-* request headers, by
// the upstream's tool name. With drop (a Streamable HTTP upstream), a tool whose
// annotations break the spec's constraints is left out of the returned list, as such a
// client must, with a warning; otherwise it stays, mirroring nothing.
func paramHeaders(tools []json.RawMessage, drop bool, log zerolog.Logger) ([]json.RawMessage, map[string][]mcp.ParamHeader) {
	kept := tools
	if drop {
		kept = tools[:0:0]
	}
	out := map[string][]mcp.ParamHeader{}
	for _, raw := range tools {
		schema, _, _ := jsonx.Get(raw, "inputSchema")
		phs, err := mcp.ParamHeaders(schema)
		name, _, _ := jsonx.GetString(raw, "name")
		if err != nil && drop {
			log.Warn().Str("tool", name).Err(err).Msg("tool left out: invalid x-mcp-header annotation")
			continue
		}
		if drop {
			kept = append(kept, raw)
		}
		if len(phs) > 0 {
			out[name] = phs
		}
	}
	return kept, out
}
