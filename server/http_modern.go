package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// checkHeaders validates the request headers a modern POST must carry against its body
// (2026-07-28): MCP-Protocol-Version, Mcp-Method, Mcp-Name, and the Mcp-Param-* mirrors
// of a tool's annotated arguments. A mismatch is -32020 HeaderMismatch: intermediaries
// may route on the headers, so the proxy must not act on a body that says otherwise.
func (h *HTTPHandler) checkHeaders(r *http.Request, msg *jsonrpc.Message, version string) *jsonrpc.Error {
	mismatch := func(format string, args ...any) *jsonrpc.Error {
		return jsonrpc.Errorf(mcp.CodeHeaderMismatch, "Header mismatch: "+format, args...)
	}
	// One value per header: with two, the proxy would check one and an intermediary
	// might route on the other.
	var repeated []string
	for name, v := range r.Header {
		if len(v) > 1 && strings.HasPrefix(name, "Mcp-") {
			repeated = append(repeated, name)
		}
	}
	if len(repeated) > 0 {
		slices.Sort(repeated)
		return mismatch("the %s header is repeated", repeated[0])
	}
	get := func(name string) (string, bool) {
		v := r.Header.Values(name)
		if len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
	switch hv, ok := get("Mcp-Protocol-Version"); {
	case !ok:
		return mismatch("the MCP-Protocol-Version header is required")
	case hv != version:
		return mismatch("MCP-Protocol-Version header %q does not match the body's %q", hv, version)
	}
	switch hm, ok := get("Mcp-Method"); {
	case !ok:
		return mismatch("the Mcp-Method header is required")
	case hm != msg.Method:
		return mismatch("Mcp-Method header %q does not match the body's %q", hm, msg.Method)
	}
	var key string
	switch msg.Method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		key = "name"
	case mcp.MethodResourcesRead:
		key = "uri"
	default:
		return nil
	}
	want, _, _ := jsonx.GetString(msg.Params, key)
	raw, ok := get("Mcp-Name")
	if !ok {
		return mismatch("the Mcp-Name header is required for %s", msg.Method)
	}
	got, err := mcp.DecodeHeaderValue(raw)
	if err != nil {
		return mismatch("Mcp-Name header: %v", err)
	}
	if got != want {
		return mismatch("Mcp-Name header value %q does not match the body's %q", got, want)
	}
	if msg.Method == mcp.MethodToolsCall {
		if phs, _ := h.s.r.ToolHeaders(want); len(phs) > 0 {
			if err := mcp.CheckParamHeaders(phs, msg.Params, get); err != nil {
				return mismatch("%v", err)
			}
		}
	}
	return nil
}
