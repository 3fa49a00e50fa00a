package server

import (
	"context"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// refused tells the router's refusal hook (the audit) of raw, bytes refused as a
// request before routing with reason (what the client was told): a message that does
// not decode, one over the size limit (raw is then its head), a batch element. Only
// refusal paths call it; what it reads of raw it reads without taking it as a message
// (jsonrpc.Refused), and nothing when no hook is installed.
func (s *Server) refused(ctx context.Context, raw []byte, reason string) {
	if !s.r.WantsRefusals() {
		return
	}
	methods, args := jsonrpc.Refused(raw)
	if len(methods) == 0 {
		return
	}
	s.r.Refused(ctx, &router.Refusal{Methods: methods, Principal: principal.From(ctx), Reason: reason, Arguments: args})
}

// refusedRequest is refused for a request that decoded but is refused before routing
// (its _meta or headers are wrong, or its session does not take it now).
func (s *Server) refusedRequest(ctx context.Context, msg *jsonrpc.Message, reason string) {
	if !s.r.WantsRefusals() {
		return
	}
	var args []byte
	if len(msg.Params) > 0 && msg.Params[0] == '{' {
		args, _, _ = jsonx.Get(msg.Params, "arguments")
	}
	s.r.Refused(ctx, &router.Refusal{Methods: []string{msg.Method}, Principal: principal.From(ctx), Reason: reason, Arguments: args})
}
