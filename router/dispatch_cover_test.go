package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// scriptUpstream is a fake upstream whose answers a test scripts: reply answers every
// call (nil: the embedded fake's canned response), on the caller's goroutine.
type scriptUpstream struct {
	*fakeUpstream
	reply func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error)

	mu      sync.Mutex
	state   upstream.State
	started int
	closed  chan struct{} // closed by Close
	notes   []string
	corks   int
	caps    json.RawMessage // from SetClientCapabilities
	legacy  bool            // from SetPreferLegacy
}

func newScript(name string, tools ...string) *scriptUpstream {
	return &scriptUpstream{fakeUpstream: newFake(name, tools...), state: upstream.StateReady, closed: make(chan struct{})}
}

var _ Upstream = (*scriptUpstream)(nil)

func (s *scriptUpstream) Start(context.Context) {
	s.mu.Lock()
	s.started++
	s.mu.Unlock()
}

func (s *scriptUpstream) State() (upstream.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, nil
}

func (s *scriptUpstream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	return nil
}

func (s *scriptUpstream) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

func (s *scriptUpstream) SetClientCapabilities(caps json.RawMessage) {
	s.mu.Lock()
	s.caps = caps
	s.mu.Unlock()
}

func (s *scriptUpstream) SetPreferLegacy(legacy bool) {
	s.mu.Lock()
	s.legacy = legacy
	s.mu.Unlock()
}

func (s *scriptUpstream) notifications() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.notes...)
}

func (s *scriptUpstream) Notify(method string, _ json.RawMessage) error {
	s.mu.Lock()
	s.notes = append(s.notes, method)
	s.mu.Unlock()
	return nil
}

func (s *scriptUpstream) Cork() func() {
	s.mu.Lock()
	s.corks++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.corks--
		s.mu.Unlock()
	}
}

func (s *scriptUpstream) Call(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
	if s.reply == nil {
		return s.fakeUpstream.Call(ctx, req)
	}
	s.fakeUpstream.mu.Lock()
	s.fakeUpstream.calls = append(s.fakeUpstream.calls, req)
	s.fakeUpstream.mu.Unlock()
	return s.reply(ctx, req)
}

func (s *scriptUpstream) Send(ctx context.Context, req *upstream.Request, done func(*jsonrpc.Message, error)) {
	done(s.Call(ctx, req))
}

// resultMsg is an upstream's response carrying a result.
func resultMsg(s string) (*jsonrpc.Message, error) {
	return jsonrpc.NewResult(jsonrpc.IntID(1), json.RawMessage(s)), nil
}

// rpcCode returns the JSON-RPC code of err (0 when it has none).
func rpcCode(err error) int64 {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Code
	}
	return 0
}

func newScriptRouter(t testing.TB, opts Options, ups ...*scriptUpstream) *Router {
	r := New(opts, zerolog.Nop())
	for _, u := range ups {
		r.Add(u, u.name)
	}
	r.rebuild()
	return r
}

