package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Request is one client request, already separated from its transport.
type Request struct {
	Method string
	Params json.RawMessage
	// ID is the id the client gave the request, for logs and traces (the zero ID when
	// the front end has none to give, as for the CLI); the router never routes on it.
	ID jsonrpc.ID
	// Progress receives progress notifications for this request with the client's own
	// token restored; nil when the client cannot receive them.
	Progress func(params json.RawMessage)
	// Cancel, when set, lets the front end cancel the request later; it then completes
	// with ErrCancelled. Without it, ctx cancels the request.
	Cancel *Canceller
	// Input answers server-to-client requests (sampling, elicitation, roots) that the
	// owning upstream sends while this request is in flight. Client identifies whose
	// request it is: when every request in flight on that upstream belongs to the same
	// client, the upstream's request can only be for it.
	Input InputFunc
	// Waiting, when set, reports whether the request is parked waiting for its client
	// (a modern call between input rounds): an upstream request cannot come from it,
	// so it is left out when attributing one.
	Waiting func() bool
	// Client identifies who the request comes from (requests of one client share it; 0
	// for nobody in particular), so that an upstream's request is given to the client
	// whose calls are in flight there.
	Client ClientID
	// Session is the client session the request belongs to, which has its own session
	// with per-client upstreams; nil for requests without one (stateless modern
	// clients), which those upstreams' catalogue instance serves.
	Session Client
	// Meta identifies the client (capabilities narrowed to what the proxy relays, client
	// info, log level) for upstreams that want it on every request.
	Meta *ClientMeta
	// Principal is who the request is made for (nil: nobody in particular, as for the
	// CLI); the policy chain decides on it.
	Principal *principal.Principal
	// Modern means the client speaks the 2026-07-28 era: merged lists carry caching
	// hints, and input_required results reach it as they are (a legacy client's input is
	// obtained through Input instead, and the upstream retried).
	Modern bool
	// Endpoint is the endpoint the request came through (see SetEndpoints): its lists
	// and calls are served from that endpoint's view. "": none, the whole catalogue.
	Endpoint string
	// Active is the client session's activated tools (an endpoint in search mode); nil
	// for requests without a session, which list no activated tools.
	Active *Active
}

// ClientID identifies a client to the router; the front end mints them.
type ClientID uint64

// InputFunc answers one server-to-client request on behalf of a client.
type InputFunc func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error)

// Canceller cancels one dispatched request (see upstream.Canceller).
type Canceller = upstream.Canceller

// ClientMeta identifies the client a request is made for (see upstream.ClientMeta).
type ClientMeta = upstream.ClientMeta

// ErrCancelled is returned by Dispatch when ctx ended before an answer: the client
// cancelled or went away, and nothing must be sent back.
var ErrCancelled = errors.New("request cancelled")

// Reply receives the outcome of a dispatched request: the result, or the error to send
// to the client (an upstream's error passes through unchanged), or ErrCancelled.
type Reply func(result json.RawMessage, err error)

