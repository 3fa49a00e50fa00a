package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// These tests drive a real Upstream (supervisor, handshake, catalogue, restarts, timeouts)
// over transport.Pipe: Spec.Dial hands each start attempt a fresh in-memory link, and the
// test plays the server on its other end, one message at a time.

// pipeWait bounds every wait; reached only when something is broken.
const pipeWait = 10 * time.Second

// piped is an Upstream whose every start dials a transport.Pipe.
type piped struct {
	t       *testing.T
	u       *Upstream
	obs     recorder                  // the upstream's observer events
	ev      *pipeEvents               // what the upstream reports through Events
	servers chan *transport.MemServer // the server end of each dialled link
	pumps   chan *pipeEnd             // every server end a test took, to check at the end
	logs    *lockedBuffer
}

// newPiped returns an upstream on spec, not started, whose Dial opens pipes; unset
// fields get test values (tiny backoff, short stop grace). It is closed when the test
// ends, and the test fails if a server end is still being read then.
func newPiped(t *testing.T, spec Spec) *piped {
	t.Helper()
	h := &piped{
		t:       t,
		obs:     make(recorder, 1024),
		ev:      &pipeEvents{changed: make(chan Kinds, 256), notes: make(chan *jsonrpc.Message, 256), holds: make(chan string, 256)},
		servers: make(chan *transport.MemServer, 16),
		pumps:   make(chan *pipeEnd, 16),
		logs:    &lockedBuffer{},
	}
	if spec.Name == "" {
		spec.Name = "piped"
	}
	if spec.BackoffMin == 0 {
		spec.BackoffMin, spec.BackoffMax = time.Millisecond, time.Millisecond
	}
	if spec.StopGrace == 0 {
		spec.StopGrace = 50 * time.Millisecond
	}
	spec.ClientName, spec.ClientVersion = "test", "1"
	spec.Observer = h.obs
	spec.Dial = func(ctx context.Context) (transport.Link, error) {
		link, srv := transport.Pipe(spec.MaxMessage)
		select {
		case h.servers <- srv:
			return link, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	h.u = New(spec, zerolog.New(h.logs), h.ev)
	t.Cleanup(func() {
		h.u.Close()
		for {
			select {
			case e := <-h.pumps:
				select {
				case <-e.ended:
				case <-time.After(pipeWait):
					t.Errorf("a server end is still read after Close")
				}
				continue
			default:
			}
			break
		}
		if t.Failed() {
			t.Logf("upstream log:\n%s", h.logs)
		}
	})
	return h
}

// start starts the upstream.
func (h *piped) start() *piped {
	h.u.Start(context.Background())
	return h
}

// accept returns the server end of the next link the upstream dials, with everything the
// proxy writes to it queued for expect.
func (h *piped) accept() *pipeEnd {
	h.t.Helper()
	select {
	case srv := <-h.servers:
		e := &pipeEnd{MemServer: srv, t: h.t, in: make(chan *jsonrpc.Message, 1024), ended: make(chan struct{})}
		h.pumps <- e
		go e.pump()
		return e
	case <-time.After(pipeWait):
		h.t.Fatal("the upstream dialled no link")
	}
	return nil
}

// await returns the next observer event of kind, skipping others.
func (h *piped) await(kind EventKind) Event {
	h.t.Helper()
	deadline := time.After(pipeWait)
	for {
		select {
		case e := <-h.obs:
			if e.Kind == kind {
				return e
			}
		case <-deadline:
			h.t.Fatalf("no %v event", kind)
		}
	}
}

// send sends req and returns where its outcome arrives.
func (h *piped) send(ctx context.Context, req *Request) <-chan callResult {
	ch := make(chan callResult, 1)
	h.u.Send(ctx, req, func(m *jsonrpc.Message, err error) { ch <- callResult{m, err} })
	return ch
}

// result waits for a call's outcome.
func (h *piped) result(ch <-chan callResult) callResult {
	h.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(pipeWait):
		h.t.Fatal("the call did not complete")
	}
	return callResult{}
}

// pipeEnd is the test's side of one link: the server.
type pipeEnd struct {
	*transport.MemServer
	t     *testing.T
	in    chan *jsonrpc.Message // what the proxy wrote; closed when its input ends
	ended chan struct{}         // closed when pump has returned
}

// pump reads what the proxy writes until the input ends, then exits as a server does at
// EOF on stdin.
func (e *pipeEnd) pump() {
	defer close(e.ended)
	defer close(e.in)
	for {
		m, err := e.Read()
		if err != nil {
			e.Close()
			return
		}
		e.in <- m
	}
}

// expect returns the next message the proxy wrote, failing unless it has method ("" for
// a response).
func (e *pipeEnd) expect(method string) *jsonrpc.Message {
	e.t.Helper()
	select {
	case m, ok := <-e.in:
		if !ok {
			e.t.Fatalf("the server's input ended; want %q", method)
		}
		if m.Method != method {
			e.t.Fatalf("the server received %s; want %q", m, method)
		}
		return m
	case <-time.After(pipeWait):
		e.t.Fatalf("the server received nothing; want %q", method)
	}
	return nil
}

// expectEnd fails unless the proxy writes nothing more before closing the server's input.
func (e *pipeEnd) expectEnd() {
	e.t.Helper()
	select {
	case m, ok := <-e.in:
		if ok {
			e.t.Fatalf("the server received %s; want the end of its input", m)
		}
	case <-time.After(pipeWait):
		e.t.Fatal("the server's input did not end")
	}
}

// answer sends the result of request m.
func (e *pipeEnd) answer(m *jsonrpc.Message, result string) {
	e.t.Helper()
	if err := e.Write(jsonrpc.NewResult(m.ID, json.RawMessage(result))); err != nil {
		e.t.Fatalf("answering %s: %v", m.Method, err)
	}
}

// refuse sends an error response to request m.
func (e *pipeEnd) refuse(m *jsonrpc.Message, code int64, msg string) {
	e.t.Helper()
	if err := e.Write(jsonrpc.NewErrorResponse(m.ID, &jsonrpc.Error{Code: code, Message: msg})); err != nil {
		e.t.Fatalf("refusing %s: %v", m.Method, err)
	}
}

// say writes raw lines (notifications, requests) to the proxy.
func (e *pipeEnd) say(lines string) {
	e.t.Helper()
	if err := e.WriteLine([]byte(lines)); err != nil {
		e.t.Fatalf("saying %s: %v", lines, err)
	}
}

// legacy plays a legacy server's side of the handshake of an upstream configured as
// protocol "legacy", declaring caps; lists are left to the test.
func (e *pipeEnd) legacy(caps string) {
	e.t.Helper()
	m := e.expect(mcp.MethodInitialize)
	e.answer(m, `{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"serverInfo":{"name":"pipe","version":"1"}}`)
	e.expect(mcp.NotificationInitialized)
}

// pipeEvents is the Events of a piped upstream: it hands what it is told to the test and
// answers server-to-client requests with request (refuses them when nil).
type pipeEvents struct {
	changed chan Kinds
	notes   chan *jsonrpc.Message
	holds   chan string // "hold", then "release"
	request func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error)
}

