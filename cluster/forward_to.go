package cluster

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// gone is what ForwardTo answers when the replica it forwards to refuses connections (it
// stopped, and what the request continues ended with it): status, code and message of a
// JSON-RPC error.
type gone struct {
	status int
	code   int64
	msg    string
}

// callGone: a modern call parked for its client's input lived in the process of a
// replica that stopped: the client starts it over.
var callGone = gone{status: http.StatusOK, code: jsonrpc.CodeInvalidParams,
	msg: "Invalid params: requestState names a call parked on a proxy replica that stopped; send the request again without requestState"}

// taskGone: a task's upstream session lived on a replica that stopped.
var taskGone = gone{status: http.StatusOK, code: jsonrpc.CodeInternalError,
	msg: "mcp-proxy: the proxy replica that held this task stopped; the task is gone"}

// ForwardedToHeader marks a request that ForwardTo sent to the replica it names. Such a
// request is never sent on by ForwardTo again; it may have come through Forward first (a
// task's request made in a session that another replica holds), so a request takes two
// hops at most.
const ForwardedToHeader = "Mcp-Proxy-Forwarded-To"

// Forwarded implements server.HTTPOptions.Forwarded: r came from another replica's
// forwarder. A client can send the headers too; that only keeps its request from being
// forwarded (the replica authenticates it as any other, and the router checks a task's
// creator against it).
func (f *Forwarder) Forwarded(r *http.Request) bool {
	return r.Header.Get(ForwardedHeader) != "" || r.Header.Get(ForwardedToHeader) != ""
}

// ForwardTo implements server.HTTPOptions.ForwardTo: a request that replica must serve
// (a modern retry whose call is parked there, a task's request whose task's upstream
// session is there), whose body the handler has read, is sent there and its answer
// streamed back, as Forward does for a legacy session. It declines (false) a request
// ForwardTo sent already, one for this replica, and one for a replica that is not
// registered: the handler then answers it itself (the call or the task is gone). When
// Redis may just have lost the registry (Forwarder.recovering), it waits for the
// replica to register again (for awaitFor at most) before it declines.
func (f *Forwarder) ForwardTo(w http.ResponseWriter, r *http.Request, replica string, body []byte) bool {
	if r.Header.Get(ForwardedToHeader) != "" || replica == f.id || replica == "" {
		return false
	}
	addr, ok := f.lookup(r.Context(), replica)
	if !ok {
		// Not registered: gone, or Redis restarted empty a moment ago and the replica
		// registers again within a second (recover.go). The handle carries no address
		// (it is only MAC'd: an address in it would be the client's to read).
		if f.knownRefused(replica) {
			return false
		}
		if addr, ok = f.awaitRegistered(r.Context(), replica); !ok {
			return r.Context().Err() != nil // the client went away, or the handler answers: gone
		}
	}
	var reqID jsonrpc.ID
	g := callGone
	if m, err := jsonrpc.Decode(bytes.TrimSpace(body)); err == nil && m.IsRequest() {
		reqID = m.ID
		if strings.HasPrefix(m.Method, "tasks/") {
			g = taskGone
		}
	}
	out := r.Clone(r.Context()) // the headers sent on are the client's and this mark
	out.Header.Set(ForwardedToHeader, replica)
	if f.forwardTo(w, out, replica, addr, body, reqID) {
		return true
	}
	f.refused(replica)
	f.log.Warn().Str("replica", replica).Msg("cluster: the replica that holds what a request continues refuses connections: it is gone")
	writeError(w, g.status, reqID, g.code, g.msg)
	return true
}
