package router

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// idle returns a real upstream that is never started: the router knows it (events from
// it are credited to its backend), but it is not running.
func idle(name string) *upstream.Upstream {
	return upstream.New(upstream.Spec{Name: name}, zerolog.Nop(), nil)
}

// inputFrom is an InputFunc that answers with who it is.
func inputFrom(who string) InputFunc {
	return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		return json.RawMessage(`{"from":"` + who + `","method":"` + method + `"}`), nil
	}
}

// TestServerRequestAttribution: an upstream's request for input goes to the one client
// with requests in flight there (a parked request does not count), to the one connected
// client when none is in flight, and is refused rather than guessed otherwise.
func TestServerRequestAttribution(t *testing.T) {
	u := idle("u")
	r := New(Options{}, zerolog.Nop())
	r.Add(u, "u")
	defer r.Close()
	b := r.backendOf(u)
	ask := func(from *upstream.Upstream) (string, int64) {
		res, jerr := r.Events().Request(context.Background(), from, jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodRootsList, nil))
		if jerr != nil {
			return "", jerr.Code
		}
		return string(res), 0
	}
	c1, c2 := newChanClient(), newChanClient()
	c1.answer = func(method string, _ json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		return json.RawMessage(`{"from":"subscribed"}`), nil
	}

	// No call in flight, no client: refused.
	if res, code := ask(u); code != jsonrpc.CodeInternalError {
		t.Errorf("no client: %s %d", res, code)
	}
	unsub1 := r.Subscribe(c1)
	if res, _ := ask(u); res != `{"from":"subscribed"}` {
		t.Errorf("one client, nothing in flight: %s", res)
	}
	if res, _ := ask(idle("stranger")); res != `{"from":"subscribed"}` {
		t.Errorf("an upstream the router does not know: %s", res)
	}
	unsub2 := r.Subscribe(c2)
	if _, code := ask(u); code != jsonrpc.CodeInternalError {
		t.Errorf("two clients, nothing in flight: %d", code)
	}
	unsub1()
	unsub2()

	track := func(req *Request) func() {
		b.track(req)
		return func() { b.untrack(req) }
	}
	done1 := track(&Request{Input: inputFrom("one"), Client: 1})
	done1b := track(&Request{Input: inputFrom("one"), Client: 1})
	if res, _ := ask(u); res != `{"from":"one","method":"roots/list"}` {
		t.Errorf("one client in flight: %s", res)
	}
	parked := true
	doneP := track(&Request{Input: inputFrom("parked"), Client: 2, Waiting: func() bool { return parked }})
	if res, _ := ask(u); res != `{"from":"one","method":"roots/list"}` {
		t.Errorf("with another client's call parked: %s", res)
	}
	parked = false
	if _, code := ask(u); code != jsonrpc.CodeInternalError {
		t.Errorf("two clients in flight: %d", code)
	}
	done1()
	done1b()
	doneP()
	if input, ok := b.inputFor(); input != nil || !ok {
		t.Errorf("after every call ended: input %v, ok %v", input != nil, ok)
	}
}

// TestUpstreamNotifications: an upstream's notifications reach every subscribed client,
// log messages naming the upstream, resource updates under the URI the client knows, and
// task status notifications teach the router the task's owner.
func TestUpstreamNotifications(t *testing.T) {
	a := newScript("a")
	a.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"file:///same","name":"s"}`)}
	b := newScript("b")
	b.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"file:///same","name":"s"}`)}
	u := idle("real")
	r := New(Options{}, zerolog.Nop())
	r.Add(a, "a")
	r.Add(b, "b")
	r.Add(u, "real")
	defer r.Close()
	r.rebuild()
	c := newChanClient()
	r.Subscribe(c)
	ev := r.Events()

	ev.Notification(u, jsonrpc.NewNotification(mcp.NotificationMessage, json.RawMessage(`{"level":"info","logger":"db","data":1}`)))
	if m, p := recvT(t, c.notes), recvT(t, c.params); m != mcp.NotificationMessage || !strings.Contains(string(p), `"logger":"real/db"`) {
		t.Errorf("log message %s %s", m, p)
	}
	ev.Notification(u, jsonrpc.NewNotification(mcp.NotificationMessage, json.RawMessage(`{"level":"info","data":1}`)))
	if _, p := recvT(t, c.notes), recvT(t, c.params); !strings.Contains(string(p), `"logger":"real"`) {
		t.Errorf("log message without a logger %s", p)
	}
	ev.Notification(u, jsonrpc.NewNotification(mcp.NotificationTasksStatus, json.RawMessage(`{"taskId":"tk","status":"working"}`)))
	recvT(t, c.notes)
	recvT(t, c.params)
	if o, ok, err := r.tasks.store.Get(context.Background(), "tk"); err != nil || !ok || o.Upstream != u.Name() {
		t.Errorf("task owner %+v %v %v", o, ok, err)
	} else if b, err := r.taskOwner("tk", o); err != nil || b.up != Upstream(u) {
		t.Errorf("task owner resolves to %v, %v", b, err)
	}

	// b's copy of the shared URI is exposed under a proxy URI; its updates say so.
	for _, tc := range []struct {
		owner int
		uri   string
		want  string
	}{
		{1, "file:///same", "mcp-proxy://b/file:%2F%2F%2Fsame"},
		{0, "file:///same", "file:///same"},
		{1, "file:///unlisted", "file:///unlisted"},
	} {
		m := jsonrpc.NewNotification(mcp.NotificationResourcesUpdated, json.RawMessage(`{"uri":"`+tc.uri+`"}`))
		got := r.adaptNotification(r.all()[tc.owner], r.all()[tc.owner].name, m)
		if want := `{"uri":"` + tc.want + `"}`; string(got) != want {
			t.Errorf("update of %s from %s: %s, want %s", tc.uri, r.all()[tc.owner].name, got, want)
		}
	}
}

