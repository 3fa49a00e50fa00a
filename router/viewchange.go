package router

import (
	"bytes"
	"encoding/json"

	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Who is told that a list changed. A client lists a view of the catalogue (its
// endpoint's, as its principal may see it, with the tools its searches activated), and
// a change of the catalogue, the policy or the endpoints changes some views and not
// others: a reload that changes one endpoint must not send every session of the proxy a
// list_changed (each would list again, for nothing). So a rebuild compares, for each
// subscriber that says what it lists (Viewer), its lists before and after, and tells it
// of the kinds whose list changed for it. What an upstream announced (its own
// list_changed) is passed on to everyone, as before: its list may have changed and
// changed back. A client that is not a Viewer is told of every kind whose list may have
// changed for someone.

// View is what one subscriber of a client lists.
type View struct {
	// ID identifies the subscriber to its client (NotifyChanged); comparable, and
	// distinct among all the subscribers of a router.
	ID        any
	Endpoint  string               // the endpoint it came through; "": none
	Principal *principal.Principal // who it is (nil: nobody in particular)
	Active    *Active              // the tools it activated (a search-mode endpoint's session); nil: none
}

// Viewer is a Client that says what its subscribers list (a legacy session: itself; a
// modern session: each of its subscriptions), so that each is told only of the lists
// that changed for it.
type Viewer interface {
	Client
	// Views returns the views of the client's subscribers at this moment. It is called
	// while the router rebuilds its catalogue: it must not block, nor call the router.
	Views() []View
	// NotifyChanged sends method (a list_changed notification) to the subscribers for
	// whose view changed reports true.
	NotifyChanged(method string, changed func(View) bool)
}

// maxComparedViews bounds the distinct views (endpoint and principal class) a rebuild
// compares; past it, every subscriber is told of what may have changed, as if none
// were a Viewer: a spurious list_changed costs a list, a missed one a stale client.
const maxComparedViews = 512

// listKinds are the kinds a list_changed names, with their notification.
var listKinds = [...]struct {
	kinds  upstream.Kinds
	method string
}{
	{upstream.KindTools, mcp.NotificationToolsListChanged},
	{upstream.KindPrompts, mcp.NotificationPromptsListChanged},
	{upstream.KindResources | upstream.KindTemplates, mcp.NotificationResourcesListChanged},
}

// subscriber is one view of a subscribed Viewer, as a rebuild compares it.
type subscriber struct {
	client Client
	view   View
	req    Request // what listing that view is: its endpoint, principal and activated tools
}

// subscribers returns the subscribed clients at this moment: each view of the Viewers,
// and the others.
func (r *Router) subscribers() (views []subscriber, plain []Client) {
	r.clientsMu.Lock()
	defer r.clientsMu.Unlock()
	for c := range r.clients {
		v, ok := c.(Viewer)
		if !ok {
			plain = append(plain, c)
			continue
		}
		for _, view := range v.Views() {
			views = append(views, subscriber{client: c, view: view,
				req: Request{Endpoint: view.Endpoint, Principal: view.Principal, Active: view.Active}})
		}
	}
	return views, plain
}

// viewLists are the lists one view sees of one snapshot, by list kind (tools, prompts,
// resources and templates together); nil where not read.
type viewLists [len(listKinds)][][]json.RawMessage

// sharedKey names what a view sees when it activated nothing: its endpoint and
// principal class.
type sharedKey struct {
	endpoint, class string
}

// viewsRead is what readViews read of one snapshot: the lists of each distinct view
// (endpoint and principal class) once, which view each subscriber sees, and the tools
// list of each subscriber whose list is its own (a search-mode session's, with the
// tools it activated).
type viewsRead struct {
	shared   map[sharedKey]*viewLists
	keys     []sharedKey               // by subscriber
	personal map[int][]json.RawMessage // by subscriber: its own tools list
}

// tools returns the tools list subscriber i sees.
func (v *viewsRead) tools(i int) [][]json.RawMessage {
	if p, ok := v.personal[i]; ok {
		return [][]json.RawMessage{p}
	}
	return v.shared[v.keys[i]][0]
}

// readViews reads, of snapshot s, the lists of kinds every subscriber sees: once per
// endpoint and principal class (the snapshot caches them), and once per subscriber for
// a session's own list of a search-mode endpoint. ok is false when there are more
// distinct views than a rebuild compares.
func (r *Router) readViews(s *snapshot, subs []subscriber, kinds upstream.Kinds) (out *viewsRead, ok bool) {
	out = &viewsRead{shared: map[sharedKey]*viewLists{}, keys: make([]sharedKey, len(subs))}
	guarded := r.Guard() != nil
	for i := range subs {
		req := &subs[i].req
		key := sharedKey{endpoint: req.Endpoint}
		if guarded {
			key.class = principalClass(req)
		}
		out.keys[i] = key
		if _, seen := out.shared[key]; !seen {
			if len(out.shared) == maxComparedViews {
				return nil, false
			}
			lists := &viewLists{}
			for k, lk := range listKinds {
				if kinds&lk.kinds == 0 {
					continue
				}
				switch k {
				case 0:
					lists[k] = [][]json.RawMessage{s.view(r, req, listTools)}
				case 1:
					lists[k] = [][]json.RawMessage{s.view(r, req, listPrompts)}
				case 2:
					lists[k] = [][]json.RawMessage{s.view(r, req, listResources), s.view(r, req, listTemplates)}
				}
			}
			out.shared[key] = lists
		}
		if kinds&upstream.KindTools != 0 && req.Endpoint != "" && req.Active != nil {
			if v := s.viewOf(req); v.ep != nil && v.ep.Search {
				if items, personal := r.searchModeTools(s, req, v); personal {
					if out.personal == nil {
						out.personal = map[int][]json.RawMessage{}
					}
					out.personal[i] = items
				}
			}
		}
	}
	return out, true
}

// changedViews compares what each subscriber saw before with what it sees now, and
// records in ch the kinds of kinds whose list changed for it. Views shared by several
// subscribers are compared once.
func changedViews(ch *changeSet, subs []subscriber, before, after *viewsRead, kinds upstream.Kinds) {
	type pair struct{ before, after sharedKey }
	memo := map[pair]upstream.Kinds{}
	for i := range subs {
		pk := pair{before.keys[i], after.keys[i]}
		changed, done := memo[pk]
		if !done {
			b, a := before.shared[pk.before], after.shared[pk.after]
			for k, lk := range listKinds {
				if kinds&lk.kinds != 0 && !sameLists(b[k], a[k]) {
					changed |= lk.kinds
				}
			}
			memo[pk] = changed
		}
		_, pb := before.personal[i]
		_, pa := after.personal[i]
		if kinds&upstream.KindTools != 0 && (pb || pa) {
			changed &^= upstream.KindTools
			if !sameLists(before.tools(i), after.tools(i)) {
				changed |= upstream.KindTools
			}
		}
		if changed == 0 {
			continue
		}
		if ch.views == nil {
			ch.views, ch.viewers = map[any]upstream.Kinds{}, map[Client]bool{}
		}
		ch.views[subs[i].view.ID] |= changed
		ch.viewers[subs[i].client] = true
	}
}

// sameLists reports whether two reads of a view's list hold the same items, in order.
func sameLists(a, b [][]json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		if len(a[i]) > 0 && &a[i][0] == &b[i][0] {
			continue // the same cached view
		}
		for j := range a[i] {
			if !bytes.Equal(a[i][j], b[i][j]) {
				return false
			}
		}
	}
	return true
}

// notifyPending sends what ch records: the kinds every client is told of, the kinds
// that may have changed to the clients that are not Viewers, and to each Viewer's
// subscribers the kinds whose list changed for them. A client that unsubscribed since
// is told nothing.
func (r *Router) notifyPending(ch *changeSet) {
	for _, lk := range listKinds {
		if ch.all&lk.kinds != 0 {
			r.notifyChanged(lk.method, ch.seq)
			continue
		}
		for c, kinds := range ch.plain {
			if kinds&lk.kinds != 0 && r.subscribed(c) {
				c.Notify(lk.method, nil)
			}
		}
		for c := range ch.viewers {
			if !r.subscribed(c) {
				continue
			}
			c.(Viewer).NotifyChanged(lk.method, func(v View) bool { return ch.views[v.ID]&lk.kinds != 0 })
		}
	}
}

// subscribed reports whether c is subscribed now.
func (r *Router) subscribed(c Client) bool {
	r.clientsMu.Lock()
	defer r.clientsMu.Unlock()
	_, ok := r.clients[c]
	return ok
}