var _ Events = (*pipeEvents)(nil)

func (p *pipeEvents) Changed(_ *Upstream, k Kinds)                 { p.changed <- k }
func (p *pipeEvents) Notification(_ *Upstream, m *jsonrpc.Message) { p.notes <- m }
func (p *pipeEvents) Hold() func() {
	p.holds <- "hold"
	return func() { p.holds <- "release" }
}
func (p *pipeEvents) Request(ctx context.Context, _ *Upstream, m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
	if p.request == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "no client")
	}
	return p.request(ctx, m)
}

// nextChange returns the next kinds reported as changed.
func (p *pipeEvents) nextChange(t *testing.T) Kinds {
	t.Helper()
	select {
	case k := <-p.changed:
		return k
	case <-time.After(pipeWait):
		t.Fatal("no change reported")
	}
	return 0
}

// pipeCode is the code of a *jsonrpc.Error, 0 for another error.
func pipeCode(err error) int64 {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Code
	}
	return 0
}

// pipeField returns the raw JSON at the path of keys in raw ("" when absent).
func pipeField(t *testing.T, raw json.RawMessage, keys ...string) string {
	t.Helper()
	for _, k := range keys {
		v, ok, err := jsonx.Get(raw, k)
		if err != nil || !ok {
			return ""
		}
		raw = v
	}
	return string(raw)
}

