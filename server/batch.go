package server

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// handleBatch serves a JSON-RPC batch (allowed by protocol 2025-03-26): every element is
// handled as if sent alone and the responses go back as one array once all are done.
// Batches are never sent upstream. An empty or unparseable array gets one error, as
// JSON-RPC requires; initialize must not be batched.
func (ss *session) handleBatch(ctx context.Context, line []byte) {
	var elems []json.RawMessage
	if err := json.Unmarshal(line, &elems); err != nil {
		ss.write(jsonrpc.NewErrorResponse(jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeParseError, "Parse error: %v", err)))
		return
	}
	if len(elems) == 0 {
		ss.write(jsonrpc.NewErrorResponse(jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: empty batch")))
		return
	}
	var (
		mu        sync.Mutex
		responses []*jsonrpc.Message
		wg        sync.WaitGroup
	)
	collect := func(m *jsonrpc.Message) {
		if m != nil {
			mu.Lock()
			responses = append(responses, m)
			mu.Unlock()
		}
		wg.Done()
	}
	for _, el := range elems {
		msg, err := jsonrpc.Decode(el)
		switch {
		case err != nil:
			var id jsonrpc.ID
			if msg != nil {
				id = msg.ID
			}
			wg.Add(1)
			collect(jsonrpc.NewErrorResponse(id, jsonrpc.DecodeError(err)))
		case msg.IsRequest() && isModern(msg):
			wg.Add(1)
			collect(jsonrpc.NewErrorResponse(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: batches are not part of protocol %s", mcp.ModernVersion)))
		case msg.IsRequest() && msg.Method == mcp.MethodInitialize:
			wg.Add(1)
			collect(jsonrpc.NewErrorResponse(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: initialize must not be part of a batch")))
		case msg.IsRequest():
			wg.Add(1)
			ss.handleRequest(ctx, msg, collect)
		case msg.IsNotification():
			ss.handleNotification(msg)
		}
	}
	if !ss.track() {
		return
	}
	go func() {
		defer ss.wg.Done()
		wg.Wait()
		if len(responses) == 0 {
			return // only notifications: nothing to answer
		}
		buf := []byte{'['}
		for i, m := range responses {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = m.Append(buf); err != nil {
				ss.log.Error().Err(err).Msg("encoding batch response")
				return
			}
		}
		buf = append(buf, ']')
		if err := ss.stream.WriteRaw(buf); err != nil {
			ss.log.Warn().Err(err).Msg("writing batch response")
		}
	}()
}

func isModern(msg *jsonrpc.Message) bool {
	_, v := modernMeta(msg.Params)
	return v != "" || msg.Method == mcp.MethodServerDiscover
}
