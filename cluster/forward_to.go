package cluster

import (
	"bytes"
	"net/http"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// callGone: what a request continues (a modern call parked for its client's input)
// lived in the process of a replica that stopped, and ended with it.
var callGone = gone{status: http.StatusOK, code: jsonrpc.CodeInvalidParams,
	msg:    "Invalid params: requestState names a call parked on a proxy replica that stopped; send the request again without requestState",
	broken: "mcp-proxy: the proxy replica that held this call stopped while the call was in flight",
	log:    "cluster: the replica that parked the call is unreachable; the client must start the call again"}

// ForwardTo implements server.HTTPOptions.ForwardTo: a request that replica must serve
// (a modern retry whose call is parked there), whose body the handler has read, is sent
// there and its answer streamed back, as Forward does for a legacy session. It declines
// (false) a request already forwarded, one for this replica, and one for a replica that
// is not registered: the handler then answers it itself (the call is gone).
func (f *Forwarder) ForwardTo(w http.ResponseWriter, r *http.Request, replica string, body []byte) bool {
	if r.Header.Get(ForwardedHeader) != "" || replica == f.id || replica == "" {
		return false
	}
	addr, ok := f.lookup(r.Context(), replica)
	if !ok {
		return false
	}
	var reqID jsonrpc.ID
	if m, err := jsonrpc.Decode(bytes.TrimSpace(body)); err == nil && m.IsRequest() {
		reqID = m.ID
	}
	f.relay(w, r, replica, addr, body, reqID, callGone)
	return true
}