// TestUpstreamErrorMapping: what the client is told when the upstream could not answer;
// a proxy-local error names the upstream and can never pass for the upstream's own.
func TestUpstreamErrorMapping(t *testing.T) {
	u := newScript("u", "t")
	r := newScriptRouter(t, Options{}, u)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		err     error
		resp    *jsonrpc.Message
		code    int64
		isCancl bool
	}{
		{"upstream JSON-RPC error passes", context.Background(), nil, jsonrpc.NewErrorResponse(jsonrpc.IntID(1), jsonrpc.Errorf(-32000, "x")), -32000, false},
		{"a proxy error from below passes", context.Background(), mcp.ProxyError(mcp.CodeUpstreamTimeout, "u", "slow"), nil, mcp.CodeUpstreamTimeout, false},
		{"unavailable", context.Background(), fmt.Errorf("%w: down", upstream.ErrUnavailable), nil, mcp.CodeUpstreamUnavailable, false},
		{"anything else failed", context.Background(), errors.New("broken pipe"), nil, mcp.CodeUpstreamFailed, false},
		{"cancelled upstream", context.Background(), upstream.ErrCancelled, nil, 0, true},
		{"the client's context ended", cancelled, errors.New("whatever"), nil, 0, true},
	} {
		u.reply = func(context.Context, *upstream.Request) (*jsonrpc.Message, error) { return tc.resp, tc.err }
		_, err := r.Call(tc.ctx, &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"u__t"}`)})
		if tc.isCancl {
			if !errors.Is(err, ErrCancelled) {
				t.Errorf("%s: %v, want ErrCancelled", tc.name, err)
			}
			continue
		}
		if rpcCode(err) != tc.code {
			t.Errorf("%s: %v, want code %d", tc.name, err, tc.code)
		}
		var je *jsonrpc.Error
		if errors.As(err, &je) && (tc.code == mcp.CodeUpstreamFailed || tc.code == mcp.CodeUpstreamUnavailable) &&
			!strings.Contains(string(je.Data), `"upstream":"u"`) {
			t.Errorf("%s: data %s does not name the upstream", tc.name, je.Data)
		}
	}
}

// TestDispatchLocalErrors: requests refused before anything is routed.
func TestDispatchLocalErrors(t *testing.T) {
	u := newScript("u", "t")
	u.cat.Prompts = []json.RawMessage{json.RawMessage(`{"name":"p"}`)}
	r := newScriptRouter(t, Options{}, u)
	for _, tc := range []struct {
		method, params string
		code           int64
	}{
		{"nope/nope", `{}`, jsonrpc.CodeMethodNotFound},
		{mcp.MethodToolsCall, `{}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodToolsCall, `{"name":5}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodPromptsGet, `{"name":"nope"}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodResourcesRead, `{}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodResourcesRead, `{"uri":"res://nobody"}`, mcp.CodeResourceNotFound},
		{mcp.MethodResourcesRead, `{"uri":"file:///a%2F..%2Fb"}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodCompletionComplete, `{}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodCompletionComplete, `{"ref":{"type":"ref/other"}}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodCompletionComplete, `{"ref":{"type":"ref/prompt","name":"nope"}}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodCompletionComplete, `{"ref":{"type":"ref/resource","uri":"res://nobody/{x}"}}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodLoggingSetLevel, `{}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodLoggingSetLevel, `{"level":"verbose"}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodTasksGet, `{}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodTasksGet, `{"taskId":"unknown"}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodTasksList, `{"cursor":"x"}`, jsonrpc.CodeInvalidParams},
		{mcp.MethodToolsList, `{"cursor":7}`, jsonrpc.CodeInvalidParams},
	} {
		_, err := call(t, r, tc.method, tc.params)
		if rpcCode(err) != tc.code {
			t.Errorf("%s %s: %v, want %d", tc.method, tc.params, err, tc.code)
		}
	}
	if u.lastCall() != nil {
		t.Errorf("a refused request reached the upstream: %+v", u.lastCall())
	}
	// Valid levels are answered even with no upstream that logs.
	if res, err := call(t, r, mcp.MethodLoggingSetLevel, `{"level":"warning"}`); err != nil || string(res) != "{}" {
		t.Errorf("setLevel: %s %v", res, err)
	}
}

// TestEmptyTaskList: tasks/list with no task in any upstream is an empty list.
func TestEmptyTaskList(t *testing.T) {
	r := newScriptRouter(t, Options{}, newScript("u"))
	if res, err := call(t, r, mcp.MethodTasksList, `{"cursor":null}`); err != nil || string(res) != `{"tasks":[]}` {
		t.Errorf("tasks/list with no task lister: %s %v", res, err)
	}
}

