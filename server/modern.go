package server

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// The modern era (2026-07-28): no session, every request carries its protocol version and
// the client's capabilities in _meta. A stdio connection may serve modern requests and
// a legacy session at once; a modern request never depends on an earlier one.

// requestMeta is the per-request identity of a modern request.
type requestMeta struct {
	meta     json.RawMessage // the request's _meta
	version  string
	caps     json.RawMessage
	parsed   mcp.ClientCapabilities
	info     json.RawMessage
	logLevel string
}

// modernMeta returns the protocol version a request declares in _meta ("" for a legacy
// request).
func modernMeta(params json.RawMessage) (meta json.RawMessage, version string) {
	if len(params) == 0 {
		return nil, ""
	}
	meta, ok, _ := jsonx.Get(params, "_meta")
	if !ok || len(meta) == 0 || meta[0] != '{' {
		return nil, ""
	}
	version, _, _ = jsonx.GetString(meta, mcp.MetaProtocolVersion)
	return meta, version
}

// cacheable are the results that carry caching hints in the modern era.
var cacheable = map[string]bool{
	mcp.MethodToolsList: true, mcp.MethodPromptsList: true, mcp.MethodResourcesList: true,
	mcp.MethodResourcesTemplatesList: true, mcp.MethodResourcesRead: true,
}

// modernMethods are the requests of the modern era (2026-07-28); anything else from a
// modern client is an unknown method.
var modernMethods = map[string]bool{
	mcp.MethodServerDiscover: true, mcp.MethodSubscriptionsListen: true,
	mcp.MethodToolsList: true, mcp.MethodToolsCall: true,
	mcp.MethodResourcesList: true, mcp.MethodResourcesRead: true, mcp.MethodResourcesTemplatesList: true,
	mcp.MethodPromptsList: true, mcp.MethodPromptsGet: true, mcp.MethodCompletionComplete: true,
}

// handleModern serves one modern request.
func (ss *session) handleModern(ctx context.Context, msg *jsonrpc.Message, meta json.RawMessage, version string, rp replier) {
	reply := rp.reply
	rm, err := ss.modernPrecheck(msg, meta, version)
	if err != nil {
		ss.s.refusedRequest(ctx, msg, err.Message)
		reply(jsonrpc.NewErrorResponse(msg.ID, err))
		return
	}
	ss.serveModern(ctx, msg, rm, rp)
}

// modernPrecheck validates what every modern request must carry: a supported version,
// the client's capabilities in _meta, and a method of the modern era. Over HTTP its
// errors are HTTP statuses (400, or 404 for an unknown method), so it runs before the
// answer starts.
func (ss *session) modernPrecheck(msg *jsonrpc.Message, meta json.RawMessage, version string) (requestMeta, *jsonrpc.Error) {
	var rm requestMeta
	if version == "" {
		return rm, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: _meta[%q] is required", mcp.MetaProtocolVersion)
	}
	if !mcp.IsModernVersion(version) {
		// Unknown, or a legacy version, which is negotiated with initialize instead.
		return rm, unsupportedVersion(version)
	}
	if !modernMethods[msg.Method] {
		return rm, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s (not part of protocol %s)", msg.Method, version)
	}
	caps, ok, _ := jsonx.Get(meta, mcp.MetaClientCapabilities)
	if !ok || len(caps) == 0 || caps[0] != '{' {
		return rm, jsonrpc.Errorf(jsonrpc.CodeInvalidParams,
			"Invalid params: _meta[%q] is required", mcp.MetaClientCapabilities)
	}
	rm = requestMeta{meta: meta, version: version, caps: caps}
	rm.info, _, _ = jsonx.Get(meta, mcp.MetaClientInfo)
	rm.logLevel, _, _ = jsonx.GetString(meta, mcp.MetaLogLevel)
	if err := json.Unmarshal(caps, &rm.parsed); err != nil {
		return rm, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: client capabilities: %v", err)
	}
	return rm, nil
}

