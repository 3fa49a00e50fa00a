package server

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// A JSON-RPC batch (allowed by protocols 2025-03-26 … 2025-11-25) is served the same way
// on every transport: planBatch splits it, every request in it is served as if sent
// alone, and the answers go back together (one array on stdio; one array or one stream
// over HTTP). Batches are never sent upstream.

// batch is a decoded batch: what must be served, and what is answered at once.
type batch struct {
	requests []*jsonrpc.Message // served as if sent alone
	refusals []*jsonrpc.Message // error responses for elements refused as they stand
}

// planBatch decodes a batch and acts at once on what needs no answer: notifications are
// handled and responses (to the proxy's own requests) delivered, in order. An element
// that is not a valid message, an initialize, and a modern (2026-07-28) request are
// refused each with its own error. An array that cannot be parsed, or is empty, gets
// one error for the whole batch, as JSON-RPC requires.
func (ss *session) planBatch(ctx context.Context, raw []byte) (batch, *jsonrpc.Error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return batch{}, jsonrpc.Errorf(jsonrpc.CodeParseError, "Parse error: %v", err)
	}
	if len(elems) == 0 {
		return batch{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: empty batch")
	}
	var b batch
	var el json.RawMessage
	refuse := func(id jsonrpc.ID, e *jsonrpc.Error) {
		ss.s.refused(ctx, el, e.Message)
		b.refusals = append(b.refusals, jsonrpc.NewErrorResponse(id, e))
	}
	for _, el = range elems {
		msg, err := jsonrpc.Decode(el)
		switch {
		case err != nil:
			var id jsonrpc.ID
			if msg != nil {
				id = msg.ID
			}
			refuse(id, jsonrpc.DecodeError(err))
		case msg.IsRequest() && isModern(msg):
			refuse(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: batches are not part of protocol %s", mcp.ModernVersion))
		case msg.IsRequest() && msg.Method == mcp.MethodInitialize:
			refuse(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: initialize must not be part of a batch"))
		case msg.IsRequest():
			b.requests = append(b.requests, msg)
		case msg.IsNotification():
			ss.handleNotification(msg)
		default:
			ss.deliverResponse(msg)
		}
	}
	return b, nil
}

// handleBatch serves a batch that arrived on stdio: the answers go back as one array
// once all are done (nothing when the batch held only notifications and responses).
func (ss *session) handleBatch(ctx context.Context, line []byte) {
	b, jerr := ss.planBatch(ctx, line)
	if jerr != nil {
		ss.write(jsonrpc.NewErrorResponse(jsonrpc.ID{}, jerr))
		return
	}
	var (
		mu        sync.Mutex
		responses = b.refusals
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
	wg.Add(len(b.requests))
	for _, m := range b.requests {
		ss.handleRequest(ctx, m, replier{reply: collect})
	}
	if !ss.track() {
		return
	}
	go func() {
		defer ss.wg.Done()
		wg.Wait()
		if len(responses) == 0 {
			return // only notifications and responses: nothing to answer
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

// serveBatch answers a JSON-RPC batch in a legacy session (2025-03-26 allowed them;
// later versions did not, but clients still send them): notifications and responses
// are taken, and the requests answered together as an array or one event stream.
func (h *HTTPHandler) serveBatch(w http.ResponseWriter, r *http.Request, hs *httpSession, body []byte) {
	b, jerr := hs.ss.planBatch(r.Context(), body)
	if jerr != nil {
		httpError(w, http.StatusBadRequest, jsonrpc.ID{}, jerr.Code, jerr.Message)
		return
	}
	if len(b.requests)+len(b.refusals) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	a := newAnswer(w, hs, len(b.requests)+len(b.refusals))
	a.batch, a.prime = true, hs.primes()
	for _, m := range b.refusals {
		a.finish(m)
	}
	ctx := h.requestContext(hs.ctx, r)
	for _, m := range b.requests {
		hs.ss.handleRequest(ctx, m, replier{reply: a.finish, related: related{stream: a}})
	}
	a.wait(r.Context(), h.beat, nil, nil)
}
