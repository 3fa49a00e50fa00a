package router

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// What the router decides from an upstream's declared capabilities (who logs, who
// serves resources, who lists tasks, the caching hints) needs real upstreams: these
// tests run them over Streamable HTTP against a small in-process MCP server.

// mcpStub is an MCP server over Streamable HTTP (JSON answers, no session).
type mcpStub struct {
	caps   string
	modern bool
	// answers maps a method to its result; lists not given are empty.
	answers map[string]string

	mu   sync.Mutex
	got  []string    // methods received, in order
	seen chan string // the same, as they come
}

func newStub(caps string, answers map[string]string) *mcpStub {
	if answers == nil {
		answers = map[string]string{}
	}
	return &mcpStub{caps: caps, answers: answers, seen: make(chan string, 256)}
}

// answer sets the result of method.
func (s *mcpStub) answer(method, result string) {
	s.mu.Lock()
	s.answers[method] = result
	s.mu.Unlock()
}

func (s *mcpStub) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

func (s *mcpStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.Decode(body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.got = append(s.got, m.Method)
	s.mu.Unlock()
	select {
	case s.seen <- m.Method:
	default:
	}
	if !m.IsRequest() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var resp *jsonrpc.Message
	s.mu.Lock()
	res, ok := s.answers[m.Method]
	s.mu.Unlock()
	switch {
	case ok:
	case m.Method == mcp.MethodInitialize && !s.modern:
		res = `{"protocolVersion":"2025-11-25","capabilities":` + s.caps + `,"serverInfo":{"name":"stub","version":"1"}}`
	case m.Method == mcp.MethodServerDiscover && s.modern:
		res = `{"supportedVersions":["2026-07-28"],"capabilities":` + s.caps + `}`
	case m.Method == mcp.MethodSubscriptionsListen:
		res = `{}`
	case strings.HasSuffix(m.Method, "/list"):
		key := map[string]string{mcp.MethodToolsList: "tools", mcp.MethodPromptsList: "prompts", mcp.MethodResourcesList: "resources",
			mcp.MethodResourcesTemplatesList: "resourceTemplates", mcp.MethodTasksList: "tasks"}[m.Method]
		res = `{"` + key + `":[]}`
	case m.Method == mcp.MethodServerDiscover || m.Method == mcp.MethodInitialize:
		resp = jsonrpc.NewErrorResponse(m.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found"))
	default:
		res = `{"served":"` + m.Method + `"}`
	}
	if resp == nil {
		resp = jsonrpc.NewResult(m.ID, json.RawMessage(res))
	}
	b, _ := resp.Encode()
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// stubbed is a router over real upstreams, one per stub (named in order), started and
// ready; everything ends with the test.
func stubbed(t *testing.T, stubs map[string]*mcpStub, order ...string) (*Router, map[string]*upstream.Upstream) {
	t.Helper()
	noLeaks(t)
	r := New(Options{}, zerolog.Nop())
	ups := map[string]*upstream.Upstream{}
	for _, name := range order {
		s := stubs[name]
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		proto := upstream.ProtocolLegacy
		if s.modern {
			proto = upstream.ProtocolModern
		}
		u := upstream.New(upstream.Spec{Name: name, URL: srv.URL, Protocol: proto, Transport: upstream.TransportStreamableHTTP,
			Timeout: waitForStub, StartupTimeout: waitForStub, StopGrace: 100 * time.Millisecond}, zerolog.Nop(), r.Events())
		r.Add(u, name)
		ups[name] = u
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitForStub)
	defer cancel()
	r.Start(context.Background())
	if err := r.WaitReady(ctx); err != nil {
		t.Fatalf("upstreams not ready: %v", err)
	}
	return r, ups
}

const waitForStub = 10 * time.Second

// TestSetLevelFanOut: logging/setLevel goes to every ready upstream that logs, and the
// level is applied again to one that becomes ready later.
func TestSetLevelFanOut(t *testing.T) {
	logs, quiet := newStub(`{"tools":{},"logging":{}}`, nil), newStub(`{"tools":{}}`, nil)
	r, ups := stubbed(t, map[string]*mcpStub{"logs": logs, "quiet": quiet}, "logs", "quiet")
	if res, err := call(t, r, mcp.MethodLoggingSetLevel, `{"level":"notice"}`); err != nil || string(res) != "{}" {
		t.Fatalf("setLevel: %s %v", res, err)
	}
	count := func(s *mcpStub) (n int) {
		for _, m := range s.received() {
			if m == mcp.MethodLoggingSetLevel {
				n++
			}
		}
		return n
	}
	// setLevel returns once every upstream it asked has answered.
	if count(logs) != 1 || count(quiet) != 0 {
		t.Errorf("setLevel reached the logging upstream %d times and the quiet one %d times", count(logs), count(quiet))
	}
	// The logging upstream (re)starts: it is told the level again.
	r.Events().Changed(ups["logs"], upstream.AllKinds)
	for count(logs) < 2 {
		recvT(t, logs.seen)
	}
	// The merged capabilities come from the handshake.
	st := r.Upstreams()
	if len(st) != 2 || !st[0].Info.HasLogging() || st[1].Info.HasLogging() || st[0].State != upstream.StateReady {
		t.Errorf("Upstreams: %+v", st)
	}
}

// TestSoleResourceServer: a URI that nobody listed goes to the only upstream that serves
// resources; with two, it is not found rather than guessed.
func TestSoleResourceServer(t *testing.T) {
	res := newStub(`{"resources":{}}`, map[string]string{mcp.MethodResourcesRead: `{"contents":[{"uri":"dyn://x","text":"hi"}]}`})
	r, _ := stubbed(t, map[string]*mcpStub{"res": res, "tools": newStub(`{"tools":{}}`, nil)}, "res", "tools")
	if out, err := call(t, r, mcp.MethodResourcesRead, `{"uri":"dyn://x"}`); err != nil || !strings.Contains(string(out), `"text":"hi"`) {
		t.Errorf("unlisted URI: %s %v", out, err)
	}
	if out, err := call(t, r, mcp.MethodCompletionComplete, `{"ref":{"type":"ref/resource","uri":"dyn://y"},"argument":{"name":"a","value":"b"}}`); err != nil {
		t.Errorf("completion of an unlisted URI: %s %v", out, err)
	}

	r2, _ := stubbed(t, map[string]*mcpStub{"a": newStub(`{"resources":{}}`, nil), "b": newStub(`{"resources":{}}`, nil)}, "a", "b")
	if _, err := call(t, r2, mcp.MethodResourcesRead, `{"uri":"dyn://x"}`); rpcCode(err) != mcp.CodeResourceNotFound {
		t.Errorf("two resource servers: %v", err)
	}
}

// TestTaskListMerged: tasks/list merges the tasks of every upstream that lists them,
// and the router learns who owns each; under a guard a principal sees only the tasks
// it created.
func TestTaskListMerged(t *testing.T) {
	a := newStub(`{"tools":{},"tasks":{"list":{}}}`, map[string]string{mcp.MethodTasksList: `{"tasks":[{"taskId":"ta","status":"working"}]}`,
		mcp.MethodToolsList: `{"tools":[{"name":"t","inputSchema":{}}]}`, mcp.MethodToolsCall: `{"task":{"taskId":"mine"}}`})
	b := newStub(`{"tasks":{"list":{}}}`, map[string]string{mcp.MethodTasksList: `{"tasks":[{"taskId":"tb"},{"no":"id"}]}`})
	r, _ := stubbed(t, map[string]*mcpStub{"a": a, "b": b, "none": newStub(`{}`, nil)}, "a", "b", "none")
	res, err := call(t, r, mcp.MethodTasksList, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{`"ta"`, `"tb"`} {
		if !strings.Contains(string(res), id) {
			t.Errorf("tasks/list %s lacks %s", res, id)
		}
	}
	if out, err := call(t, r, mcp.MethodTasksGet, `{"taskId":"tb"}`); err != nil || !strings.Contains(string(out), `"served":"tasks/get"`) {
		t.Errorf("tasks/get of a listed task: %s %v", out, err)
	}
	if got := b.received(); got[len(got)-1] != mcp.MethodTasksGet {
		t.Errorf("tasks/get went elsewhere: b received %v", got)
	}

	r.SetGuard(guardFunc(func(*Request, *Target) bool { return true }))
	alice := &principal.Principal{Name: "alice"}
	if _, err := r.Call(context.Background(), &Request{Method: mcp.MethodToolsCall, Principal: alice,
		Params: json.RawMessage(`{"name":"a__t","task":{}}`)}); err != nil {
		t.Fatal(err)
	}
	a.answer(mcp.MethodTasksList, `{"tasks":[{"taskId":"ta"},{"taskId":"mine"}]}`)
	res, err = r.Call(context.Background(), &Request{Method: mcp.MethodTasksList, Principal: alice})
	if err != nil || string(res) != `{"tasks":[{"taskId":"mine"}]}` {
		t.Errorf("alice's tasks: %s %v", res, err)
	}
}

// TestMergedHints: modern lists carry the smallest ttl of the upstreams serving the
// list, public only when all say public; a legacy upstream makes the list private.
func TestMergedHints(t *testing.T) {
	hinted := func(ttl int, scope string) *mcpStub {
		s := newStub(`{"tools":{}}`, map[string]string{mcp.MethodToolsList: `{"tools":[],"ttlMs":` + itoa(ttl) + `,"cacheScope":"` + scope + `"}`})
		s.modern = true
		return s
	}
	for _, tc := range []struct {
		name  string
		stubs map[string]*mcpStub
		want  string
	}{
		{"public", map[string]*mcpStub{"a": hinted(5000, "public"), "b": hinted(2000, "public")}, `"ttlMs":2000,"cacheScope":"public"`},
		{"one private", map[string]*mcpStub{"a": hinted(5000, "public"), "b": hinted(9000, "private")}, `"ttlMs":5000,"cacheScope":"private"`},
		{"one legacy", map[string]*mcpStub{"a": hinted(5000, "public"), "b": newStub(`{"tools":{}}`, nil)}, `"ttlMs":0,"cacheScope":"private"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := stubbed(t, tc.stubs, "a", "b")
			res, err := r.Call(context.Background(), &Request{Method: mcp.MethodToolsList, Modern: true})
			if err != nil || !strings.Contains(string(res), tc.want) {
				t.Errorf("%s: %s %v, want %s", tc.name, res, err, tc.want)
			}
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