// TestPipeLegacyHandshakeAndPagedCatalogue: an upstream with protocol "auto" probes
// server/discover; refused, it falls back to initialize, sends initialized, and fetches
// every list the server declares, following nextCursor.
func TestPipeLegacyHandshakeAndPagedCatalogue(t *testing.T) {
	h := newPiped(t, Spec{Protocol: ProtocolAuto}).start()
	if e := h.await(EventStarting); e.Upstream != "piped" {
		t.Errorf("starting event for %q", e.Upstream)
	}
	srv := h.accept()

	srv.refuse(srv.expect(mcp.MethodServerDiscover), jsonrpc.CodeMethodNotFound, "Method not found")
	m := srv.expect(mcp.MethodInitialize)
	if v := pipeField(t, m.Params, "protocolVersion"); v != `"`+mcp.LatestLegacyVersion+`"` {
		t.Errorf("initialize offered version %s", v)
	}
	if ci := pipeField(t, m.Params, "clientInfo"); ci != `{"name":"test","version":"1"}` {
		t.Errorf("initialize clientInfo %s", ci)
	}
	srv.answer(m, `{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"prompts":{},"resources":{}},"serverInfo":{"name":"pipe","version":"2"},"instructions":"be nice"}`)
	srv.expect(mcp.NotificationInitialized)

	m = srv.expect(mcp.MethodToolsList)
	if len(m.Params) != 0 {
		t.Errorf("first page asked with params %s", m.Params)
	}
	srv.answer(m, `{"tools":[{"name":"a"}],"nextCursor":"page-2"}`)
	m = srv.expect(mcp.MethodToolsList)
	if c := pipeField(t, m.Params, "cursor"); c != `"page-2"` {
		t.Errorf("second page asked with cursor %s", c)
	}
	srv.answer(m, `{"tools":[{"name":"b"}]}`)
	srv.answer(srv.expect(mcp.MethodPromptsList), `{"prompts":[{"name":"p"}]}`)
	srv.answer(srv.expect(mcp.MethodResourcesList), `{"resources":[{"uri":"file:///r"}]}`)
	srv.answer(srv.expect(mcp.MethodResourcesTemplatesList), `{"resourceTemplates":[{"uriTemplate":"file:///{x}"}]}`)

	e := h.await(EventReady)
	if e.Info.Modern || e.Info.ProtocolVersion != "2025-06-18" || e.Info.Instructions != "be nice" || e.Duration <= 0 {
		t.Errorf("ready with %+v after %s", e.Info, e.Duration)
	}
	if k := h.ev.nextChange(t); k != AllKinds {
		t.Errorf("changed %b; want all kinds", k)
	}
	if err := h.u.WaitFirstAttempt(context.Background()); err != nil {
		t.Fatal(err)
	}
	cat := h.u.Catalogue()
	got := []string{}
	for _, l := range [][]json.RawMessage{cat.Tools, cat.Prompts, cat.Resources, cat.Templates} {
		for _, it := range l {
			got = append(got, string(it))
		}
	}
	want := `{"name":"a"} {"name":"b"} {"name":"p"} {"uri":"file:///r"} {"uriTemplate":"file:///{x}"}`
	if strings.Join(got, " ") != want {
		t.Errorf("catalogue %s; want %s", strings.Join(got, " "), want)
	}
	if st, _ := h.u.State(); st != StateReady {
		t.Errorf("state %v", st)
	}
}

