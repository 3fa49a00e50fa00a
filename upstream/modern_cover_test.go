package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// modernServer is a 2026-07-28 server: server/discover, hinted lists, tools that ask for
// input with input_required, and subscriptions that stay open.
func modernServer(refusals *atomic.Int32) script {
	return func(m *jsonrpc.Message) []string {
		if !m.IsRequest() {
			return nil
		}
		switch m.Method {
		case "server/discover":
			if refusals != nil && refusals.Add(-1) >= 0 {
				return []string{`{"jsonrpc":"2.0","id":` + m.ID.Raw() + `,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2099-01-01","2026-07-28"]}}}`}
			}
			return reply(m, `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"resources":{}},"instructions":"modern",`+
				`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"2"}}}`)
		case "tools/list":
			return reply(m, `{"tools":[{"name":"tagged","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}},`+
				`{"name":"invalid","inputSchema":{"type":"object","properties":{"o":{"type":"object","x-mcp-header":"O"}}}},`+
				`{"name":"ask","inputSchema":{}}],"ttlMs":5000,"cacheScope":"public"}`)
		case "resources/list":
			return reply(m, `{"resources":[],"ttlMs":-5}`)
		case "resources/templates/list":
			return reply(m, `{"resourceTemplates":[]}`)
		case "subscriptions/listen":
			return nil // open for the connection's life
		case "tools/call":
			name, _, _ := jsonx.GetString(m.Params, "name")
			state, _, _ := jsonx.GetString(m.Params, "requestState")
			switch {
			case name == "ask" && state == "s1":
				got, _, _ := jsonx.Get(m.Params, "inputResponses")
				return reply(m, `{"content":[],"got":`+string(got)+`}`)
			case name == "ask" || name == "loop":
				return reply(m, `{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"message":"?"}}},"requestState":"s1"}`)
			case name == "hang":
				return nil // answers only when its exchange ends
			case name == "malformed":
				return reply(m, `{"resultType":"input_required","inputRequests":5}`)
			}
			return reply(m, `{"content":[],"meta":`+string(mustGet(m.Params, "_meta"))+`}`)
		}
		return replyErr(m, jsonrpc.CodeMethodNotFound, "Method not found")
	}
}

func mustGet(raw json.RawMessage, key string) json.RawMessage {
	v, _, _ := jsonx.Get(raw, key)
	if v == nil {
		return json.RawMessage("null")
	}
	return v
}

