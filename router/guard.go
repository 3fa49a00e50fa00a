package router

import (
	"encoding/json"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// Guard decides what a principal may see: the router asks it about every item it would
// show (lists, and the targets of completions and subscriptions). What a principal may
// do is decided by the middleware chain (see Use), which every routed request passes.
type Guard interface {
	// Visible reports whether the request's principal may see t. Its answer must depend
	// only on t, on the principal's identity (principal.ID: its name, how and by whom it
	// was established) and groups and on the request's endpoint: the
	// router asks once per item for each catalogue change, endpoint and principal class,
	// and caches the lists it builds.
	Visible(req *Request, t *Target) bool
}

// TargetKind is what a Target is.
type TargetKind uint8

const (
	TargetTool TargetKind = iota + 1
	TargetPrompt
	TargetResource // a resource URI or a resource template
	TargetTask     // a task, by id (tasks/get, tasks/result, tasks/cancel)
)

// Target is the item a request is about, as the router resolved it.
type Target struct {
	Kind     TargetKind
	Name     string // exposed name, URI, or URI template
	Original string // the upstream's own name or URI
	Upstream string
	Raw      json.RawMessage // the item as listed, when it is listed
	// Forms are the other spellings of a resource's URI that rules must see as well:
	// the original URI when the exposed one was rewritten, and their normal forms
	// (mcp.URIForms). Nil for tools, prompts and templates.
	Forms []string
	// Proxy marks a tool the proxy serves itself (an endpoint's search_tools): no
	// upstream serves it (Upstream is "").
	Proxy bool
}

// guardBox holds the installed Guard (an interface cannot be swapped atomically as is).
type guardBox struct{ g Guard }

// SetGuard installs what decides visibility; call it before Start. A reload uses
// Reguard, which also drops the lists built for principals with the old one.
func (r *Router) SetGuard(g Guard) {
	if g == nil {
		r.guard.Store(nil)
		return
	}
	r.guard.Store(&guardBox{g})
}

// Guard returns the installed visibility guard, or nil.
func (r *Router) Guard() Guard {
	if b := r.guard.Load(); b != nil {
		return b.g
	}
	return nil
}

// OnClose registers f to run when the router closes, after the upstreams have stopped.
func (r *Router) OnClose(f func()) { r.onClose = append(r.onClose, f) }

// UnknownError is the answer for a name or URI the client cannot use: the same whether
// it does not exist or the principal may not see it, so that hidden items do not leak.
func UnknownError(kind TargetKind, name string) error {
	switch kind {
	case TargetTool:
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Unknown tool: %s", name)
	case TargetPrompt:
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Unknown prompt: %s", name)
	}
	data, _ := jsonx.Marshal(map[string]string{"uri": name})
	return &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Message: "Resource not found", Data: data}
}

// visible is Guard.Visible, true without a guard.
func (r *Router) visible(req *Request, t *Target) bool {
	g := r.Guard()
	return g == nil || g.Visible(req, t)
}
