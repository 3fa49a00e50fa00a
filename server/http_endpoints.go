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

// endpointRoutes maps the endpoints' paths to their routes; replaced whole.
type endpointRoutes map[string]httpRoute

// SetEndpoints serves the endpoints at their paths (endpoint name → path), replacing
// those served before: a path no longer served answers 404 from now on, also for the
// sessions opened on it. Safe while serving.
func (h *HTTPHandler) SetEndpoints(paths map[string]string) {
	routes := make(endpointRoutes, 3*len(paths))
	for name, p := range paths {
		p = strings.TrimSuffix(p, "/")
		routes[p] = httpRoute{routeStreamable, name}
		routes[p+legacySSEPath] = httpRoute{routeSSE, name}
		routes[p+legacyMessagePath] = httpRoute{routeMessage, name}
	}
	h.routes.Store(&routes)
}

// EndpointPaths returns the endpoints' Streamable HTTP paths, by endpoint name.
func (h *HTTPHandler) EndpointPaths() map[string]string {
	out := map[string]string{}
	if p := h.routes.Load(); p != nil {
		for path, rt := range *p {
			if rt.kind == routeStreamable {
				out[rt.endpoint] = path
			}
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
		rt, ok := (*p)[path]
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