// Dispatch serves one request from the merged catalogue or routes it to its owner, and
// calls reply exactly once with the outcome. Requests served locally reply before
// Dispatch returns; routed ones reply later from the upstream's reader goroutine, so the
// proxy adds no goroutine hand-off to a call (or, under a context from InlineContext, the
// first one sent to an HTTP upstream replies before Dispatch returns, its exchange run
// on the caller's goroutine). reply must not block for long.
func (r *Router) Dispatch(ctx context.Context, req *Request, reply Reply) {
	switch req.Method {
	case mcp.MethodToolsList:
		r.Local(ctx, req, r.answerTools, reply)
	case mcp.MethodPromptsList:
		r.Local(ctx, req, r.answerPrompts, reply)
	case mcp.MethodResourcesList:
		r.Local(ctx, req, r.answerResources, reply)
	case mcp.MethodResourcesTemplatesList:
		r.Local(ctx, req, r.answerTemplates, reply)
	case mcp.MethodToolsCall:
		snap := r.snap.Load()
		if req.Endpoint != "" {
			r.callEndpointTool(ctx, snap, req, reply)
			return
		}
		r.callNamed(ctx, req, snap.toolByName, "tool", reply)
	case mcp.MethodPromptsGet:
		r.callNamed(ctx, req, r.snap.Load().promptIndex(req), "prompt", reply)
	case mcp.MethodResourcesRead, mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
		r.callByURI(ctx, req, reply)
	case mcp.MethodCompletionComplete:
		r.complete(ctx, req, reply)
	case mcp.MethodLoggingSetLevel:
		go func() { reply(r.setLevel(ctx, req)) }()
	case mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksCancel:
		r.callTask(ctx, req, reply)
	case mcp.MethodTasksList:
		go func() { reply(r.listTasks(ctx, req)) }()
	default:
		reply(nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s", req.Method))
	}
}

// InlineHook is told when an inline exchange starts and ends (see upstream.InlineHook).
type InlineHook = upstream.InlineHook

// InlineContext marks a context so that the first call dispatched under it to an
// upstream over Streamable HTTP runs its exchange on the dispatching goroutine, which
// Dispatch then returns to with the call answered (see upstream.AllowInline and
// upstream.InlineContext): for a caller that waits for the answer anyway and has nothing
// else to do meanwhile.
type InlineContext = upstream.InlineContext

// The lists' answers (Local).
func (r *Router) answerTools(ctx context.Context, req *Request) (json.RawMessage, error) {
	if req.Endpoint != "" {
		if q, ok, _ := jsonx.GetString(req.Params, "query"); ok && q != "" { // SEP-1821
			snap := r.snap.Load()
			return r.listQuery(ctx, snap, req, snap.viewOf(req), q), nil
		}
	}
	return r.listPage(req, listTools)
}

func (r *Router) answerPrompts(_ context.Context, req *Request) (json.RawMessage, error) {
	return r.listPage(req, listPrompts)
}

func (r *Router) answerResources(_ context.Context, req *Request) (json.RawMessage, error) {
	return r.listPage(req, listResources)
}

func (r *Router) answerTemplates(_ context.Context, req *Request) (json.RawMessage, error) {
	return r.listPage(req, listTemplates)
}

// Call is the synchronous form of Dispatch.
func (r *Router) Call(ctx context.Context, req *Request) (json.RawMessage, error) {
	type outcome struct {
		res json.RawMessage
		err error
	}
	ch := make(chan outcome, 1)
	r.Dispatch(ctx, req, func(res json.RawMessage, err error) { ch <- outcome{res, err} })
	o := <-ch
	return o.res, o.err
}

// forward sends params to b (or, for a per-client upstream, to the calling client's own
// session with it) and maps the outcome to Dispatch's contract.
func (r *Router) forward(ctx context.Context, b *backend, req *Request, params json.RawMessage, spare *sendSpare, reply Reply) {
	params, err := r.admit(ctx, b, req, params)
	if err != nil {
		answerAdmission(err, reply)
		return
	}
	target, inst, err := r.route(b, req)
	if err != nil {
		reply(nil, err)
		return
	}
	if _, isTask, _ := jsonx.Get(params, "task"); isTask {
		// A task-augmented request: remember who owns the task it creates.
		inner := reply
		reply = func(res json.RawMessage, err error) {
			if err == nil {
				r.noteTask(ctx, target, req, res)
			}
			inner(res, err)
		}
	}
	// A request that can answer server-to-client requests is tracked on target while it
	// is in flight; send's completion untracks it (no wrapper per call).
	tracked := req.Input != nil
	if tracked {
		target.track(req)
	}
	if inst == nil {
		r.send(ctx, target, req, params, tracked, spare, reply)
		return
	}
	inst.calls.Add(1)
	inner := reply
	reply = func(res json.RawMessage, err error) {
		inst.lastUsed.Store(time.Now().UnixNano())
		inst.calls.Add(-1)
		inner(res, err)
	}
	if st, _ := inst.up.State(); st == upstream.StateReady {
		r.send(ctx, target, req, params, tracked, spare, reply)
		return
	}
	go func() { // the client's first call: its session with the upstream is starting
		if err := inst.up.WaitFirstAttempt(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn().Ctx(ctx).Err(err).Str("upstream", b.name).Msg("per-client upstream session did not start")
		}
		r.send(ctx, target, req, params, tracked, spare, reply)
	}()
}

// send hands one request to b's upstream; tracked: req is tracked on b (forward), until
// its answer. The upstream request is built in spare's room when it is free.
func (r *Router) send(ctx context.Context, b *backend, req *Request, params json.RawMessage, tracked bool, spare *sendSpare, reply Reply) {
	b.calls.Add(1)
	ur := spare.take()
	if ur == nil {
		ur = new(upstream.Request)
	}
	*ur = upstream.Request{Method: req.Method, Params: params, Progress: req.Progress, Cancel: req.Cancel,
		Meta: req.Meta, Input: req.Input, ClientHandlesInput: req.Modern}
	b.up.Send(ctx, ur,
		func(resp *jsonrpc.Message, err error) {
			b.calls.Add(-1)
			if tracked {
				b.untrack(req)
			}
			switch {
			case err != nil:
				reply(nil, upstreamError(ctx, b, err))
			case resp.Error != nil:
				reply(nil, resp.Error)
			default:
				reply(resp.Result, nil)
			}
		})
}

// callUpstream is Send, waiting for the answer.
func callUpstream(ctx context.Context, up Upstream, req *upstream.Request) (*jsonrpc.Message, error) {
	type outcome struct {
		m   *jsonrpc.Message
		err error
	}
	ch := make(chan outcome, 1)
	up.Send(ctx, req, func(m *jsonrpc.Message, err error) { ch <- outcome{m, err} })
	o := <-ch
	return o.m, o.err
}

// upstreamError maps a failure to reach an upstream to what the client is told.
func upstreamError(ctx context.Context, b *backend, err error) error {
	if ctx.Err() != nil || errors.Is(err, upstream.ErrCancelled) {
		return ErrCancelled
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je
	}
	if errors.Is(err, upstream.ErrUnavailable) {
		return mcp.ProxyError(mcp.CodeUpstreamUnavailable, b.name, err.Error())
	}
	return mcp.ProxyError(mcp.CodeUpstreamFailed, b.name, err.Error())
}

// callEndpointTool routes a tools/call through an endpoint: in its view, where search
// mode adds search_tools and call_tool.
func (r *Router) callEndpointTool(ctx context.Context, snap *snapshot, req *Request, reply Reply) {
	v := snap.viewOf(req)
	if v.ep != nil && v.ep.Search {
		// The raw name, compared as it is (no allocation for the calls of every other
		// tool), unquoted only when it holds an escape.
		raw, _, _ := jsonx.Get(req.Params, "name")
		if bytes.IndexByte(raw, '\\') >= 0 {
			if s, err := jsonx.Unquote(raw); err == nil {
				raw = jsonrpc.AppendString(nil, s)
			}
		}
		switch string(raw) {
		case `"` + SearchToolsName + `"`:
			r.searchTools(ctx, snap, req, v, reply)
			return
		case `"` + CallToolName + `"`:
			r.callTool(ctx, req, v, reply)
			return
		}
	}
	r.callNamed(ctx, req, v.toolByName, "tool", reply)
}

// callNamed routes tools/call and prompts/get by exposed name.
func (r *Router) callNamed(ctx context.Context, req *Request, index map[string]*entry, what string, reply Reply) {
	name, ok, err := jsonx.GetString(req.Params, "name")
	if err != nil || !ok {
		r.refuse(ctx, req, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %s name is required", what), reply)
		return
	}
	e := index[name]
	if e == nil && !r.Settled() {
		go r.callWhenStarted(ctx, req, what, reply) // an upstream still starting may list it
		return
	}
	r.callEntry(ctx, req, e, name, what, reply)
}

// callEntry routes a tools/call or prompts/get to the owner of e, the catalogue entry of
// name (nil: unknown).
func (r *Router) callEntry(ctx context.Context, req *Request, e *entry, name, what string, reply Reply) {
	kind := TargetPrompt
	if what == "tool" {
		kind = TargetTool
	}
	if e == nil {
		reply(nil, UnknownError(kind, name))
		return
	}
	var err error
	params := req.Params
	if e.original != name {
		if params, err = jsonx.Set(params, "name", e.quoted); err != nil {
			reply(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err))
			return
		}
	}
	// The call, its target and the room for its upstream request in one allocation.
	ct := &struct {
		call   Call
		target Target
		spare  sendSpare
	}{
		call:   Call{Method: req.Method, Params: params, Request: req, owner: e.owner},
		target: Target{Kind: kind, Name: name, Original: e.original, Upstream: e.owner.name, Raw: e.raw},
	}
	ct.call.Target = &ct.target
	ct.call.spare = &ct.spare
	r.routeCall(ctx, &ct.call, reply)
}

// callByURI routes resources/read, subscribe and unsubscribe by URI ownership. The
// policy decides on the resource as listed and on every spelling of its URI, and the
// upstream receives exactly one of those: its own listed URI, or the normal form. A URI
// that no upstream lists or matches while some are still starting waits for them.
func (r *Router) callByURI(ctx context.Context, req *Request, reply Reply) {
	uri, ok, err := jsonx.GetString(req.Params, "uri")
	if err != nil || !ok {
		r.refuse(ctx, req, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: uri is required"), reply)
		return
	}
	if !r.Settled() && !r.listsURI(req, uri) {
		go r.whenStarted(ctx, "resource", uri, func() bool { return r.listsURI(req, uri) }, func() { r.routeByURI(ctx, req, uri, reply) }, reply)
		return
	}
	r.routeByURI(ctx, req, uri, reply)
}

// routeByURI is callByURI for a URI as the catalogue stands.
func (r *Router) routeByURI(ctx context.Context, req *Request, uri string, reply Reply) {
	t, owner, err := r.resolveResource(req, uri)
	if err != nil {
		reply(nil, err)
		return
	}
	if req.Method != mcp.MethodResourcesRead && !r.visible(req, t) { // subscribe, unsubscribe
		reply(nil, UnknownError(TargetResource, uri))
		return
	}
	params := req.Params
	if t.Original != uri {
		if params, err = jsonx.Set(params, "uri", jsonrpc.AppendString(nil, t.Original)); err != nil {
			reply(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err))
			return
		}
		if req.Method == mcp.MethodResourcesRead && t.Name != t.Original {
			inner, from, to := reply, t.Original, t.Name
			reply = func(res json.RawMessage, err error) {
				if err == nil {
					res = rewriteContentURIs(res, from, to)
				}
				inner(res, err)
			}
		}
	}
	r.routeCall(ctx, &Call{Method: req.Method, Params: params, Target: t, Request: req, owner: owner}, reply)
}

// resolveResource finds the owner of the resource a client names by uri and the target
// the policy decides on: Name is the exposed URI of a listed resource or the normal form
// of an unlisted one, Original what the upstream receives, Forms every other spelling.
// A URI that cannot be normalized unambiguously is refused with -32602; one that nobody
// lists and no template matches goes to the only upstream that serves resources (a
// resource link in a tool result names such URIs), or is not found.
func (r *Router) resolveResource(req *Request, uri string) (*Target, *backend, error) {
	canon, err := mcp.NormalizeURI(uri)
	if err != nil {
		return nil, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: uri: %v", err)
	}
	snap := r.snap.Load()
	owner, orig, res := snap.resolveURI(uri, canon)
	if owner == nil {
		owner, orig = r.soleResourceServer(snap.viewOf(req)), canon
	}
	if owner == nil {
		return nil, nil, UnknownError(TargetResource, uri)
	}
	t := &Target{Kind: TargetResource, Name: canon, Original: orig, Upstream: owner.name}
	if res != nil {
		t.Name, t.Raw, t.Forms = res.exposed, res.raw, res.forms
	} else {
		t.Forms = mcp.URIForms(canon)
	}
	if uri != t.Name && uri != t.Original && !slices.Contains(t.Forms, uri) {
		t.Forms = append(slices.Clip(t.Forms), uri)
	}
	if !snap.servesResource(req, t, owner) {
		return nil, nil, UnknownError(TargetResource, uri) // outside the request's endpoint
	}
	return t, owner, nil
}

// soleResourceServer returns the only ready upstream that serves resources (of those
// view serves, when it is not nil), so that URIs it did not list (dynamic ones) still
// reach it; nil when there are none or several.
func (r *Router) soleResourceServer(view *epView) *backend {
	var found *backend
	for _, b := range r.all() {
		if view != nil && !view.servesBackend(b) {
			continue
		}
		if st, _ := b.up.State(); st == upstream.StateReady && b.up.Info().HasResources() {
			if found != nil {
				return nil
			}
			found = b
		}
	}
	return found
}

// rewriteContentURIs maps contents[].uri from the upstream's URI to the exposed one.
func rewriteContentURIs(res json.RawMessage, from, to string) json.RawMessage {
	contents, ok, err := jsonx.Get(res, "contents")
	if err != nil || !ok {
		return res
	}
	var items []json.RawMessage
	if json.Unmarshal(contents, &items) != nil {
		return res
	}
	for i, it := range items {
		if u, ok, _ := jsonx.GetString(it, "uri"); ok && u == from {
			if out, err := jsonx.Set(it, "uri", jsonrpc.AppendString(nil, to)); err == nil {
				items[i] = out
			}
		}
	}
	b, err := jsonx.Marshal(items)
	if err != nil {
		return res
	}
	out, err := jsonx.Set(res, "contents", b)
	if err != nil {
		return res
	}
	return out
}

// complete routes completion/complete by its reference: a prompt's exposed name, or a
// resource URI or template. A reference nobody lists while some upstreams are still
// starting waits for them.
func (r *Router) complete(ctx context.Context, req *Request, reply Reply) {
	ref, ok, err := jsonx.Get(req.Params, "ref")
	if err != nil || !ok {
		r.refuse(ctx, req, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: ref is required"), reply)
		return
	}
	if !r.Settled() {
		known := func() bool { return r.knowsRef(req, ref) }
		if !known() {
			name, _, _ := jsonx.GetString(ref, "name")
			if name == "" {
				name, _, _ = jsonx.GetString(ref, "uri")
			}
			go r.whenStarted(ctx, "completion reference", name, known, func() { r.completeRef(ctx, req, ref, reply) }, reply)
			return
		}
	}
	r.completeRef(ctx, req, ref, reply)
}

// completeRef is complete for ref as the catalogue stands.
func (r *Router) completeRef(ctx context.Context, req *Request, ref json.RawMessage, reply Reply) {
	var err error
	typ, _, _ := jsonx.GetString(ref, "type")
	snap := r.snap.Load()
	var owner *backend
	var newRef json.RawMessage
	var target *Target
	switch typ {
	case "ref/prompt":
		name, _, _ := jsonx.GetString(ref, "name")
		e := snap.promptIndex(req)[name]
		if e == nil {
			reply(nil, UnknownError(TargetPrompt, name))
			return
		}
		target = &Target{Kind: TargetPrompt, Name: name, Original: e.original, Upstream: e.owner.name, Raw: e.raw}
		owner = e.owner
		if e.original != name {
			newRef, _ = jsonx.Set(ref, "name", e.quoted)
		}
	case "ref/resource":
		uri, _, _ := jsonx.GetString(ref, "uri")
		if owner = snap.templateOwner(uri); owner != nil {
			target = &Target{Kind: TargetResource, Name: uri, Original: uri, Upstream: owner.name}
			if !snap.servesResource(req, target, owner) {
				owner = nil // a template outside the request's endpoint
			}
		}
		if owner == nil {
			if t, o, err := r.resolveResource(req, uri); err == nil {
				target, owner = t, o
				if t.Original != uri {
					newRef, _ = jsonx.Set(ref, "uri", jsonrpc.AppendString(nil, t.Original))
				}
			}
		}
		if owner == nil {
			reply(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Unknown resource or template: %s", uri))
			return
		}
	default:
		r.refuse(ctx, req, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: unknown ref type %q", typ), reply)
		return
	}
	params := req.Params
	if newRef != nil {
		if params, err = jsonx.Set(params, "ref", newRef); err != nil {
			reply(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err))
			return
		}
	}
	r.routeCall(ctx, &Call{Method: req.Method, Params: params, Target: target, Request: req, owner: owner}, reply)
}

// setLevel fans logging/setLevel out to every ready upstream that logs, and remembers the
// level for upstreams that start later.
func (r *Router) setLevel(ctx context.Context, req *Request) (json.RawMessage, error) {
	level, ok, _ := jsonx.GetString(req.Params, "level")
	if !ok {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: level is required")
	}
	switch level {
	case "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency":
	default:
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: unknown log level %q", level)
	}
	r.logLevel.Store(&level)
	var wg sync.WaitGroup
	for _, b := range r.all() {
		// The session this client's calls go to (its own, or the one for its
		// capabilities); one starting now takes the level when it is ready.
		if t, _, err := r.route(b, req); err == nil {
			b = t
		}
		if st, _ := b.up.State(); st != upstream.StateReady || !b.up.Info().HasLogging() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := callUpstream(ctx, b.up, &upstream.Request{Method: req.Method, Params: req.Params})
			if err == nil && resp.Error != nil {
				err = resp.Error
			}
			if err != nil {
				r.log.Warn().Err(err).Str("upstream", b.name).Msg("logging/setLevel failed upstream")
			}
		}()
	}
	wg.Wait()
	return json.RawMessage("{}"), nil
}
