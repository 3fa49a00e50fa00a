package server

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// maxClientWait bounds how long a relayed server-to-client request (a user reading an
// elicitation form, a model sampling) may stay unanswered.
const maxClientWait = 10 * time.Minute

// Request implements router.Client: it sends a server-to-client request to this client
// with an id from the session's own outgoing id space and waits for the answer. What the
// client did not declare at initialize is refused without asking it.
func (ss *session) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	return ss.requestVia(ctx, ss.stream.Write, method, params)
}

// requestVia is Request with the request written by send (the session's stream, or the
// answer stream of the client request it is tied to).
func (ss *session) requestVia(ctx context.Context, send func(*jsonrpc.Message) error, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	ss.mu.Lock()
	caps := ss.clientCaps
	ss.mu.Unlock()
	if ok, reason := caps.Allows(method, params); !ok {
		ss.log.Warn().Str("method", method).Str("reason", reason).Msg("server-to-client request refused")
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "mcp-proxy cannot relay %s: %s", method, reason)
	}
	id := ss.outNext.Add(1)
	ch := make(chan *jsonrpc.Message, 1)
	ss.mu.Lock()
	ss.outgoing[id] = ch
	ss.mu.Unlock()
	defer func() {
		ss.mu.Lock()
		delete(ss.outgoing, id)
		ss.mu.Unlock()
	}()
	if err := send(jsonrpc.NewRequest(jsonrpc.IntID(id), method, params)); err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcp-proxy could not reach the client: %v", err)
	}
	timer := time.NewTimer(maxClientWait)
	defer timer.Stop()
	select {
	case resp := <-ch:
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp.Result, nil
	case <-ctx.Done():
	case <-timer.C:
	}
	// Withdrawn upstream, timed out, or the session is ending: tell the client to stop.
	params, _ = jsonx.Marshal(map[string]any{"requestId": id, "reason": "withdrawn by the server"})
	ss.Notify(mcp.NotificationCancelled, params)
	return nil, mcp.ProxyError(mcp.CodeUpstreamTimeout, "", "the client did not answer "+method+" in time")
}

// deliverResponse hands a client's response to the relayed request waiting for it.
func (ss *session) deliverResponse(msg *jsonrpc.Message) {
	id, ok := msg.ID.Int64()
	ss.mu.Lock()
	ch := ss.outgoing[id]
	ss.mu.Unlock()
	if !ok || ch == nil {
		ss.log.Debug().Str("id", msg.ID.String()).Msg("response from client to no pending request; dropped")
		return
	}
	ch <- msg
}
