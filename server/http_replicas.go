package server

import (
	"encoding/json"
	"net/http"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
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

// isTaskRequest: a request of one task, routed by its taskId alone (tasks/list is each
// replica's own).
func isTaskRequest(msg *jsonrpc.Message) bool {
	if !msg.IsRequest() {
		return false
	}
	switch msg.Method {
	case mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksCancel:
		return true
	}
	return false
}

// forwardTask offers HTTPOptions.ForwardTo a task's request whose task another replica
// holds (its upstream session is there). It costs the task store one look-up (in Redis:
// a round trip), on top of the router's own when the task is this replica's.
func (h *HTTPHandler) forwardTask(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message, body []byte) bool {
	id, ok, _ := jsonx.GetString(msg.Params, "taskId")
	if !ok || id == "" {
		return false
	}
	replica := h.s.r.TaskReplica(r.Context(), id)
	if replica == "" || replica == h.opts.Replica {
		return false
	}
	return h.opts.ForwardTo(w, r, replica, body)
}

// serveForwardedTask serves a task's request another replica forwarded here, without a
// session: the sender checked the client's session, this replica authenticated the
// client again (its principal is in r's context), and the router checks the task's
// creator against it as for any task's request. The answer is one JSON message; a
// client that goes away cancels the request.
func (h *HTTPHandler) serveForwardedTask(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) {
	if !h.modern.track() {
		httpError(w, http.StatusServiceUnavailable, msg.ID, jsonrpc.CodeInternalError, "mcp-proxy is shutting down")
		return
	}
	defer h.modern.wg.Done()
	ctx := h.requestContext(h.s.baseCtx, r)
	cancel := new(router.Canceller)
	done := make(chan *jsonrpc.Message, 1)
	req := &router.Request{Method: msg.Method, Params: msg.Params, ID: msg.ID, Cancel: cancel, Principal: principal.From(ctx)}
	h.s.r.Dispatch(ctx, req, func(res json.RawMessage, err error) {
		done <- responseFor(msg.ID, res, err)
	})
	var m *jsonrpc.Message
	select {
	case m = <-done:
	case <-r.Context().Done():
		cancel.Cancel()
		<-done
		return
	}
	if m == nil {
		return
	}
	writeMessage(w, http.StatusOK, m)
}