// TestCompletionRouting: completion/complete goes to the owner of its reference with the
// upstream's own name or URI restored.
func TestCompletionRouting(t *testing.T) {
	a := newScript("a")
	a.cat.Prompts = []json.RawMessage{json.RawMessage(`{"name":"greet"}`)}
	a.cat.Templates = []json.RawMessage{json.RawMessage(`{"uriTemplate":"item://{id}","name":"i"}`)}
	a.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"file:///same","name":"s"}`)}
	b := newScript("b")
	b.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"file:///same","name":"s"}`)}
	r := newScriptRouter(t, Options{}, a, b)
	var bExposed string
	for _, res := range r.snap.Load().resources {
		if res.owner.name == "b" {
			bExposed = res.exposed
		}
	}
	for _, tc := range []struct {
		ref   string
		owner *scriptUpstream
		sent  string // the ref the owner received
	}{
		{`{"type":"ref/prompt","name":"a__greet"}`, a, `{"type":"ref/prompt","name":"greet"}`},
		{`{"type":"ref/resource","uri":"item://{id}"}`, a, `{"type":"ref/resource","uri":"item://{id}"}`},
		{`{"type":"ref/resource","uri":"file:///same"}`, a, `{"type":"ref/resource","uri":"file:///same"}`},
		{`{"type":"ref/resource","uri":"` + bExposed + `"}`, b, `{"type":"ref/resource","uri":"file:///same"}`},
	} {
		a.calls, b.calls = nil, nil
		if _, err := call(t, r, mcp.MethodCompletionComplete, `{"ref":`+tc.ref+`,"argument":{"name":"x","value":"y"}}`); err != nil {
			t.Errorf("%s: %v", tc.ref, err)
			continue
		}
		last := tc.owner.lastCall()
		if last == nil {
			t.Errorf("%s did not reach %s", tc.ref, tc.owner.name)
			continue
		}
		if ref, _, _ := jsonx.Get(last.Params, "ref"); string(ref) != tc.sent {
			t.Errorf("%s: %s received ref %s, want %s", tc.ref, tc.owner.name, ref, tc.sent)
		}
	}
}

// TestReadRewritesContentURIs: a resource exposed under a proxy URI (two upstreams
// listed the same one) is read from its owner under the owner's URI, and the contents
// come back under the exposed one; other contents are left alone.
func TestReadRewritesContentURIs(t *testing.T) {
	a, b := newScript("a"), newScript("b")
	a.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"file:///same","name":"s"}`)}
	b.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"file:///same","name":"s"}`)}
	b.reply = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		return resultMsg(`{"contents":[{"uri":"file:///same","text":"b"},{"uri":"file:///other","text":"o"},{"text":"no uri"}]}`)
	}
	r := newScriptRouter(t, Options{}, a, b)
	exposed := "mcp-proxy://b/" + "file:%2F%2F%2Fsame"
	if _, ok := r.snap.Load().resByURI[exposed]; !ok {
		t.Fatalf("b's resource is not exposed as %s: %v", exposed, r.snap.Load().resByURI)
	}
	res, err := call(t, r, mcp.MethodResourcesRead, `{"uri":"`+exposed+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	if uri, _, _ := jsonx.GetString(b.lastCall().Params, "uri"); uri != "file:///same" {
		t.Errorf("b was asked for %q", uri)
	}
	want := `{"contents":[{"uri":"` + exposed + `","text":"b"},{"uri":"file:///other","text":"o"},{"text":"no uri"}]}`
	if string(res) != want {
		t.Errorf("contents\n got %s\nwant %s", res, want)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"contents":5}`, `{"contents":5}`},
		{`{"other":1}`, `{"other":1}`},
	} {
		if got := string(rewriteContentURIs(json.RawMessage(tc.in), "a", "b")); got != tc.want {
			t.Errorf("rewriteContentURIs(%s) = %s", tc.in, got)
		}
	}
}

// guardFunc is a Guard made of a function.
type guardFunc func(req *Request, t *Target) bool

func (g guardFunc) Visible(req *Request, t *Target) bool { return g(req, t) }

// TestGuardHidesItems: a guard filters every list, makes a hidden resource unknown to
// subscribe, and makes modern lists private; a task belongs to the principal that
// created it.
func TestGuardHidesItems(t *testing.T) {
	u := newScript("u", "open", "secret")
	u.cat.Prompts = []json.RawMessage{json.RawMessage(`{"name":"secret_p"}`), json.RawMessage(`{"name":"p"}`)}
	u.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"res://secret","name":"s"}`), json.RawMessage(`{"uri":"res://open","name":"o"}`)}
	u.cat.Templates = []json.RawMessage{json.RawMessage(`{"uriTemplate":"secret://{x}","name":"st"}`), json.RawMessage(`{"uriTemplate":"open://{x}","name":"ot"}`)}
	u.reply = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		if _, isTask, _ := jsonx.Get(req.Params, "task"); isTask {
			return resultMsg(`{"task":{"taskId":"t-1","status":"working"}}`)
		}
		return resultMsg(`{}`)
	}
	r := newScriptRouter(t, Options{}, u)
	r.SetGuard(guardFunc(func(req *Request, t *Target) bool {
		return !strings.Contains(t.Name, "secret") && !strings.Contains(t.Original, "secret")
	}))
	if r.Guard() == nil {
		t.Fatal("Guard() lost the guard")
	}
	for method, key := range map[string]string{mcp.MethodToolsList: "tools", mcp.MethodPromptsList: "prompts",
		mcp.MethodResourcesList: "resources", mcp.MethodResourcesTemplatesList: "resourceTemplates"} {
		res, err := r.Call(context.Background(), &Request{Method: method, Modern: true})
		if err != nil {
			t.Fatal(err)
		}
		items, _, _ := jsonx.Get(res, key)
		var list []json.RawMessage
		_ = json.Unmarshal(items, &list)
		if len(list) != 1 || strings.Contains(string(items), "secret") {
			t.Errorf("%s shows %s", method, items)
		}
		if !strings.Contains(string(res), `"cacheScope":"private"`) {
			t.Errorf("%s: a filtered list must be private: %s", method, res)
		}
	}
	if _, err := call(t, r, mcp.MethodResourcesSubscribe, `{"uri":"res://secret"}`); rpcCode(err) != mcp.CodeResourceNotFound {
		t.Errorf("subscribe to a hidden resource: %v", err)
	}
	if _, err := call(t, r, mcp.MethodResourcesSubscribe, `{"uri":"res://open"}`); err != nil {
		t.Errorf("subscribe to a visible resource: %v", err)
	}

	alice := &principal.Principal{Name: "alice"}
	bob := &principal.Principal{Name: "bob"}
	if _, err := r.Call(context.Background(), &Request{Method: mcp.MethodToolsCall, Principal: alice,
		Params: json.RawMessage(`{"name":"u__open","task":{"ttl":1000}}`)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who *principal.Principal
		ok  bool
	}{{alice, true}, {bob, false}, {nil, false}} {
		_, err := r.Call(context.Background(), &Request{Method: mcp.MethodTasksGet, Principal: tc.who, Params: json.RawMessage(`{"taskId":"t-1"}`)})
		if (err == nil) != tc.ok {
			t.Errorf("tasks/get by %v: %v", tc.who, err)
		}
	}
}