// TestModernUpstream: a modern upstream is found by server/discover (retrying with a
// version from its -32022 list), every request carries the client's identity in _meta,
// lists keep their caching hints, and arguments a tool mirrors into headers are sent as
// Mcp-Param-* headers over HTTP.
func TestModernUpstream(t *testing.T) {
	var refusals atomic.Int32
	refusals.Store(1)
	ev := newRecEvents()
	u, err := startMem(t, Spec{ClientName: "px", ClientVersion: "1", ClientCapabilities: json.RawMessage(`{"roots":{}}`)}, ev,
		modernServer(&refusals), exchangeLink{newMemLink()})
	if err != nil {
		t.Fatal(err)
	}
	info := u.Info()
	if !info.Modern || info.ProtocolVersion != mcp.ModernVersion || info.Instructions != "modern" || !info.HasTools() ||
		!strings.Contains(string(info.ServerInfo), `"name":"m"`) {
		t.Errorf("info %+v", info)
	}
	cat := u.Catalogue()
	if cat.Hints.Tools != (CacheHint{TTLMs: 5000, Public: true}) || cat.Hints.Resources != (CacheHint{}) {
		t.Errorf("hints %+v", cat.Hints)
	}
	if len(cat.Tools) != 2 || len(cat.ParamHeaders["tagged"]) != 1 {
		t.Errorf("tools %d (the invalid one must be left out over HTTP), headers %v", len(cat.Tools), cat.ParamHeaders)
	}

	ctx := context.Background()
	res, err := u.Call(ctx, &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"tagged","arguments":{"region":"eu"}}`)})
	if err != nil || res.Error != nil {
		t.Fatalf("call: %v %v", err, res)
	}
	meta := mustGet(res.Result, "meta")
	for _, want := range []string{`"io.modelcontextprotocol/protocolVersion":"2026-07-28"`, `"io.modelcontextprotocol/clientCapabilities":{"roots":{}}`,
		`"io.modelcontextprotocol/clientInfo":{"name":"px","version":"1"}`} {
		if !strings.Contains(string(meta), want) {
			t.Errorf("_meta %s lacks %s", meta, want)
		}
	}
	u.link.mu.Lock()
	hdrs := u.link.headers
	u.link.mu.Unlock()
	if len(hdrs) == 0 || hdrs[len(hdrs)-1]["Mcp-Param-Region"] != "eu" {
		t.Errorf("headers %v", hdrs)
	}

	// logging/setLevel is not part of the modern era: the level is stamped on later
	// requests instead, and the upstream is not asked.
	if m, err := u.Call(ctx, &Request{Method: "logging/setLevel", Params: json.RawMessage(`{"level":"debug"}`)}); err != nil || m.Error != nil {
		t.Errorf("setLevel: %v %v", err, m)
	}
	res, _ = u.Call(ctx, &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"other"}`)})
	if !strings.Contains(string(res.Result), `"io.modelcontextprotocol/logLevel":"debug"`) {
		t.Errorf("level not stamped: %s", res.Result)
	}

	// Its notifications lose the tag of the proxy's own subscription.
	u.link.push(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"x://1","_meta":{"io.modelcontextprotocol/subscriptionId":7,"k":1}}}`)
	if m := recvT(t, ev.notes); string(m.Params) != `{"uri":"x://1","_meta":{"k":1}}` {
		t.Errorf("notification params %s", m.Params)
	}
}

// TestModernSubscriptions: the proxy's own list-change subscription asks for what the
// upstream has; resources/subscribe and unsubscribe become a subscription per resource
// and its cancellation.
func TestModernSubscriptions(t *testing.T) {
	u, err := startMem(t, Spec{Protocol: ProtocolModern}, nil, modernServer(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Its own subscription was opened as it became ready.
	if l := u.next(t, "subscriptions/listen"); string(mustGet(l.Params, "notifications")) != `{"resourcesListChanged":true,"toolsListChanged":true}` {
		t.Errorf("list-change subscription %s", l.Params)
	}
	ctx := context.Background()
	if m, err := u.Call(ctx, &Request{Method: "resources/subscribe", Params: json.RawMessage(`{"uri":"x://1"}`)}); err != nil || m.Error != nil {
		t.Fatalf("subscribe: %v %v", err, m)
	}
	l := u.next(t, "subscriptions/listen")
	if !strings.Contains(string(l.Params), `"resourceSubscriptions":["x://1"]`) {
		t.Errorf("resource subscription %s", l.Params)
	}
	u.Call(ctx, &Request{Method: "resources/unsubscribe", Params: json.RawMessage(`{"uri":"nothing://"}`)})
	u.Call(ctx, &Request{Method: "resources/unsubscribe", Params: json.RawMessage(`{"uri":"x://1"}`)})
	if c := u.next(t, "notifications/cancelled"); !strings.Contains(string(c.Params), `"requestId":`+l.ID.Raw()) {
		t.Errorf("unsubscribed with %s, want the cancellation of %s", c.Params, l.ID.Raw())
	}
	// An upstream without lists gets no subscription.
	c := &conn{u: u.Upstream}
	c.subscribe(Info{})
}

// TestModernInputPassThrough: a client that takes input_required results gets them as
// the upstream sent them.
func TestModernInputPassThrough(t *testing.T) {
	u, err := startMem(t, Spec{Protocol: ProtocolModern}, nil, modernServer(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := u.Call(context.Background(), &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"ask"}`), ClientHandlesInput: true})
	if err != nil || !strings.Contains(string(m.Result), `"resultType":"input_required"`) || !strings.Contains(string(m.Result), `"requestState":"s1"`) {
		t.Errorf("a modern client gets the round itself: %v %v", err, m)
	}
}

