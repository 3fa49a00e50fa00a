package server

import (
	"github.com/mcp-proxy/mcp-proxy/router"
)

// A session says what its subscribers list (router.Viewer), so that the router tells
// each of them only of the lists that changed for it (a reload that changes one
// endpoint, or what one principal may see, notifies the sessions concerned, not every
// session): a legacy session lists its endpoint's view as the principal that opened it
// sees it, with the tools it activated; each modern subscription lists its endpoint's
// view as the principal that opened the subscription sees it.

var _ router.Viewer = (*session)(nil)

// Views implements router.Viewer. It takes no lock: the router calls it while it
// rebuilds, and a session may be waiting for the router then.
func (ss *session) Views() []router.View {
	if p := ss.views.Load(); p != nil {
		return *p
	}
	return nil
}

// refreshViewsLocked publishes the session's views after a change of its subscribers
// (initialize, a subscription opened or ended); ss.mu is held.
func (ss *session) refreshViewsLocked() {
	var vs []router.View
	if ss.initialized {
		vs = append(vs, router.View{ID: ss, Endpoint: ss.endpoint, Principal: ss.principal, Active: &ss.active})
	}
	for _, l := range ss.listens {
		vs = append(vs, router.View{ID: l, Endpoint: ss.endpoint, Principal: l.principal})
	}
	ss.views.Store(&vs)
}

// NotifyChanged implements router.Viewer: the legacy session and the subscriptions
// whose view changed are told.
func (ss *session) NotifyChanged(method string, changed func(router.View) bool) {
	ss.mu.Lock()
	legacy := ss.initialized
	ss.mu.Unlock()
	if legacy && changed(router.View{ID: ss}) {
		ss.notifyRaw(method, nil)
	}
	ss.notifyListens(method, nil, func(l *listenSub) bool { return changed(router.View{ID: l}) })
}