// TestPipeModernDiscover: a modern server answers the server/discover probe; every later
// request carries the era's _meta, and the upstream subscribes to list changes.
func TestPipeModernDiscover(t *testing.T) {
	h := newPiped(t, Spec{Protocol: ProtocolAuto}).start()
	srv := h.accept()
	m := srv.expect(mcp.MethodServerDiscover)
	if v := pipeField(t, m.Params, "_meta", mcp.MetaProtocolVersion); v != `"`+mcp.ModernVersion+`"` {
		t.Errorf("probe stamped with version %s", v)
	}
	srv.answer(m, `{"supportedVersions":["`+mcp.ModernVersion+`"],"capabilities":{"tools":{"listChanged":true}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"pipe"}}}`)
	m = srv.expect(mcp.MethodToolsList)
	if v := pipeField(t, m.Params, "_meta", mcp.MetaProtocolVersion); v != `"`+mcp.ModernVersion+`"` {
		t.Errorf("tools/list stamped with version %s", v)
	}
	if ci := pipeField(t, m.Params, "_meta", mcp.MetaClientInfo); ci != `{"name":"test","version":"1"}` {
		t.Errorf("tools/list stamped with client info %s", ci)
	}
	srv.answer(m, `{"tools":[{"name":"a"}],"ttlMs":5000,"cacheScope":"public"}`)

	e := h.await(EventReady)
	if !e.Info.Modern || e.Info.ProtocolVersion != mcp.ModernVersion || string(e.Info.ServerInfo) != `{"name":"pipe"}` {
		t.Errorf("ready with %+v", e.Info)
	}
	if hint := h.u.Catalogue().Hints.Tools; hint.TTLMs != 5000 || !hint.Public {
		t.Errorf("tools cache hint %+v", hint)
	}
	m = srv.expect(mcp.MethodSubscriptionsListen)
	if v := pipeField(t, m.Params, "notifications", "toolsListChanged"); v != "true" {
		t.Errorf("subscription %s", m.Params)
	}
	h.ev.nextChange(t) // ready

	// The subscription carries a list change: the tools are fetched again.
	srv.say(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"` + m.ID.String() + `"}}}`)
	srv.answer(srv.expect(mcp.MethodToolsList), `{"tools":[{"name":"a"},{"name":"b"}]}`)
	if k := h.ev.nextChange(t); k != KindTools {
		t.Errorf("changed %b after tools/list_changed; want tools", k)
	}
	if n := len(h.u.Catalogue().Tools); n != 2 {
		t.Errorf("%d tools after the refresh; want 2", n)
	}
}

// TestPipePreferLegacyOffersInitializeFirst: for a legacy client, a dialled upstream with
// protocol "auto" is offered initialize first, as a child process is.
func TestPipePreferLegacyOffersInitializeFirst(t *testing.T) {
	h := newPiped(t, Spec{Protocol: ProtocolAuto})
	h.u.SetPreferLegacy(true)
	h.start()
	srv := h.accept()
	srv.legacy(`{}`)
	if e := h.await(EventReady); e.Info.Modern {
		t.Errorf("ready as modern")
	}
}

// TestPipeListChangedRefresh: list_changed notifications of a legacy server re-fetch just
// the lists they name, and Changed reports just those kinds.
func TestPipeListChangedRefresh(t *testing.T) {
	h := newPiped(t, Spec{Protocol: ProtocolLegacy}).start()
	srv := h.accept()
	srv.legacy(`{"tools":{"listChanged":true},"prompts":{},"resources":{}}`)
	srv.answer(srv.expect(mcp.MethodToolsList), `{"tools":[{"name":"a"}]}`)
	srv.answer(srv.expect(mcp.MethodPromptsList), `{"prompts":[{"name":"p"}]}`)
	srv.answer(srv.expect(mcp.MethodResourcesList), `{"resources":[]}`)
	srv.answer(srv.expect(mcp.MethodResourcesTemplatesList), `{"resourceTemplates":[]}`)
	h.await(EventReady)
	h.ev.nextChange(t)

	srv.say(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	srv.answer(srv.expect(mcp.MethodToolsList), `{"tools":[{"name":"a"},{"name":"b"}]}`)
	if k := h.ev.nextChange(t); k != KindTools {
		t.Errorf("changed %b; want tools", k)
	}
	srv.say(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`)
	srv.answer(srv.expect(mcp.MethodResourcesList), `{"resources":[{"uri":"file:///new"}]}`)
	srv.answer(srv.expect(mcp.MethodResourcesTemplatesList), `{"resourceTemplates":[]}`)
	if k := h.ev.nextChange(t); k != KindResources|KindTemplates {
		t.Errorf("changed %b; want resources and templates", k)
	}
	cat := h.u.Catalogue()
	if len(cat.Tools) != 2 || len(cat.Prompts) != 1 || len(cat.Resources) != 1 {
		t.Errorf("catalogue after refreshes: %d tools, %d prompts, %d resources; want 2, 1, 1",
			len(cat.Tools), len(cat.Prompts), len(cat.Resources))
	}
	// Other notifications go to Events.
	srv.say(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`)
	select {
	case n := <-h.ev.notes:
		if n.Method != mcp.NotificationMessage || pipeField(t, n.Params, "data") != `"hi"` {
			t.Errorf("notification %s", n)
		}
	case <-time.After(pipeWait):
		t.Fatal("the log message was not relayed")
	}
}

// TestPipeCloseStopsLink: Close fails calls in flight as unavailable, closes the server's
// input (a server exiting at EOF stops at once) and reports the stop.
func TestPipeCloseStopsLink(t *testing.T) {
	h := newPiped(t, Spec{Protocol: ProtocolLegacy, StopGrace: time.Hour}).start()
	srv := h.accept()
	srv.legacy(`{}`)
	h.await(EventReady)
	ch := h.send(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{}`)})
	srv.expect(mcp.MethodToolsCall)
	if err := h.u.Close(); err != nil {
		t.Fatal(err)
	}
	if r := h.result(ch); !errors.Is(r.err, ErrUnavailable) {
		t.Errorf("call in flight at Close: %v", r.err)
	}
	srv.expectEnd()
	h.await(EventStopped)
	if st, _ := h.u.State(); st != StateStopped {
		t.Errorf("state after Close: %v", st)
	}
}