// TestModernInputForLegacyClients: for a client that cannot take input_required, the
// proxy asks the client itself and retries the call with the answers and the state;
// it gives up when it cannot ask, when the client refuses, or after too many rounds.
func TestModernInputForLegacyClients(t *testing.T) {
	u, err := startMem(t, Spec{Protocol: ProtocolModern}, nil, modernServer(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var asked atomic.Int32
	accept := func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		if asked.Add(1) > 2*maxInputRounds {
			return nil, jsonrpc.Errorf(-99, "the test stopped answering after %d rounds", 2*maxInputRounds)
		}
		if method != mcp.MethodElicitationCreate || string(params) != `{"message":"?"}` {
			return nil, jsonrpc.Errorf(-1, "unexpected %s %s", method, params)
		}
		return json.RawMessage(`{"action":"accept"}`), nil
	}
	call := func(name string, input func(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error), clientHandles bool) (*jsonrpc.Message, error) {
		return u.Call(ctx, &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"` + name + `"}`), Input: input, ClientHandlesInput: clientHandles})
	}

	m, err := call("ask", accept, false)
	if err != nil || string(m.Result) != `{"content":[],"got":{"a":{"action":"accept"}}}` || asked.Load() != 1 {
		t.Errorf("one round: %v %v, asked %d", err, m, asked.Load())
	}
	if _, err := call("ask", nil, false); proxyCode(err) != mcp.CodeUpstreamProtocol {
		t.Errorf("no way to ask: %v", err)
	}
	refuse := func(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		return nil, jsonrpc.Errorf(-7, "user declined")
	}
	if _, err := call("ask", refuse, false); proxyCode(err) != -7 {
		t.Errorf("the client refused: %v", err)
	}
	if _, err := call("malformed", accept, false); proxyCode(err) != mcp.CodeUpstreamProtocol {
		t.Errorf("a malformed round: %v", err)
	}
	asked.Store(0)
	_, err = call("loop", accept, false)
	if proxyCode(err) != mcp.CodeUpstreamProtocol || asked.Load() != maxInputRounds {
		t.Errorf("endless rounds: %v after %d rounds", err, asked.Load())
	}
	if errors.Is(err, ErrCancelled) {
		t.Error("the endless call was cancelled instead of refused")
	}
}

// TestDiscoverFallbacks: with protocol auto, a server that answers server/discover with
// anything but a usable result is spoken to with initialize; with protocol modern it is
// an error.
func TestDiscoverFallbacks(t *testing.T) {
	legacy := legacyServer(`{"tools":{}}`, nil, nil)
	for _, tc := range []struct {
		name     string
		discover string // the result of server/discover ("" for an error)
		proto    string
		modern   bool
		errText  string
	}{
		{"no modern version", `{"supportedVersions":["2099-01-01"]}`, ProtocolAuto, false, ""},
		{"not an object", `[]`, ProtocolAuto, false, ""},
		{"malformed capabilities", `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":1}}`, ProtocolAuto, false, ""},
		{"an error", "", ProtocolAuto, false, ""},
		{"modern only, refused", "", ProtocolModern, false, "no usable answer"},
		{"null capabilities", `{"supportedVersions":["2026-07-28"],"capabilities":null}`, ProtocolAuto, true, ""},
	} {
		srv := func(m *jsonrpc.Message) []string {
			if m.Method == "server/discover" {
				if tc.discover == "" {
					return []string{`{"jsonrpc":"2.0","id":` + m.ID.Raw() + `,"error":{"code":-32022,"message":"no","data":{"supported":["2025-11-25"]}}}`}
				}
				return reply(m, tc.discover)
			}
			return legacy(m)
		}
		u, err := startMem(t, Spec{Protocol: tc.proto}, nil, srv, nil)
		if tc.errText != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.errText)
			}
			continue
		}
		if err != nil || u.Info().Modern != tc.modern {
			t.Errorf("%s: %v, modern %v", tc.name, err, u.Info().Modern)
		}
	}
}

