package router

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// instances records the upstream instances a PerClient.New made, with the events each
// reports to.
type instances struct {
	mu     sync.Mutex
	ups    []*scriptUpstream
	events []upstream.Events
	caps   []string
	made   chan *scriptUpstream
	// prepare, when set, adjusts each new instance.
	prepare func(*scriptUpstream)
}

func newInstances() *instances { return &instances{made: make(chan *scriptUpstream, 16)} }

func (in *instances) new(caps json.RawMessage, ev upstream.Events) Upstream {
	in.mu.Lock()
	defer in.mu.Unlock()
	u := newScript("pc", "t")
	if in.prepare != nil {
		in.prepare(u)
	}
	in.ups = append(in.ups, u)
	in.events = append(in.events, ev)
	in.caps = append(in.caps, string(caps))
	in.made <- u
	return u
}

func (in *instances) count() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.ups)
}

func callAs(r *Router, sess Client, caps string) (json.RawMessage, error) {
	req := &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"pc__t"}`), Session: sess}
	if caps != "" {
		req.Meta = &ClientMeta{Capabilities: json.RawMessage(caps)}
	}
	return r.Call(context.Background(), req)
}

// TestPerClientInstances: each client session calls its own instance, made with its
// capabilities; requests without a session use the catalogue instance; Release closes
// the client's instance.
func TestPerClientInstances(t *testing.T) {
	noLeaks(t)
	cat := newScript("pc", "t")
	in := newInstances()
	r := New(Options{}, zerolog.Nop())
	r.AddPerClient(cat, "pc", PerClient{New: in.new})
	r.rebuild()
	r.Start(context.Background())
	defer r.Close()

	s1, s2 := newChanClient(), newChanClient()
	for _, tc := range []struct {
		sess      Client
		instances int
	}{{s1, 1}, {s1, 1}, {s2, 2}, {nil, 2}} {
		if _, err := callAs(r, tc.sess, `{"sampling":{}}`); err != nil {
			t.Fatal(err)
		}
		if in.count() != tc.instances {
			t.Errorf("after a call from %v: %d instances, want %d", tc.sess, in.count(), tc.instances)
		}
	}
	if cat.lastCall() == nil || len(cat.calls) != 1 {
		t.Errorf("the catalogue instance served %d calls, want the one without a session", len(cat.calls))
	}
	if in.ups[0].lastCall() == nil || in.caps[0] != `{"sampling":{}}` {
		t.Errorf("instance 1: call %v, caps %s", in.ups[0].lastCall(), in.caps[0])
	}
	if st := r.Upstreams(); !st[0].PerClient || st[0].Sessions != 2 {
		t.Errorf("Upstreams: %+v", st[0])
	}
	r.Release(s1)
	recvT(t, in.ups[0].closed)
	if in.ups[1].isClosed() {
		t.Error("another client's instance was closed")
	}
	r.Release(s1) // nothing left to release
	// The client's next call gets a fresh instance.
	if _, err := callAs(r, s1, `{}`); err != nil || in.count() != 3 {
		t.Errorf("after release: %v, %d instances", err, in.count())
	}
}

// TestPerClientCap: at the cap, the least recently used idle instance makes room; with
// every instance busy the call is refused; after Close no instance starts.
func TestPerClientCap(t *testing.T) {
	noLeaks(t)
	cat := newScript("pc", "t")
	in := newInstances()
	arrived := make(chan struct{}, 4)
	release := make(chan struct{})
	in.prepare = func(u *scriptUpstream) {
		u.reply = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
			if strings.Contains(string(req.Params), "block") {
				arrived <- struct{}{}
				<-release
			}
			return resultMsg(`{}`)
		}
	}
	r := New(Options{}, zerolog.Nop())
	r.AddPerClient(cat, "pc", PerClient{New: in.new, MaxSessions: 2})
	r.rebuild()
	r.Start(context.Background())

	s1, s2, s3 := newChanClient(), newChanClient(), newChanClient()
	callAs(r, s1, "")
	callAs(r, s2, "")
	callAs(r, s1, "") // s2's instance is now the least recently used
	if _, err := callAs(r, s3, ""); err != nil {
		t.Fatalf("a third client at the cap: %v", err)
	}
	recvT(t, in.ups[1].closed)
	if in.ups[0].isClosed() {
		t.Error("the recently used instance was evicted")
	}

	// Both instances busy: no room.
	var wg sync.WaitGroup
	for _, s := range []Client{s1, s3} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Call(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"pc__t","block":1}`), Session: s})
		}()
	}
	recvT(t, arrived)
	recvT(t, arrived)
	if _, err := callAs(r, s2, ""); rpcCode(err) != mcp.CodeUpstreamUnavailable || !strings.Contains(err.Error(), "maximum of 2") {
		t.Errorf("every instance busy: %v", err)
	}
	close(release)
	wg.Wait()

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, u := range in.ups {
		if !u.isClosed() {
			t.Error("an instance outlived Close")
		}
	}
	if _, err := callAs(r, newChanClient(), ""); rpcCode(err) != mcp.CodeUpstreamUnavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("after Close: %v", err)
	}
}