// TestCorking: a burst from an upstream holds back every client worth corking; a burst
// from a client holds back every upstream.
func TestCorking(t *testing.T) {
	a, b := newScript("a"), newScript("b")
	r := newScriptRouter(t, Options{}, a, b)
	if release := r.Events().Hold(); release == nil {
		t.Fatal("Hold with no client")
	} else {
		release()
	}
	c, cl := newChanClient(), corklessClient{newChanClient()}
	r.Subscribe(c)
	r.Subscribe(cl)
	release := r.Events().Hold()
	if !recvT(t, c.corked) {
		t.Error("the client was not corked")
	}
	release()
	if recvT(t, c.corked) {
		t.Error("the client was not uncorked")
	}
	if len(cl.corked) != 0 {
		t.Error("a corkless client was corked")
	}

	uncork := r.CorkUpstreams()
	a.mu.Lock()
	held := a.corks == 1
	a.mu.Unlock()
	uncork()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !held || a.corks != 0 {
		t.Errorf("upstream corks: held %v, now %d", held, a.corks)
	}
}

// TestNotifyAll: a client's notification goes to every ready legacy upstream.
func TestNotifyAll(t *testing.T) {
	ready, modern, down := newScript("ready"), newScript("modern"), newScript("down")
	modern.info.Modern = true
	down.state = upstream.StateDown
	r := newScriptRouter(t, Options{}, ready, modern, down)
	r.NotifyAll(newChanClient(), mcp.NotificationRootsListChanged, nil)
	for _, tc := range []struct {
		u    *scriptUpstream
		want int
	}{{ready, 1}, {modern, 0}, {down, 0}} {
		if got := tc.u.notifications(); len(got) != tc.want {
			t.Errorf("%s got %v", tc.u.name, got)
		}
	}
}

// TestLifecycleWithFakes: Start starts every upstream (once per call) after telling them
// the client's capabilities and era; WaitReady settles; Close runs the hooks once the
// upstreams have stopped; ToolHeaders finds a tool's mirrored arguments.
func TestLifecycleWithFakes(t *testing.T) {
	a := newScript("a", "t")
	a.cat.ParamHeaders = map[string][]mcp.ParamHeader{"t": {{Path: []string{"r"}, Header: "Mcp-Param-R", Type: "string"}}}
	r := newScriptRouter(t, Options{}, a)
	r.SetClientCapabilities(json.RawMessage(`{"roots":{}}`))
	r.SetPreferLegacy(true)
	if r.Settled() {
		t.Error("settled before WaitReady")
	}
	r.Start(context.Background())
	if err := r.WaitReady(context.Background()); err != nil || !r.Settled() {
		t.Errorf("WaitReady: %v, settled %v", err, r.Settled())
	}
	if err := r.WaitReady(context.Background()); err != nil {
		t.Errorf("WaitReady again: %v", err)
	}
	a.mu.Lock()
	caps, legacy, started := string(a.caps), a.legacy, a.started
	a.mu.Unlock()
	if caps != `{"roots":{}}` || !legacy || started != 1 {
		t.Errorf("upstream told caps %s, legacy %v, started %d", caps, legacy, started)
	}
	if hs, ok := r.ToolHeaders("a__t"); !ok || len(hs) != 1 || hs[0].Header != "Mcp-Param-R" {
		t.Errorf("ToolHeaders: %v %v", hs, ok)
	}
	if _, ok := r.ToolHeaders("nope"); ok {
		t.Error("ToolHeaders of an unknown tool")
	}
	st := r.Upstreams()
	if len(st) != 1 || st[0].Name != "a" || st[0].Namespace != "a" || st[0].State != upstream.StateReady || st[0].PerClient {
		t.Errorf("Upstreams: %+v", st)
	}
	hooks := make(chan bool, 1)
	r.OnClose(func() { hooks <- a.isClosed() })
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if !recvT(t, hooks) {
		t.Error("the close hook ran before the upstream stopped")
	}
}