// TestRoundHook: each input round of a call for a legacy client is reported to the hook
// in the call's context, begun before the client is asked and ended with the retried
// request's outcome; the round's context is the one the client is asked with.
func TestRoundHook(t *testing.T) {
	u, err := startMem(t, Spec{Protocol: ProtocolModern}, nil, modernServer(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	type roundCtxKey struct{}
	var mu sync.Mutex
	var log []string
	hook := func(ctx context.Context, method string, round int) (context.Context, func(error)) {
		mu.Lock()
		log = append(log, fmt.Sprintf("start %s %d", method, round))
		mu.Unlock()
		return context.WithValue(ctx, roundCtxKey{}, round), func(err error) {
			mu.Lock()
			log = append(log, fmt.Sprintf("end %d %v", round, err))
			mu.Unlock()
		}
	}
	input := func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		if r, _ := ctx.Value(roundCtxKey{}).(int); r != 1 {
			return nil, jsonrpc.Errorf(-1, "asked outside the round's context (%v)", ctx.Value(roundCtxKey{}))
		}
		return json.RawMessage(`{"action":"accept"}`), nil
	}
	ctx := WithRoundHook(context.Background(), hook)
	m, err := u.Call(ctx, &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"ask"}`), Input: input})
	if err != nil || m.Error != nil {
		t.Fatalf("call: %v %v", err, m)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(log, "; "); got != "start tools/call 1; end 1 <nil>" {
		t.Errorf("rounds: %s", got)
	}
}

// TestModernHTTPCancelEndsTheExchange: over HTTP a 2026-07-28 request is cancelled by
// closing its answer stream, not with notifications/cancelled (which that era does not
// have on HTTP): a client's cancellation, a timeout and an unsubscription end the
// request's exchange and send nothing; over a pipe the notification is still the cancel.
func TestModernHTTPCancelEndsTheExchange(t *testing.T) {
	link := exchangeLink{newMemLink()}
	u, err := startMem(t, Spec{Protocol: ProtocolModern, Timeout: 300 * time.Millisecond}, nil, modernServer(nil), link)
	if err != nil {
		t.Fatal(err)
	}
	// expect is u.next, failing on any cancellation notification on the way.
	expect := func(method string) *jsonrpc.Message {
		t.Helper()
		for {
			m := recvT(t, u.seen)
			if m.Method == mcp.NotificationCancelled {
				t.Errorf("a notifications/cancelled went to a modern HTTP upstream: %s", m.Params)
			}
			if m.Method == method {
				return m
			}
		}
	}
	expect("subscriptions/listen") // its own, opened as it became ready

	var cancel Canceller
	ch := u.sendAsync(context.Background(), &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"hang"}`), Cancel: &cancel, Timeout: time.Minute})
	sent := expect("tools/call")
	cancel.Cancel()
	if r := recvT(t, ch); !errors.Is(r.err, ErrCancelled) {
		t.Errorf("cancelled call: %v", r.err)
	}
	if id := recvT(t, link.aborted); id != sent.ID.Raw() {
		t.Errorf("aborted the exchange of %s, want %s", id, sent.ID.Raw())
	}

	ctx, stop := context.WithCancel(context.Background())
	ch = u.sendAsync(ctx, &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"hang"}`), Timeout: time.Minute})
	sent = expect("tools/call")
	stop()
	if r := recvT(t, ch); !errors.Is(r.err, context.Canceled) {
		t.Errorf("call whose context ended: %v", r.err)
	}
	if id := recvT(t, link.aborted); id != sent.ID.Raw() {
		t.Errorf("aborted the exchange of %s, want %s", id, sent.ID.Raw())
	}

	ch = u.sendAsync(context.Background(), &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"hang"}`)})
	sent = expect("tools/call")
	if r := recvT(t, ch); proxyCode(r.err) != mcp.CodeUpstreamTimeout {
		t.Errorf("call past its timeout: %v", r.err)
	}
	if id := recvT(t, link.aborted); id != sent.ID.Raw() {
		t.Errorf("aborted the exchange of %s, want %s", id, sent.ID.Raw())
	}

	if m, err := u.Call(context.Background(), &Request{Method: "resources/subscribe", Params: json.RawMessage(`{"uri":"x://1"}`)}); err != nil || m.Error != nil {
		t.Fatalf("subscribe: %v %v", err, m)
	}
	l := expect("subscriptions/listen")
	u.Call(context.Background(), &Request{Method: "resources/unsubscribe", Params: json.RawMessage(`{"uri":"x://1"}`)})
	if id := recvT(t, link.aborted); id != l.ID.Raw() {
		t.Errorf("unsubscribing aborted %s, want the listen %s", id, l.ID.Raw())
	}

	// Everything the server received up to a last call: no cancellation notification.
	u.Call(context.Background(), &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"last"}`)})
	for !strings.Contains(string(expect("tools/call").Params), `"last"`) {
	}
}
