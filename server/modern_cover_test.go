package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// modernReq is a modern (2026-07-28) request line; params are the fields besides _meta.
func modernReq(id, method, params, caps string) string {
	if params != "" {
		params += ","
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + params + modernMetaJSON(caps) + `}}`
}

// TestModernPrecheck: what every modern request must carry, and the error when it does
// not; a modern request needs no initialize.
func TestModernPrecheck(t *testing.T) {
	r := newMemRouter(t, newMemUpstream("u", "echo"))
	c := dialStdio(t, New(r, Options{}, testLog(t)))
	meta := func(fields string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` + fields + `}}}`
	}
	const v = `"io.modelcontextprotocol/protocolVersion":`
	const caps = `"io.modelcontextprotocol/clientCapabilities":`
	for _, tc := range []struct {
		name, line string
		code       int64
	}{
		{"discover without a version", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, jsonrpc.CodeInvalidParams},
		{"a legacy version", meta(v + `"2025-06-18",` + caps + `{}`), mcp.CodeUnsupportedVersion},
		{"an unknown version", meta(v + `"2030-01-01",` + caps + `{}`), mcp.CodeUnsupportedVersion},
		{"no capabilities", meta(v + `"2026-07-28"`), jsonrpc.CodeInvalidParams},
		{"capabilities not an object", meta(v + `"2026-07-28",` + caps + `"all"`), jsonrpc.CodeInvalidParams},
		{"malformed capabilities", meta(v + `"2026-07-28",` + caps + `{"sampling":5}`), jsonrpc.CodeInvalidParams},
		{"not a modern method", modernReq("1", "ping", "", `{}`), jsonrpc.CodeMethodNotFound},
		{"initialize is legacy", modernReq("1", "initialize", "", `{}`), jsonrpc.CodeMethodNotFound},
		{"listen without notifications", modernReq("1", "subscriptions/listen", "", `{}`), jsonrpc.CodeInvalidParams},
	} {
		if m := c.call(tc.line); m.code() != tc.code {
			t.Errorf("%s: %+v, want code %d", tc.name, m.Error, tc.code)
		} else if tc.code == mcp.CodeUnsupportedVersion && !strings.Contains(string(m.Error.Data), `"supported":["2026-07-28"`) {
			t.Errorf("%s: data %s does not list the supported versions", tc.name, m.Error.Data)
		}
	}
}

// TestModernResults: server/discover describes the merged upstreams without what modern
// clients cannot use; results say their type and cacheable ones carry caching hints;
// the legacy resource-not-found code becomes -32602.
func TestModernResults(t *testing.T) {
	u := newMemUpstream("u", "echo")
	u.info.Capabilities = json.RawMessage(`{"tools":{},"resources":{},"logging":{},"tasks":{"list":{}}}`)
	u.info.Instructions = "Hello."
	u.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"res://a","name":"a"}`), json.RawMessage(`{"uri":"res://gone","name":"g"}`)}
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		if uri, _, _ := jsonx.GetString(req.Params, "uri"); uri == "res://gone" {
			return jsonrpc.NewErrorResponse(jsonrpc.IntID(1), &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Message: "gone"}), nil
		}
		if req.Method == mcp.MethodResourcesRead {
			return result(`{"contents":[],"ttlMs":5}`)
		}
		return result(`{"content":[]}`)
	}
	r := newMemRouter(t, u)
	c := dialStdio(t, New(r, Options{Name: "px", Version: "2"}, testLog(t)))

	m := c.call(modernReq("1", "server/discover", "", `{}`))
	var d struct {
		ResultType        string
		SupportedVersions []string
		Capabilities      map[string]json.RawMessage
		Instructions      string
		Meta              map[string]struct{ Name string } `json:"_meta"`
	}
	if err := json.Unmarshal(m.Result, &d); err != nil || m.Error != nil {
		t.Fatalf("discover: %v %+v", err, m.Error)
	}
	if d.ResultType != "complete" || d.SupportedVersions[0] != mcp.ModernVersion || d.Meta[mcp.MetaServerInfo].Name != "px" ||
		!strings.Contains(d.Instructions, "Hello.") {
		t.Errorf("discover: %s", m.Result)
	}
	for _, k := range []string{"logging", "tasks"} {
		if _, ok := d.Capabilities[k]; ok {
			t.Errorf("discover offers %s to a modern client: %s", k, m.Result)
		}
	}
	if _, ok := d.Capabilities["tools"]; !ok {
		t.Errorf("discover lacks tools: %s", m.Result)
	}

	for _, tc := range []struct {
		name, line string
		want       []string
		not        string
		code       int64
	}{
		{"tools/list", modernReq("2", "tools/list", "", `{}`), []string{`"tools":[{"name":"u__echo"`, `"ttlMs":0`, `"cacheScope":"private"`, `"resultType":"complete"`}, "", 0},
		{"tools/call", modernReq("3", "tools/call", `"name":"u__echo"`, `{}`), []string{`"content":[]`, `"resultType":"complete"`}, "ttlMs", 0},
		{"resources/read keeps the upstream's hints", modernReq("4", "resources/read", `"uri":"res://a"`, `{}`), []string{`"ttlMs":5`, `"cacheScope":"private"`, `"resultType":"complete"`}, "", 0},
		{"resource not found", modernReq("5", "resources/read", `"uri":"res://gone"`, `{}`), nil, "", jsonrpc.CodeInvalidParams},
	} {
		m := c.call(tc.line)
		if m.code() != tc.code {
			t.Errorf("%s: %+v, want code %d", tc.name, m.Error, tc.code)
			continue
		}
		contains(t, tc.name, string(m.Result), tc.want...)
		if tc.not != "" && strings.Contains(string(m.Result), tc.not) {
			t.Errorf("%s: %s has %s", tc.name, m.Result, tc.not)
		}
	}
	// The upstreams were started for a modern client.
	u.mu.Lock()
	legacy, starts := u.legacy, u.starts
	u.mu.Unlock()
	if legacy || starts != 1 {
		t.Errorf("started %d times, legacy %v", starts, legacy)
	}
}

