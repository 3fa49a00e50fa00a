package server

import (
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/transport"
)

// Endpoints on HTTP: each endpoint (router.SetEndpoints) is served on a path of its own
// on the same listener, with both transports: Streamable HTTP at its path, the legacy
// HTTP+SSE stream at path+"/sse" and its messages at path+"/message". A session belongs
// to the endpoint it was opened on: a request for it on another path answers as for an
// unknown session. The listen path (and /sse, /message) serve the whole catalogue as
// without endpoints.

// routeKind is what a path of the handler serves.
type routeKind uint8

const (
	routeStreamable routeKind = iota + 1 // Streamable HTTP (POST, GET, DELETE)
	routeSSE                             // the legacy HTTP+SSE stream (GET)
	routeMessage                         // the legacy HTTP+SSE messages (POST)
)

// httpRoute is what a request's path names: a transport's entry, for an endpoint ("":
// the listen path's whole catalogue).
type httpRoute struct {
	kind     routeKind
	endpoint string
}

// endpointRoutes maps the endpoints' paths to their routes, and their names to their
// Streamable HTTP paths; replaced whole.
type endpointRoutes struct {
	byPath map[string]httpRoute
	paths  map[string]string // endpoint name → its Streamable HTTP path
}

// SetEndpoints serves the endpoints at their paths (endpoint name → path), replacing
// those served before. Safe while serving. An endpoint no longer served, or served at
// another path, has its sessions ended, as a DELETE would end them: a Streamable HTTP
// client's next request gets 404 (session not found) and its GET stream closes, and the
// initialize it then sends to the path gets 404 too (nothing is served there); an
// HTTP+SSE stream and a modern subscription of that endpoint close.
func (h *HTTPHandler) SetEndpoints(paths map[string]string) {
	routes := &endpointRoutes{byPath: make(map[string]httpRoute, 3*len(paths)), paths: make(map[string]string, len(paths))}
	for name, p := range paths {
		p = strings.TrimSuffix(p, "/")
		routes.byPath[p] = httpRoute{routeStreamable, name}
		routes.byPath[p+legacySSEPath] = httpRoute{routeSSE, name}
		routes.byPath[p+legacyMessagePath] = httpRoute{routeMessage, name}
		routes.paths[name] = p
	}
	old := h.routes.Swap(routes)
	if old == nil {
		return
	}
	gone := map[string]bool{}
	for name, p := range old.paths {
		if routes.paths[name] != p {
			gone[name] = true
		}
	}
	if len(gone) > 0 {
		h.endSessionsOf(gone)
	}
}

// endSessionsOf ends the sessions of the endpoints named in gone (SetEndpoints took
// them away), and their modern subscriptions.
func (h *HTTPHandler) endSessionsOf(gone map[string]bool) {
	var ended []*httpSession
	h.mu.Lock()
	for id, hs := range h.sessions {
		if gone[hs.ss.endpoint] {
			delete(h.sessions, id)
			ended = append(ended, hs)
		}
	}
	h.mu.Unlock()
	for _, hs := range ended {
		hs.log.Info().Str("endpoint", hs.ss.endpoint).Msg("session ended: its endpoint is no longer served at its path")
		hs.close()
		hs.ended()
	}
	h.modernMu.Lock()
	var moderns []*session
	for name, ss := range h.moderns {
		if gone[name] {
			delete(h.moderns, name)
			moderns = append(moderns, ss)
		}
	}
	h.modernMu.Unlock()
	for _, ss := range moderns {
		close(ss.ended) // its subscriptions' streams close
		ss.shutdown()
	}
}

// serves reports whether the handler serves endpoint ("": the listen path, always) at
// path, a path of the endpoint's: a session being opened there when SetEndpoints took
// it away is not kept.
func (h *HTTPHandler) serves(endpoint string) bool {
	if endpoint == "" {
		return true
	}
	p := h.routes.Load()
	return p != nil && p.paths[endpoint] != ""
}

// EndpointPaths returns the endpoints' Streamable HTTP paths, by endpoint name.
func (h *HTTPHandler) EndpointPaths() map[string]string {
	out := map[string]string{}
	if p := h.routes.Load(); p != nil {
		for name, path := range p.paths {
			out[name] = path
		}
	}
	return out
}

// route returns what a request's path names; false for a path the handler does not
// serve. The listen path is compared first: a request on it costs one comparison.
func (h *HTTPHandler) route(path string) (httpRoute, bool) {
	switch path {
	case h.opts.Path:
		return httpRoute{kind: routeStreamable}, true
	case legacySSEPath:
		return httpRoute{kind: routeSSE}, true
	case legacyMessagePath:
		return httpRoute{kind: routeMessage}, true
	}
	if p := h.routes.Load(); p != nil {
		rt, ok := p.byPath[path]
		return rt, ok
	}
	return httpRoute{}, false
}

// modernFor returns the session that serves the modern requests of endpoint: one per
// endpoint, made on its first request (modern requests share no state but their parked
// calls and subscriptions, which belong to one endpoint).
func (h *HTTPHandler) modernFor(endpoint string) *session {
	if endpoint == "" {
		return h.modern
	}
	h.modernMu.Lock()
	defer h.modernMu.Unlock()
	if ss := h.moderns[endpoint]; ss != nil {
		return ss
	}
	ss := newSession(h.s, transport.NewOutputStream(io.Discard), h.s.log.With().Str("session", "http-modern").Str("endpoint", endpoint).Logger())
	ss.corkless, ss.replica, ss.endpoint = true, h.opts.Replica, endpoint
	ss.ended = make(chan struct{})
	if h.moderns == nil {
		h.moderns = map[string]*session{}
	}
	h.moderns[endpoint] = ss
	return ss
}

// endpointModerns returns the endpoints' modern sessions, for Close.
func (h *HTTPHandler) endpointModerns() []*session {
	h.modernMu.Lock()
	defer h.modernMu.Unlock()
	return slices.Collect(maps.Values(h.moderns))
}