// TestPipeProbeUnansweredRedials: a server that reads the server/discover probe and says
// nothing gets nothing more on that link; a new link is dialled and offered initialize
// first.
func TestPipeProbeUnansweredRedials(t *testing.T) {
	h := newPiped(t, Spec{Protocol: ProtocolAuto})
	h.u.probeTimeout = 20 * time.Millisecond
	h.start()
	srv := h.accept()
	srv.expect(mcp.MethodServerDiscover) // read, not answered
	srv.expectEnd()
	srv2 := h.accept()
	srv2.legacy(`{}`)
	if e := h.await(EventReady); e.Info.Modern {
		t.Error("ready as modern")
	}
	if !h.u.probeUnanswered.Load() {
		t.Error("the unanswered probe is not remembered for later starts")
	}
}

// TestPipeProbeWaitsForUnreadProbe: a server that has not read the probe yet (still
// starting) has not left it unanswered: its late answer is used on the same link.
func TestPipeProbeWaitsForUnreadProbe(t *testing.T) {
	h := newPiped(t, Spec{Protocol: ProtocolAuto})
	h.u.probeTimeout = 20 * time.Millisecond
	h.start()
	var raw *transport.MemServer
	select {
	case raw = <-h.servers:
	case <-time.After(pipeWait):
		t.Fatal("nothing dialled")
	}
	time.Sleep(200 * time.Millisecond) // starting slowly, many probe timeouts long
	h.servers <- raw
	srv := h.accept()
	m := srv.expect(mcp.MethodServerDiscover)
	srv.answer(m, `{"supportedVersions":["`+mcp.ModernVersion+`"],"capabilities":{}}`)
	if e := h.await(EventReady); !e.Info.Modern {
		t.Error("ready as legacy")
	}
	if n := len(h.servers); n != 0 {
		t.Errorf("%d more links dialled", n)
	}
}

// TestPipeDialFails: a dialler's error (or no link) is a failed start, retried after the
// backoff.
func TestPipeDialFails(t *testing.T) {
	refused := errors.New("connection refused")
	for _, tt := range []struct {
		name string
		dial func(context.Context) (transport.Link, error)
		want string
	}{
		{"error", func(context.Context) (transport.Link, error) { return nil, refused }, "dialling: connection refused"},
		{"no link", func(context.Context) (transport.Link, error) { return nil, nil }, "dialling: the dialler returned no link"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := make(recorder, 64)
			u := New(Spec{Name: "d", Dial: tt.dial, Observer: rec, BackoffMin: time.Millisecond, BackoffMax: time.Millisecond},
				zerolog.Nop(), nopEvents{})
			u.Start(context.Background())
			defer u.Close()
			if err := u.WaitFirstAttempt(context.Background()); err == nil || err.Error() != tt.want {
				t.Errorf("first attempt: %v; want %s", err, tt.want)
			}
			for _, want := range []EventKind{EventStarting, EventStartFailed, EventRestarting, EventStarting} {
				if e := rec.next(t); e.Kind != want {
					t.Fatalf("event %v; want %v", e.Kind, want)
				}
			}
			u.Close()
			for e := rec.next(t); e.Kind != EventStopped; e = rec.next(t) {
			}
		})
	}
}
