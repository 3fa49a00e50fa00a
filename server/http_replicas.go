package server

import (
	"net/http"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// forwardRetry offers HTTPOptions.ForwardTo a modern retry whose requestState names
// another replica: the call it continues is parked in that replica's process. A request
// without requestState (the stateless rule) costs one look into its params.
func (h *HTTPHandler) forwardRetry(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message, body []byte) bool {
	switch msg.Method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead:
	default:
		return false
	}
	state, _, _ := jsonx.GetString(msg.Params, "requestState")
	replica := stateReplica(state)
	if replica == "" || replica == h.opts.Replica {
		return false
	}
	return h.opts.ForwardTo(w, r, replica, body)
}
