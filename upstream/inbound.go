package upstream

// What the upstream sends that is not an answer to the proxy: its requests to the client
// (sampling, elicitation, roots, ping) and lines that are not valid messages.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// registerInbound makes the server's request msg cancellable by its id (the server may
// withdraw it with notifications/cancelled); done unregisters it.
func (c *conn) registerInbound(ctx context.Context, msg *jsonrpc.Message) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	key := msg.ID.Key()
	c.inboundMu.Lock()
	c.inbound[key] = cancel
	c.inboundMu.Unlock()
	return ctx, func() {
		c.inboundMu.Lock()
		delete(c.inbound, key)
		c.inboundMu.Unlock()
		cancel()
	}
}

// serverRequest answers one request of the server's, under ctx (cancelled when the
// server withdraws it); origin is the proxy's request whose answer carried it, or 0.
func (c *conn) serverRequest(ctx context.Context, msg *jsonrpc.Message, origin int64) {
	var reply *jsonrpc.Message
	switch {
	case msg.Method == mcp.MethodPing:
		reply = jsonrpc.NewResult(msg.ID, nil)
	case !mcp.IsClientRequest(msg.Method):
		reply = jsonrpc.NewErrorResponse(msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s", msg.Method))
	default:
		// While a client answers (a person reading an elicitation form, a model sampling),
		// the upstream's calls are waiting on it: their timeouts stop, and restart when
		// the answer is in.
		c.asking.Add(1)
		var res json.RawMessage
		var rerr *jsonrpc.Error
		if input := c.originInput(origin); input != nil {
			// The server sent it on one call's own stream: it is that call's client's.
			res, rerr = input(ctx, msg.Method, msg.Params)
		} else {
			res, rerr = c.u.events.Request(ctx, c.u, msg)
		}
		c.asking.Add(-1)
		c.extendDeadlines()
		if ctx.Err() != nil {
			return // withdrawn by the upstream, or the connection is gone: no answer
		}
		if rerr != nil {
			reply = jsonrpc.NewErrorResponse(msg.ID, rerr)
		} else {
			reply = jsonrpc.NewResult(msg.ID, res)
		}
	}
	if err := c.write(reply); err != nil {
		c.log.Debug().Err(err).Str("method", msg.Method).Msg("could not answer server request")
	}
}

// originInput returns the Input of the call a server-to-client request came with (it
// arrived on that call's own answer, see transport.Exchanger); nil when it came on a
// shared stream or the call is over (the router then attributes it).
func (c *conn) originInput(origin int64) func(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	if origin == 0 {
		return nil
	}
	c.mu.Lock()
	pc := c.pending[origin]
	c.mu.Unlock()
	if pc == nil {
		return nil
	}
	return pc.input
}

// badLine handles a line that is not a valid JSON-RPC message.
func (c *conn) badLine(line []byte, msg *jsonrpc.Message, err error) {
	if msg != nil && msg.ID.IsValid() && msg.Method == "" {
		// A response we can attribute: fail that call with a clear error.
		if id, ok := msg.ID.Int64(); ok {
			if pc := c.takeAnswered(id); pc != nil {
				pc.done(nil, mcp.ProxyError(mcp.CodeUpstreamProtocol, c.u.spec.Name,
					fmt.Sprintf("upstream %q sent an invalid response: %v", c.u.spec.Name, err)))
				return
			}
		}
	}
	if msg != nil && msg.ID.IsValid() && msg.Method != "" {
		// A request we cannot take as sent (duplicate member names, say): tell the
		// upstream why rather than leave it waiting.
		if werr := c.write(jsonrpc.NewErrorResponse(msg.ID, jsonrpc.DecodeError(err))); werr != nil {
			c.log.Debug().Err(werr).Msg("could not refuse an invalid server request")
		}
		c.log.Warn().Err(err).Str("method", msg.Method).Msg("refused an invalid request from the upstream")
		return
	}
	c.log.Warn().Err(err).Str("line", truncate(line, 200)).Msg("skipping a line on the upstream's stdout that is not a JSON-RPC message")
}

// tooLarge fails the call an oversized response belonged to, when its id can be found in
// the head of the line.
func (c *conn) tooLarge(err error) {
	var tl *jsonrpc.TooLargeError
	if errors.As(err, &tl) {
		if raw, ok := headID(tl.Head); ok {
			if id, err2 := strconv.ParseInt(raw, 10, 64); err2 == nil {
				perr := mcp.ProxyError(mcp.CodeMessageTooLarge, c.u.spec.Name,
					fmt.Sprintf("upstream %q answered with %d bytes, over its max_message_size of %d", c.u.spec.Name, tl.Size, tl.Limit))
				if pc, handed := c.takeOutcome(id, nil, perr); pc != nil && !handed {
					pc.done(nil, perr)
				}
			}
		}
	}
	c.log.Warn().Err(err).Msg("skipped an oversized message from the upstream")
}

// headID finds a top-level "id" member in the (possibly truncated) start of an object.
func headID(head []byte) (string, bool) {
	var id string
	_ = jsonx.Each(head, func(f jsonx.Field) bool {
		if jsonx.KeyIs(f.RawKey, "id") {
			id = string(f.Value)
			return false
		}
		return true
	})
	return id, id != ""
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
