package router

import (
	"context"
	"encoding/json"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Events adapts the router to upstream.Events; pass r.Events() to upstream.New.
func (r *Router) Events() upstream.Events { return (*events)(r) }

type events Router

var _ upstream.Events = (*events)(nil)

// Changed rebuilds the merged catalogue and schedules one list_changed per changed kind.
func (e *events) Changed(u *upstream.Upstream, kinds upstream.Kinds) {
	r := (*Router)(e)
	var announced upstream.Kinds
	if kinds != upstream.AllKinds {
		announced = kinds // the upstream said list_changed: pass it on even if the list looks the same
	}
	r.rebuildAnnounced(announced)
	if st, _ := u.State(); st == upstream.StateReady && kinds == upstream.AllKinds {
		r.reapplyLogLevel(u)
	}
}

// rebuild recomputes the snapshot and records which client-visible lists changed.
func (r *Router) rebuild() { r.rebuildWith(0, 0, nil) }

// rebuildAnnounced is rebuild for an upstream that announced list changes of the given
// kinds: those are notified even when the merged list comes out the same (it may have
// changed and changed back between two refreshes; a client that listed in between must
// look again).
func (r *Router) rebuildAnnounced(announced upstream.Kinds) { r.rebuildWith(announced, 0, nil) }

// rebuildWith rebuilds the snapshot. announced are kinds every client is told of (see
// rebuildAnnounced); maybe are kinds whose lists may have changed for some views though
// the merged lists did not (the guard or the endpoints changed); swap, when not nil,
// installs that change once the views before it have been read (when maybe says some
// may change: a swap that changes nobody's view is installed at once). The lists that
// changed are announced to the subscribers whose view of them changed (viewchange.go),
// after the notify delay, coalesced with the other changes of that delay.
func (r *Router) rebuildWith(announced, maybe upstream.Kinds, swap func()) {
	r.rebuildMu.Lock()
	defer r.rebuildMu.Unlock()
	old := r.snap.Load()
	var subs []subscriber
	var plain []Client
	var before *viewsRead
	compared, read := true, false
	if swap != nil {
		if maybe != 0 {
			// What each view was is read before the change: under the guard and with
			// the endpoints it was built with.
			if subs, plain = r.subscribers(); len(subs) > 0 {
				before, compared = r.readViews(old, subs, upstream.AllKinds)
			}
			read = true
		}
		swap()
	}
	s := build(r.all(), r.vetter, r.opts.Separator, r.opts.MaxNameLength, r.log)
	if r.presenter != nil {
		s.present(r.presenter, r)
	}
	s.eps = endpointViews(s, old, r.endpoints.Load(), r.opts.Ranker, r.Settled(), r.log)
	r.snap.Store(s)
	rawE := func(e *entry) json.RawMessage { return e.raw }
	rawR := func(x *resource) json.RawMessage { return x.raw }
	rawT := func(x *template) json.RawMessage { return x.raw }
	check := maybe
	if !equalLists(old.tools, s.tools, rawE) {
		check |= upstream.KindTools
	}
	if !equalLists(old.prompts, s.prompts, rawE) {
		check |= upstream.KindPrompts
	}
	if !equalLists(old.resources, s.resources, rawR) || !equalLists(old.templates, s.templates, rawT) {
		check |= upstream.KindResources | upstream.KindTemplates
	}
	if announced&upstream.KindTemplates != 0 {
		announced |= upstream.KindResources // one notification for both
	}
	check &^= announced
	if announced == 0 && check == 0 {
		return
	}
	p := &r.pending
	p.all |= announced
	if check != 0 {
		if !read { // no change of the guard or the endpoints comes between: the old views are as they were
			if subs, plain = r.subscribers(); len(subs) > 0 {
				before, compared = r.readViews(old, subs, check)
			}
		}
		var after *viewsRead
		if compared && len(subs) > 0 {
			after, compared = r.readViews(s, subs, check)
		}
		if !compared { // too many views to compare: tell every client of what may have changed
			p.all |= check
		} else {
			changedViews(p, subs, before, after, check)
			for _, c := range plain {
				if p.plain == nil {
					p.plain = map[Client]upstream.Kinds{}
				}
				p.plain[c] |= check
			}
		}
	}
	if p.all == 0 && len(p.views) == 0 && len(p.plain) == 0 {
		return // nothing changed for anyone
	}
	r.changeSeq++
	p.seq = r.changeSeq
	if r.timer == nil {
		r.timer = r.opts.Clock.AfterFunc(r.opts.NotifyDelay, r.flushNotifications)
	} else {
		r.timer.Reset(r.opts.NotifyDelay)
	}
}

// flushNotifications sends the coalesced list_changed notifications.
func (r *Router) flushNotifications() {
	r.rebuildMu.Lock()
	ch := r.pending
	r.pending = changeSet{}
	r.rebuildMu.Unlock()
	r.notifyPending(&ch)
}

// Notification relays an upstream notification to clients, naming the upstream in log
// messages and restoring rewritten URIs.
func (e *events) Notification(u *upstream.Upstream, m *jsonrpc.Message) {
	r := (*Router)(e)
	b := r.backendOf(u)
	if m.Method == mcp.NotificationTasksStatus && b != nil {
		r.recordTask(context.Background(), b, m.Params, "")
	}
	r.broadcast(m.Method, r.adaptNotification(b, u.Name(), m))
}

// adaptNotification returns the params of an upstream's notification as clients see
// them: log messages name the upstream, rewritten resource URIs are restored.
func (r *Router) adaptNotification(b *backend, name string, m *jsonrpc.Message) json.RawMessage {
	params := m.Params
	switch m.Method {
	case mcp.NotificationMessage:
		logger := name
		if l, ok, _ := jsonx.GetString(params, "logger"); ok && l != "" {
			logger += "/" + l
		}
		if p, err := jsonx.Set(params, "logger", jsonrpc.AppendString(nil, logger)); err == nil {
			params = p
		}
	case mcp.NotificationResourcesUpdated:
		if uri, ok, _ := jsonx.GetString(params, "uri"); ok && b != nil {
			if exp, ok := r.snap.Load().rewritten[ownerURI{b, uri}]; ok {
				if p, err := jsonx.Set(params, "uri", jsonrpc.AppendString(nil, exp)); err == nil {
					params = p
				}
			}
		}
	}
	return params
}

// Request relays a server-to-client request (sampling/createMessage, elicitation/create,
// roots/list) to the client it concerns and returns the client's answer. With one client
// session (stdio) that is the client; when several share the upstream and the request
// cannot be tied to one of them, it is refused with an error rather than guessed.
func (e *events) Request(ctx context.Context, u *upstream.Upstream, m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
	r := (*Router)(e)
	if b := r.backendOf(u); b != nil {
		input, ok := b.inputFor()
		if !ok {
			r.log.Warn().Str("upstream", u.Name()).Str("method", m.Method).
				Msg("server-to-client request while several clients have calls in flight on that upstream; refused")
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError,
				"mcp-proxy cannot tell which of its clients %s is for", m.Method)
		}
		if input != nil {
			return input(ctx, m.Method, m.Params)
		}
	}
	// No call in flight (roots/list after initialization, for example): the request is
	// for the one connected client, if there is exactly one.
	r.clientsMu.Lock()
	var target Client
	n := len(r.clients)
	for c := range r.clients {
		target = c
	}
	r.clientsMu.Unlock()
	if n != 1 {
		r.log.Warn().Str("upstream", u.Name()).Str("method", m.Method).Int("clients", n).
			Msg("server-to-client request cannot be tied to one client; refused")
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError,
			"mcp-proxy cannot tell which of its %d clients %s is for", n, m.Method)
	}
	return target.Request(ctx, m.Method, m.Params)
}

// Hold corks the clients while an upstream's reader handles a burst of responses.
func (e *events) Hold() (release func()) { return (*Router)(e).holdClients() }

func (r *Router) reapplyLogLevel(u *upstream.Upstream) {
	lvl := r.logLevel.Load()
	if lvl == nil || !u.Info().HasLogging() {
		return
	}
	params, _ := jsonx.Marshal(map[string]string{"level": *lvl})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), u.Timeout())
		defer cancel()
		if _, err := u.Call(ctx, &upstream.Request{Method: mcp.MethodLoggingSetLevel, Params: params}); err != nil {
			r.log.Debug().Err(err).Str("upstream", u.Name()).Msg("re-applying log level")
		}
	}()
}