// TestModernResultAdapters pins the pure adapters of the modern era.
func TestModernResultAdapters(t *testing.T) {
	for _, tc := range []struct{ method, in, want string }{
		{"tools/call", `{"content":[]}`, `{"content":[],"resultType":"complete"}`},
		{"tools/call", `{"resultType":"input_required"}`, `{"resultType":"input_required"}`},
		{"tools/list", `{"tools":[]}`, `{"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{"tools/list", `{"tools":[],"resultType":"complete","ttlMs":9,"cacheScope":"public"}`, `{"tools":[],"resultType":"complete","ttlMs":9,"cacheScope":"public"}`},
		{"tools/call", `[1]`, `[1]`}, // not an object: left as it is
	} {
		if got := string(modernResult(tc.method, json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("modernResult(%s, %s) = %s, want %s", tc.method, tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{`{"inputRequests":{},"requestState":"s"}`, `{"inputRequests":{},"requestState":"s","resultType":"input_required"}`},
		{`{"inputRequests":{},"requestState":"s","resultType":"complete"}`, `{"inputRequests":{},"requestState":"s","resultType":"complete"}`},
		{`{"inputRequests":{}}`, `{"inputRequests":{}}`},
		{`{"requestState":"s"}`, `{"requestState":"s"}`},
	} {
		if got := string(markInputRequired(json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("markInputRequired(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	s := &Server{}
	bound := s.bindInputRequired("alice", json.RawMessage(`{"resultType":"input_required","requestState":"inner"}`))
	state, _, _ := jsonx.GetString(bound, "requestState")
	if inner, ok := s.unwrapState("alice", state); !ok || inner != "inner" {
		t.Errorf("bound state %q does not unwrap for its principal", state)
	}
	for _, res := range []string{`{"resultType":"complete","requestState":"inner"}`, `{"resultType":"input_required"}`} {
		if got := string(s.bindInputRequired("alice", json.RawMessage(res))); got != res {
			t.Errorf("bindInputRequired(%s) = %s", res, got)
		}
	}
	var notFound error = &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Message: "x"}
	if je := modernError(notFound).(*jsonrpc.Error); je.Code != jsonrpc.CodeInvalidParams || notFound.(*jsonrpc.Error).Code != mcp.CodeResourceNotFound {
		t.Errorf("modernError: %v (the original must stay as it was: %v)", je, notFound)
	}
	if other := jsonrpc.Errorf(-1, "x"); modernError(other) != error(other) {
		t.Errorf("modernError changed another error")
	}
}

// inputRequired is an input_required result as a modern client reads it.
type inputRequired struct {
	ResultType    string
	InputRequests map[string]struct {
		Method string
		Params json.RawMessage
	}
	RequestState string
}

func readInputRequired(t *testing.T, m wireMsg) inputRequired {
	t.Helper()
	var ir inputRequired
	if err := json.Unmarshal(m.Result, &ir); err != nil || m.Error != nil || ir.ResultType != mcp.ResultTypeInputRequired || ir.RequestState == "" {
		t.Fatalf("want input_required, got %+v %s", m.Error, m.Result)
	}
	return ir
}

// TestModernInputRounds: a legacy upstream's request for input during a modern call is
// turned into an input_required result whose requestState brings the retry back to the
// parked call; a state that was altered, used up, or given with another request is
// refused; what the client cannot do is refused without a round.
func TestModernInputRounds(t *testing.T) {
	proceed := make(chan struct{})
	parkedDone := make(chan json.RawMessage, 1)
	u := newMemUpstream("u", "ask", "other", "early", "sample")
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		name, _ := toolName(req.Params)
		switch name {
		case "ask", "sample":
			method := mcp.MethodElicitationCreate
			if name == "sample" {
				method = mcp.MethodSamplingCreateMessage
			}
			res, jerr := req.Input(ctx, method, json.RawMessage(`{"message":"name?"}`))
			if jerr != nil {
				return jsonrpc.NewErrorResponse(jsonrpc.IntID(1), jerr), nil
			}
			return result(`{"got":` + string(res) + `}`)
		case "early":
			// The call finishes while its input request is still parked.
			go func() {
				res, _ := req.Input(ctx, mcp.MethodElicitationCreate, json.RawMessage(`{}`))
				parkedDone <- res
			}()
			<-proceed
			return result(`{"early":true}`)
		}
		return result(`{}`)
	}
	r := newMemRouter(t, u)
	c := dialStdio(t, New(r, Options{}, testLog(t)))
	const caps = `{"elicitation":{}}`

	ir := readInputRequired(t, c.call(modernReq("1", "tools/call", `"name":"u__ask"`, caps)))
	in, ok := ir.InputRequests["input"]
	if !ok || in.Method != mcp.MethodElicitationCreate || string(in.Params) != `{"message":"name?"}` {
		t.Fatalf("input requests %+v", ir.InputRequests)
	}
	retry := func(id, name, state string) string {
		return modernReq(id, "tools/call", `"name":"`+name+`","requestState":"`+state+`","inputResponses":{"input":{"action":"accept"}}`, caps)
	}
	if m := c.call(retry("2", "u__other", ir.RequestState)); m.code() != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "different request") {
		t.Errorf("retry of another tool: %+v", m)
	}
	if m := c.call(retry("3", "u__ask", ir.RequestState+"x")); m.code() != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "not valid") {
		t.Errorf("altered state: %+v", m)
	}
	m := c.call(retry("4", "u__ask", ir.RequestState))
	if m.Error != nil || string(m.Result) != `{"got":{"action":"accept"},"resultType":"complete"}` {
		t.Errorf("retry: %+v %s", m.Error, m.Result)
	}
	if m := c.call(retry("5", "u__ask", ir.RequestState)); m.code() != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "no pending call") {
		t.Errorf("state used twice: %+v", m)
	}

	// The client cannot sample: the upstream is refused, no round.
	if m := c.call(modernReq("6", "tools/call", `"name":"u__sample"`, caps)); m.code() != jsonrpc.CodeMethodNotFound {
		t.Errorf("undeclared sampling: %+v %s", m.Error, m.Result)
	}

	// The upstream's result comes while its input request is parked: the retry gets it,
	// and the parked request gets the client's input.
	ir = readInputRequired(t, c.call(modernReq("7", "tools/call", `"name":"u__early"`, caps)))
	close(proceed)
	m = c.call(retry("8", "u__early", ir.RequestState))
	if m.Error != nil || string(m.Result) != `{"early":true,"resultType":"complete"}` {
		t.Errorf("early result: %+v %s", m.Error, m.Result)
	}
	if got := recv(t, parkedDone); string(got) != `{"action":"accept"}` {
		t.Errorf("the parked request got %s", got)
	}
}

// TestUpstreamInputState: an upstream's own input_required result reaches the client
// with its requestState bound to the client, and the retry reaches the upstream with
// the upstream's state restored.
func TestUpstreamInputState(t *testing.T) {
	u := newMemUpstream("u", "form")
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		switch st, _, _ := jsonx.GetString(req.Params, "requestState"); st {
		case "":
			// A legacy session of a dual-era server: no resultType.
			return result(`{"inputRequests":{"q":{"method":"roots/list"}},"requestState":"up-1"}`)
		case "up-1":
			return result(`{"done":"up-1"}`)
		}
		return result(`{"unexpected":true}`)
	}
	r := newMemRouter(t, u)
	c := dialStdio(t, New(r, Options{}, testLog(t)))
	ir := readInputRequired(t, c.call(modernReq("1", "tools/call", `"name":"u__form"`, `{}`)))
	if ir.RequestState == "up-1" || !strings.HasPrefix(ir.RequestState, wrappedPrefix) {
		t.Errorf("the upstream's state reached the client unbound: %q", ir.RequestState)
	}
	m := c.call(modernReq("2", "tools/call", `"name":"u__form","requestState":"`+ir.RequestState+`"`, `{}`))
	if m.Error != nil || !strings.Contains(string(m.Result), `"done":"up-1"`) {
		t.Errorf("retry: %+v %s", m.Error, m.Result)
	}
}

// TestListenOverStdio: a subscription is acknowledged with what the proxy honours, gets
// the notifications it asked for tagged with its id, and ends with notifications/cancelled,
// unsubscribing upstream.
func TestListenOverStdio(t *testing.T) {
	unsubscribed := make(chan string, 1)
	u := newMemUpstream("u", "x")
	u.info.Capabilities = json.RawMessage(`{"tools":{},"resources":{"subscribe":true}}`)
	u.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"res://a","name":"a"}`)}
	u.serve = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		if req.Method == mcp.MethodResourcesUnsubscribe {
			uri, _, _ := jsonx.GetString(req.Params, "uri")
			unsubscribed <- uri
		}
		return result(`{}`)
	}
	r := newMemRouter(t, u)
	c := dialStdio(t, New(r, Options{}, testLog(t)))

	c.send(modernReq(`"L"`, "subscriptions/listen",
		`"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["res://a","res://a"]}`, `{}`))
	ack := c.next()
	if ack.Method != mcp.NotificationSubscriptionsAcked {
		t.Fatalf("first message %+v, want the acknowledgement", ack)
	}
	var a struct {
		Meta          map[string]json.RawMessage `json:"_meta"`
		Notifications subscriptionFilter
	}
	if err := json.Unmarshal(ack.Params, &a); err != nil {
		t.Fatal(err)
	}
	want := subscriptionFilter{ToolsListChanged: true, ResourceSubscriptions: []string{"res://a"}}
	if string(a.Meta[mcp.MetaSubscriptionID]) != `"L"` || a.Notifications.ToolsListChanged != want.ToolsListChanged ||
		a.Notifications.PromptsListChanged || strings.Join(a.Notifications.ResourceSubscriptions, ",") != "res://a" {
		t.Errorf("acknowledged %s", ack.Params)
	}
	if got := u.requests(); len(got) != 1 || got[0] != mcp.MethodResourcesSubscribe {
		t.Errorf("upstream requests %v", got)
	}

	ev, who := r.Events(), bystander(t)
	ev.Notification(who, jsonrpc.NewNotification(mcp.NotificationResourcesUpdated, json.RawMessage(`{"uri":"res://other"}`)))
	ev.Notification(who, jsonrpc.NewNotification(mcp.NotificationResourcesUpdated, json.RawMessage(`{"uri":"res://a"}`)))
	if m := c.next(); m.Method != mcp.NotificationResourcesUpdated || !strings.Contains(string(m.Params), `"uri":"res://a"`) ||
		!strings.Contains(string(m.Params), `"io.modelcontextprotocol/subscriptionId":"L"`) {
		t.Errorf("update %+v %s", m, m.Params)
	}
	u.cat = &upstream.Catalogue{Tools: append(u.cat.Tools, json.RawMessage(`{"name":"y","inputSchema":{}}`)), Resources: u.cat.Resources}
	rebuild(t, r)
	if m := c.next(); m.Method != mcp.NotificationToolsListChanged || !strings.Contains(string(m.Params), `"io.modelcontextprotocol/subscriptionId":"L"`) {
		t.Errorf("list change %+v %s", m, m.Params)
	}

	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L"}}`)
	if uri := recv(t, unsubscribed); uri != "res://a" {
		t.Errorf("unsubscribed %q", uri)
	}
}