// serveModern serves a modern request that passed modernPrecheck.
func (ss *session) serveModern(ctx context.Context, msg *jsonrpc.Message, rm requestMeta, rp replier) {
	reply := rp.reply
	caps := rm.caps
	ss.s.startUpstreams(mcp.NarrowClientCapabilities(caps), false)

	switch msg.Method {
	case mcp.MethodServerDiscover:
		ss.whenReady(ctx, reply, func() { reply(jsonrpc.NewResult(msg.ID, ss.s.discover(ss.endpoint))) })
		return
	case mcp.MethodSubscriptionsListen:
		ss.listen(ctx, msg, rp)
		return
	}

	serve := func() {
		state, _, _ := jsonx.GetString(msg.Params, "requestState")
		if state != "" {
			ss.resume(ctx, msg, state, rm, rp)
			return
		}
		ss.startModernCall(ctx, msg, rm, rp)
	}
	// The first requests of a modern client may come before the upstreams are up (there
	// is no initialize to wait in).
	ss.whenReady(ctx, reply, serve)
}

// whenReady runs fn once the upstreams' first start has finished: at once when it has,
// otherwise on a goroutine of its own, so that the reader goes on meanwhile.
func (ss *session) whenReady(ctx context.Context, reply func(*jsonrpc.Message), fn func()) {
	if ss.s.r.Settled() {
		fn()
		return
	}
	if !ss.track() {
		reply(nil)
		return
	}
	go func() {
		defer ss.wg.Done()
		ss.s.waitReady(ctx)
		fn()
	}()
}

// unsupportedVersion is the -32022 error listing what the proxy speaks.
func unsupportedVersion(requested string) *jsonrpc.Error {
	return jsonrpc.Errorf(mcp.CodeUnsupportedVersion, "Unsupported protocol version").WithData(map[string]any{
		"supported": mcp.SupportedVersions(), "requested": requested,
	})
}

// modernResult adapts a result from the engine to the modern era: every result says its
// resultType, cacheable results carry caching hints (the proxy's upstreams give none, so
// "do not reuse, and only for this caller").
func modernResult(method string, res json.RawMessage) json.RawMessage {
	var changes []jsonx.Change
	if _, ok, _ := jsonx.Get(res, "resultType"); !ok {
		changes = append(changes, jsonx.Change{Key: "resultType", Value: []byte(`"complete"`)})
	}
	if cacheable[method] {
		if _, ok, _ := jsonx.Get(res, "ttlMs"); !ok {
			changes = append(changes, jsonx.Change{Key: "ttlMs", Value: []byte("0")})
		}
		if _, ok, _ := jsonx.Get(res, "cacheScope"); !ok {
			changes = append(changes, jsonx.Change{Key: "cacheScope", Value: []byte(`"private"`)})
		}
	}
	if len(changes) == 0 {
		return res
	}
	if out, err := jsonx.Edit(res, changes); err == nil {
		return out
	}
	return res
}

// modernError adapts an error to the modern era: legacy resource-not-found (-32002)
// became -32602.
func modernError(err error) error {
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code == mcp.CodeResourceNotFound {
		c := *je
		c.Code = jsonrpc.CodeInvalidParams
		return &c
	}
	return err
}

// discover answers server/discover from the merged upstreams (those of endpoint, when
// it is not "").
func (s *Server) discover(endpoint string) json.RawMessage {
	caps := map[string]json.RawMessage{}
	_ = json.Unmarshal(s.capabilitiesFor(endpoint), &caps)
	// Logging reaches modern clients only per request, and legacy tasks are not part of
	// the modern protocol; the proxy offers neither to modern clients.
	delete(caps, "logging")
	delete(caps, "tasks")
	out, _ := jsonx.Marshal(map[string]any{
		"resultType":        mcp.ResultTypeComplete,
		"supportedVersions": mcp.SupportedVersions(),
		"capabilities":      caps,
		"instructions":      s.instructionsFor(endpoint),
		"ttlMs":             0,
		"cacheScope":        "private",
		"_meta": map[string]any{
			mcp.MetaServerInfo: serverInfo(s.cur()),
		},
	})
	return out
}

// waitReady waits (at most the ready grace) for the upstreams' first start.
func (s *Server) waitReady(ctx context.Context) {
	s.awaitStart(ctx, &s.log, "serving")
}