// TestPerClientIdleAndStarting: an instance without calls is closed after the idle
// timeout; a client's first call waits for its instance to start.
func TestPerClientIdleAndStarting(t *testing.T) {
	noLeaks(t)
	cat := newScript("pc", "t")
	in := newInstances()
	in.prepare = func(u *scriptUpstream) { u.state = upstream.StateStarting }
	r := New(Options{}, zerolog.Nop())
	r.AddPerClient(cat, "pc", PerClient{New: in.new, IdleTimeout: 20 * time.Millisecond})
	r.rebuild()
	r.Start(context.Background())
	defer r.Close()
	if res, err := callAs(r, newChanClient(), ""); err != nil || !strings.Contains(string(res), "ok from pc") {
		t.Fatalf("first call on a starting instance: %s %v", res, err)
	}
	recvT(t, in.ups[0].closed)
	if st := r.Upstreams(); st[0].Sessions != 0 {
		t.Errorf("%d sessions after the idle one closed", st[0].Sessions)
	}
}

// TestInstanceEvents: what an instance reports concerns its client only: notifications
// go to that client (list changes are the catalogue instance's to report), and its
// requests for input go to the request in flight there, or to the client.
func TestInstanceEvents(t *testing.T) {
	noLeaks(t)
	cat := newScript("pc", "t")
	in := newInstances()
	r := New(Options{}, zerolog.Nop())
	r.AddPerClient(cat, "pc", PerClient{New: in.new})
	r.rebuild()
	r.Start(context.Background())
	defer r.Close()
	mine, other := newChanClient(), newChanClient()
	r.Subscribe(other)
	mine.answer = func(method string, _ json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		return json.RawMessage(`{"client":"mine"}`), nil
	}
	callAs(r, mine, "")
	ev := in.events[0]
	who := idle("pc")

	ev.Notification(who, jsonrpc.NewNotification(mcp.NotificationToolsListChanged, nil))
	ev.Notification(who, jsonrpc.NewNotification(mcp.NotificationMessage, json.RawMessage(`{"level":"info","data":1}`)))
	if m := recvT(t, mine.notes); m != mcp.NotificationMessage {
		t.Errorf("the client got %s first", m)
	}
	if p := recvT(t, mine.params); !strings.Contains(string(p), `"logger":"pc"`) {
		t.Errorf("log message %s", p)
	}
	if len(other.notes) != 0 {
		t.Errorf("another client got the instance's notification")
	}
	ev.Notification(who, jsonrpc.NewNotification(mcp.NotificationTasksStatus, json.RawMessage(`{"taskId":"ti"}`)))
	recvT(t, mine.notes)
	if o, ok, err := r.tasks.store.Get(context.Background(), "ti"); err != nil || !ok {
		t.Errorf("task not recorded: %v %v", ok, err)
	} else if b, err := r.taskOwner("ti", o); err != nil || b.up != Upstream(in.ups[0]) {
		t.Errorf("the task is not the instance's: %+v %v", o, err)
	}

	ask := func(ev upstream.Events) (string, int64) {
		res, jerr := ev.Request(context.Background(), who, jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodRootsList, nil))
		if jerr != nil {
			return "", jerr.Code
		}
		return string(res), 0
	}
	if res, _ := ask(ev); res != `{"client":"mine"}` {
		t.Errorf("nothing in flight: %s", res)
	}
	r.testPools()[0].mu.Lock()
	inst := r.testPools()[0].byClient[poolKey{session: mine}]
	r.testPools()[0].mu.Unlock()
	call := &Request{Input: inputFrom("call"), Client: 1}
	inst.track(call)
	if res, _ := ask(ev); res != `{"from":"call","method":"roots/list"}` {
		t.Errorf("a call in flight: %s", res)
	}
	inst.untrack(call)
	if _, code := ask(&instanceEvents{p: r.testPools()[0], inst: &instance{}}); code != jsonrpc.CodeInternalError {
		t.Errorf("an instance of no client: %d", code)
	}
	ev.Changed(who, upstream.AllKinds) // not ready: nothing to re-apply
	if release := ev.Hold(); release != nil {
		release()
	}
}

// pools returns the per-client pools of r.
func (r *Router) testPools() []*clientPool {
	var out []*clientPool
	for _, b := range r.all() {
		if b.pool != nil {
			out = append(out, b.pool)
		}
	}
	return out
}

