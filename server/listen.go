package server

import (
	"context"
	"encoding/json"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// listenSub is one modern subscriptions/listen: the kinds the client asked for and the
// proxy honoured. Its notifications carry the listen request's id as subscriptionId.
type listenSub struct {
	id                        jsonrpc.ID
	tools, prompts, resources bool
	uris                      map[string]bool
	notify                    func(method string, params json.RawMessage) // where its messages go
	principal                 *principal.Principal                        // who opened it: whose view of the lists it follows
}

type subscriptionFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// listen opens a subscription: it subscribes upstream to the requested resources,
// acknowledges with what it honours (the acknowledgement is the first message of the
// subscription), and then relays matching notifications until the client cancels it.
func (ss *session) listen(ctx context.Context, msg *jsonrpc.Message, rp replier) {
	reply := rp.reply
	var p struct {
		Notifications *subscriptionFilter `json:"notifications"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil || p.Notifications == nil {
		reply(jsonrpc.NewErrorResponse(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: notifications is required")))
		return
	}
	if !ss.track() {
		reply(nil)
		return
	}
	go func() {
		defer ss.wg.Done()
		ss.s.waitReady(ctx)
		var caps struct {
			Tools     *struct{} `json:"tools"`
			Prompts   *struct{} `json:"prompts"`
			Resources *struct {
				Subscribe bool `json:"subscribe"`
			} `json:"resources"`
		}
		_ = json.Unmarshal(ss.s.capabilities(), &caps)
		want := p.Notifications
		// Tagged with the id the client sent, whatever the session handles it under.
		l := &listenSub{id: rp.idOf(msg), uris: map[string]bool{}, notify: rp.notifier(ss), principal: principal.From(ctx)}
		l.tools = want.ToolsListChanged && caps.Tools != nil
		l.prompts = want.PromptsListChanged && caps.Prompts != nil
		l.resources = want.ResourcesListChanged && caps.Resources != nil
		honoured := subscriptionFilter{ToolsListChanged: l.tools, PromptsListChanged: l.prompts, ResourcesListChanged: l.resources}
		if caps.Resources != nil && caps.Resources.Subscribe {
			for _, uri := range want.ResourceSubscriptions {
				if l.uris[uri] {
					continue
				}
				if ss.resourceSubscription(ctx, mcp.MethodResourcesSubscribe, uri) {
					l.uris[uri] = true
					honoured.ResourceSubscriptions = append(honoured.ResourceSubscriptions, uri)
				}
			}
		}
		ss.mu.Lock()
		if ss.closed {
			ss.mu.Unlock()
			return
		}
		ss.listens[msg.ID.Key()] = l
		ss.refreshViewsLocked()
		if ss.unsubscribe == nil {
			ss.unsubscribe = ss.s.r.Subscribe(ss)
		}
		ss.mu.Unlock()
		ack, _ := jsonx.Marshal(map[string]any{
			"_meta":         map[string]json.RawMessage{mcp.MetaSubscriptionID: json.RawMessage(l.id.Raw())},
			"notifications": honoured,
		})
		l.notify(mcp.NotificationSubscriptionsAcked, ack)
		// The listen stays open without a response: on stdio the client ends it with
		// notifications/cancelled, after which nothing more is sent for it.
	}()
}

// resourceSubscription subscribes or unsubscribes the URI's owner; it reports success.
func (ss *session) resourceSubscription(ctx context.Context, method, uri string) bool {
	params, _ := jsonx.Marshal(map[string]string{"uri": uri})
	_, err := ss.s.r.Call(ctx, &router.Request{Method: method, Params: params, Principal: principal.From(ctx), Endpoint: ss.endpoint})
	if err != nil {
		ss.log.Warn().Err(err).Str("uri", uri).Str("method", method).Msg("resource subscription upstream failed")
		return false
	}
	return true
}

// endListen drops a subscription the client cancelled.
func (ss *session) endListen(key string) bool {
	ss.mu.Lock()
	l := ss.listens[key]
	delete(ss.listens, key)
	if l != nil {
		ss.refreshViewsLocked()
	}
	ss.mu.Unlock()
	if l == nil {
		return false
	}
	for uri := range l.uris {
		go ss.resourceSubscription(context.Background(), mcp.MethodResourcesUnsubscribe, uri)
	}
	return true
}

// notifyListens relays a proxy-level notification to the modern subscriptions that asked
// for its kind (and that only accepts, when not nil), tagged with each one's
// subscriptionId.
func (ss *session) notifyListens(method string, params json.RawMessage, only func(*listenSub) bool) {
	ss.mu.Lock()
	var targets []*listenSub
	for _, l := range ss.listens {
		if only != nil && !only(l) {
			continue
		}
		var match bool
		switch method {
		case mcp.NotificationToolsListChanged:
			match = l.tools
		case mcp.NotificationPromptsListChanged:
			match = l.prompts
		case mcp.NotificationResourcesListChanged:
			match = l.resources
		case mcp.NotificationResourcesUpdated:
			uri, _, _ := jsonx.GetString(params, "uri")
			match = l.uris[uri]
		}
		if match {
			targets = append(targets, l)
		}
	}
	ss.mu.Unlock()
	for _, l := range targets {
		p := params
		if len(p) == 0 {
			p = json.RawMessage("{}")
		}
		meta, _, _ := jsonx.Get(p, "_meta")
		meta, err := jsonx.Set(meta, mcp.MetaSubscriptionID, []byte(l.id.Raw()))
		if err != nil {
			continue
		}
		if p, err = jsonx.Set(p, "_meta", meta); err == nil {
			l.notify(method, p)
		}
	}
}