// TestTasksRoutedToCreator: a task created by a task-augmented request, or announced by
// a status notification, is served by the upstream that owns it.
func TestTasksRoutedToCreator(t *testing.T) {
	a, b := newScript("a", "t"), newScript("b", "t")
	b.reply = func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
		return resultMsg(`{"task":{"taskId":"from-b"}}`)
	}
	r := newScriptRouter(t, Options{}, a, b)
	if _, err := call(t, r, mcp.MethodToolsCall, `{"name":"b__t","task":{}}`); err != nil {
		t.Fatal(err)
	}
	// A result that creates no task records nothing.
	if _, err := call(t, r, mcp.MethodToolsCall, `{"name":"a__t","task":{}}`); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksCancel} {
		a.calls, b.calls = nil, nil
		if _, err := call(t, r, m, `{"taskId":"from-b"}`); err != nil {
			t.Errorf("%s: %v", m, err)
		}
		if b.lastCall() == nil || b.lastCall().Method != m || a.lastCall() != nil {
			t.Errorf("%s did not go to b alone", m)
		}
	}
	// The bound and "a listing keeps the creator" are the store's contract:
	// TestMemoryTasksContract.
}

// TestListPages: every merged list pages with its own cursors, a null cursor is no
// cursor, a cursor past a list that shrank gives an empty page, and modern lists carry
// the merged caching hints.
func TestListPages(t *testing.T) {
	u := newScript("u")
	for i := 0; i < 5; i++ {
		u.cat.Prompts = append(u.cat.Prompts, json.RawMessage(fmt.Sprintf(`{"name":"p%d"}`, i)))
		u.cat.Resources = append(u.cat.Resources, json.RawMessage(fmt.Sprintf(`{"uri":"res://%d","name":"r"}`, i)))
		u.cat.Templates = append(u.cat.Templates, json.RawMessage(fmt.Sprintf(`{"uriTemplate":"t%d://{x}","name":"t"}`, i)))
	}
	r := newScriptRouter(t, Options{PageSize: 2}, u)
	for method, key := range map[string]string{mcp.MethodPromptsList: "prompts", mcp.MethodResourcesList: "resources",
		mcp.MethodResourcesTemplatesList: "resourceTemplates"} {
		n, cursor := 0, "null"
		for page := 0; page < 10; page++ {
			res, err := call(t, r, method, `{"cursor":`+cursor+`}`)
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			items, _, _ := jsonx.Get(res, key)
			var list []json.RawMessage
			_ = json.Unmarshal(items, &list)
			n += len(list)
			next, ok, _ := jsonx.GetString(res, "nextCursor")
			if !ok {
				break
			}
			cursor = `"` + next + `"`
		}
		if n != 5 {
			t.Errorf("%s: %d items over all pages", method, n)
		}
	}
	res, _ := call(t, r, mcp.MethodPromptsList, `{}`)
	next, _, _ := jsonx.GetString(res, "nextCursor")
	u.cat = &upstream.Catalogue{}
	r.rebuild()
	if res, err := call(t, r, mcp.MethodPromptsList, `{"cursor":"`+next+`"}`); err != nil || string(res) != `{"prompts":[]}` {
		t.Errorf("a cursor past the shrunk list: %s %v", res, err)
	}
	res, err := r.Call(context.Background(), &Request{Method: mcp.MethodToolsList, Modern: true})
	if err != nil || string(res) != `{"resultType":"complete","ttlMs":0,"cacheScope":"private","tools":[]}` {
		t.Errorf("modern tools/list: %s %v", res, err)
	}
}