// TestCapabilitySessions: a shared legacy upstream gets one more session per distinct
// set of client capabilities, shared by every client with that set; the capabilities it
// was started with use the shared session; a modern upstream needs none.
func TestCapabilitySessions(t *testing.T) {
	noLeaks(t)
	shared := newScript("pc", "t")
	in := newInstances()
	r := New(Options{}, zerolog.Nop())
	r.Add(shared, "pc")
	r.SetCapabilitySessions("pc", PerClient{New: in.new})
	r.SetCapabilitySessions("nobody", PerClient{New: in.new})
	r.rebuild()
	r.SetClientCapabilities(json.RawMessage(`{"roots":{}}`))
	r.Start(context.Background())
	defer r.Close()

	for _, tc := range []struct {
		caps      string
		instances int
		shared    bool
	}{
		{`{"roots":{}}`, 0, true},
		{`{ "roots" : {} }`, 0, true},
		{`{"sampling":{}}`, 1, false},
		{`{"sampling":{},"experimental":{}}`, 1, false}, // the same set as far as the proxy relays
		{`{"elicitation":{}}`, 2, false},
	} {
		shared.calls = nil
		if _, err := callAs(r, newChanClient(), tc.caps); err != nil {
			t.Fatal(err)
		}
		if in.count() != tc.instances || (shared.lastCall() != nil) != tc.shared {
			t.Errorf("caps %s: %d instances, shared session called %v", tc.caps, in.count(), shared.lastCall() != nil)
		}
	}
	// The sessions serve every client with their capabilities: their notifications go to
	// every client, their requests to the one client there is.
	c := newChanClient()
	c.answer = func(string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		return json.RawMessage(`{"only":true}`), nil
	}
	r.Subscribe(c)
	ev := in.events[0]
	ev.Notification(idle("pc"), jsonrpc.NewNotification(mcp.NotificationResourcesUpdated, json.RawMessage(`{"uri":"x://y"}`)))
	if m := recvT(t, c.notes); m != mcp.NotificationResourcesUpdated {
		t.Errorf("broadcast %s", m)
	}
	if res, jerr := ev.Request(context.Background(), idle("pc"), jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodRootsList, nil)); jerr != nil || string(res) != `{"only":true}` {
		t.Errorf("request: %s %v", res, jerr)
	}

	shared.info.Modern = true
	shared.calls = nil
	if _, err := callAs(r, newChanClient(), `{"roots":{"listChanged":true}}`); err != nil || shared.lastCall() == nil || in.count() != 2 {
		t.Errorf("a modern upstream: %v, shared called %v, %d instances", err, shared.lastCall() != nil, in.count())
	}
}

// eraScript is a script upstream whose era follows SetPreferLegacy, as a child process
// that speaks both eras does (or that speaks only one).
type eraScript struct {
	*scriptUpstream
	speaks string // "both", "legacy" or "modern"
}

func (e *eraScript) Info() upstream.Info {
	e.mu.Lock()
	defer e.mu.Unlock()
	return upstream.Info{Modern: e.speaks == "modern" || (e.speaks == "both" && !e.legacy)}
}

// TestCapabilitySessionsByEra: with PerClient.Eras, legacy clients get a legacy session
// per set of capabilities (the catalogue session for the first client's), and modern
// clients share one modern session, whatever the first client was.
func TestCapabilitySessionsByEra(t *testing.T) {
	for _, speaks := range []string{"both", "legacy", "modern"} {
		t.Run(speaks, func(t *testing.T) {
			noLeaks(t)
			cat := &eraScript{newScript("pc", "t"), speaks}
			var mu sync.Mutex
			var made []*eraScript
			newEra := func(caps json.RawMessage, _ upstream.Events) Upstream {
				mu.Lock()
				defer mu.Unlock()
				u := &eraScript{newScript("pc", "t"), speaks}
				made = append(made, u)
				return u
			}
			r := New(Options{}, zerolog.Nop())
			r.Add(cat, "pc")
			r.SetCapabilitySessions("pc", PerClient{New: newEra, Eras: true})
			r.rebuild()
			r.SetClientCapabilities(json.RawMessage(`{}`))
			r.SetPreferLegacy(true) // the first client is legacy
			r.Start(context.Background())
			defer r.Close()

			call := func(modern bool, caps string) {
				t.Helper()
				req := &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"pc__t"}`), Session: newChanClient(),
					Meta: &ClientMeta{Capabilities: json.RawMessage(caps)}, Modern: modern}
				if _, err := r.Call(context.Background(), req); err != nil {
					t.Fatal(err)
				}
			}
			count := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(made)
			}
			call(false, `{}`) // the first client's own: the catalogue session
			call(false, `{"elicitation":{}}`)
			call(false, `{"elicitation":{}}`)
			call(true, `{"sampling":{}}`)
			call(true, `{"elicitation":{}}`)
			call(true, `{}`)
			want := map[string]int{
				"both":   2, // a legacy session for elicitation, one modern session for every modern client
				"legacy": 4, // a legacy session per set of capabilities, modern clients included
				"modern": 0, // every session would be modern: the catalogue serves all
			}[speaks]
			if speaks == "modern" {
				// The catalogue session is modern: modern clients use it; the legacy
				// client with other capabilities got one session, which came up
				// modern, and after that the upstream is known to speak only modern.
				want = 1
			}
			if n := count(); n != want {
				t.Errorf("%d sessions started, want %d", n, want)
			}
			mu.Lock()
			defer mu.Unlock()
			for i, u := range made {
				if speaks == "both" && i == 1 && u.legacy {
					t.Errorf("the session for modern clients was offered the legacy era")
				}
			}
		})
	}
}