// TestListChangedKinds: each kind of catalogue change is announced once per burst, also
// when an upstream announced a change that left the merged list as it was; a rebuild
// that changes nothing announces nothing.
func TestListChangedKinds(t *testing.T) {
	u := newScript("u", "a")
	r := New(Options{NotifyDelay: time.Millisecond}, zerolog.Nop())
	r.Add(u, "u")
	c := newChanClient()
	unsubscribe := r.Subscribe(c)
	r.rebuild()
	if got := recvT(t, c.notes); got != mcp.NotificationToolsListChanged {
		t.Errorf("first tools: %s", got)
	}

	u.cat = &upstream.Catalogue{Tools: u.cat.Tools, Prompts: []json.RawMessage{json.RawMessage(`{"name":"p"}`)}}
	r.rebuild()
	if got := recvT(t, c.notes); got != mcp.NotificationPromptsListChanged {
		t.Errorf("prompts change: %s", got)
	}
	u.cat = &upstream.Catalogue{Tools: u.cat.Tools, Prompts: u.cat.Prompts, Templates: []json.RawMessage{json.RawMessage(`{"uriTemplate":"x://{y}","name":"t"}`)}}
	r.rebuild()
	if got := recvT(t, c.notes); got != mcp.NotificationResourcesListChanged {
		t.Errorf("templates change: %s", got)
	}
	r.rebuild() // nothing changed: nothing to say
	r.rebuildAnnounced(upstream.KindTools)
	if got := recvT(t, c.notes); got != mcp.NotificationToolsListChanged {
		t.Errorf("announced tools change: %s (a rebuild that changed nothing was announced)", got)
	}
	unsubscribe()
	if n := len(r.clientList()); n != 0 {
		t.Errorf("%d clients after unsubscribe", n)
	}
}

// chanClient is a Client whose notifications arrive on a channel.
type chanClient struct {
	notes  chan string
	params chan json.RawMessage
	corked chan bool // Cork sends true, Uncork false
	answer func(method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error)
}

func newChanClient() *chanClient {
	return &chanClient{notes: make(chan string, 64), params: make(chan json.RawMessage, 64), corked: make(chan bool, 64)}
}

func (c *chanClient) Notify(method string, params json.RawMessage) {
	c.notes <- method
	c.params <- params
}
func (c *chanClient) Cork()   { c.corked <- true }
func (c *chanClient) Uncork() { c.corked <- false }
func (c *chanClient) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	if c.answer == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "no")
	}
	return c.answer(method, params)
}

// corklessClient is a chanClient for which corking achieves nothing.
type corklessClient struct{ *chanClient }

func (corklessClient) Corkless() bool { return true }

// recvT returns the next value of ch, failing the test when none comes.
func recvT[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing came")
	}
	var zero T
	return zero
}

func (s *scriptUpstream) FirstAttemptDone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started > 0
}
