package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/server"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// fakeEngine is a settable router view.
type fakeEngine struct {
	mu    sync.Mutex
	ups   []router.UpstreamStatus
	sizes []router.Sizes
}

func (f *fakeEngine) Upstreams() []router.UpstreamStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]router.UpstreamStatus(nil), f.ups...)
}

func (f *fakeEngine) Sizes() []router.Sizes {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]router.Sizes(nil), f.sizes...)
}

func (f *fakeEngine) set(name string, st upstream.State, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.ups {
		if f.ups[i].Name == name {
			f.ups[i].State, f.ups[i].Err = st, err
		}
	}
}

var t0 = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)

// testServer is an admin server over a fake engine with upstreams "fast" (required, up,
// legacy), "opt" (optional, down) and "off" (disabled).
func testServer(t *testing.T, auth func(http.Handler) http.Handler) (*Server, *fakeEngine, *metrics.Metrics) {
	t.Helper()
	now := t0.Add(90 * time.Second)
	m := metrics.New(metrics.Options{Version: "v9", Now: func() time.Time { return now }})
	eng := &fakeEngine{
		ups: []router.UpstreamStatus{
			{Name: "fast", State: upstream.StateReady, Info: upstream.Info{ProtocolVersion: "2025-06-18"}},
			{Name: "opt", State: upstream.StateDown, Err: errors.New("exit status 3")},
		},
		sizes: []router.Sizes{{Upstream: "fast", Tools: 11, Resources: 1, Templates: 1}, {Upstream: "opt"}},
	}
	m.UpstreamEvent(upstream.Event{Kind: upstream.EventStarting, Upstream: "fast", Time: t0})
	m.UpstreamEvent(upstream.Event{Kind: upstream.EventReady, Upstream: "fast", Time: t0.Add(time.Second)})
	m.UpstreamEvent(upstream.Event{Kind: upstream.EventStarting, Upstream: "opt", Time: t0})
	m.UpstreamEvent(upstream.Event{Kind: upstream.EventStartFailed, Upstream: "opt", Time: t0.Add(2 * time.Second), Err: errors.New("exec: \"nope\": executable file not found in $PATH")})
	m.UpstreamEvent(upstream.Event{Kind: upstream.EventRestarting, Upstream: "opt", Time: t0.Add(2 * time.Second)})
	m.SessionEvent(server.SessionEvent{Kind: server.SessionOpened, Transport: server.TransportStdio, Version: "2025-06-18"})
	s := New(Options{Address: "127.0.0.1:0", Auth: auth, Engine: eng, Metrics: m, Version: "v9", Log: zerolog.Nop(),
		Upstreams: []UpstreamConfig{
			{Name: "fast", Transport: TransportStdio, Required: true},
			{Name: "opt", Transport: TransportHTTP},
			{Name: "off", Transport: TransportStdio, Disabled: true},
		},
		Config: ConfigInfo{Path: "/etc/mcp-proxy/proxy.hcl", SHA256: strings.Repeat("ab", 32), LoadedAt: t0},
		Now:    func() time.Time { return now },
	})
	return s, eng, m
}

func get(t *testing.T, h http.Handler, path string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestHealthAndReadiness(t *testing.T) {
	s, eng, _ := testServer(t, nil)
	h := s.Handler()
	if rec := get(t, h, "/healthz", nil); rec.Code != 200 || rec.Body.String() != "ok\n" {
		t.Errorf("healthz: %d %q", rec.Code, rec.Body)
	}
	if rec := get(t, h, "/readyz", nil); rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != "{\n  \"ready\": true\n}" {
		t.Errorf("readyz with the required upstream up: %d %s", rec.Code, rec.Body)
	}
	eng.set("fast", upstream.StateDown, errors.New("exit status 3"))
	rec := get(t, h, "/readyz", nil)
	var body readiness
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 503 || body.Ready || len(body.NotReady) != 1 || body.NotReady[0] != "fast" {
		t.Errorf("readyz with the required upstream down: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("readyz content type %q", ct)
	}
	eng.set("fast", upstream.StateReady, nil)
	if rec := get(t, h, "/readyz", nil); rec.Code != 200 {
		t.Errorf("readyz once it is back: %d", rec.Code)
	}
	s.Drain()
	if rec := get(t, h, "/readyz", nil); rec.Code != 503 || !strings.Contains(rec.Body.String(), `"draining": true`) {
		t.Errorf("readyz while draining: %d %s", rec.Code, rec.Body)
	}
	if rec := get(t, h, "/healthz", nil); rec.Code != 200 {
		t.Errorf("healthz while draining: %d", rec.Code)
	}
}

func TestStatusJSON(t *testing.T) {
	s, _, _ := testServer(t, nil)
	for _, req := range []struct {
		path   string
		header http.Header
	}{{"/status?format=json", nil}, {"/status", http.Header{"Accept": {"application/json"}}}} {
		rec := get(t, s.Handler(), req.path, req.header)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s", req.path, rec.Code, rec.Header())
		}
		var st Status
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatal(err)
		}
		if !st.Ready || st.Version != "v9" || st.Config.Path != "/etc/mcp-proxy/proxy.hcl" || !st.Config.LoadedAt.Equal(t0) || len(st.Upstreams) != 3 {
			t.Fatalf("status: %+v", st)
		}
		fast, opt, off := st.Upstreams[0], st.Upstreams[1], st.Upstreams[2]
		if fast.State != metrics.StateUp || !fast.Ready || !fast.Required || fast.Era != "legacy" || fast.ProtocolVersion != "2025-06-18" ||
			fast.Tools != 11 || fast.Resources != 1 || fast.Templates != 1 || fast.LastStart == nil || !fast.LastStart.Equal(t0.Add(time.Second)) {
			t.Errorf("fast: %+v", fast)
		}
		if opt.State != metrics.StateRestarting || opt.Ready || opt.Required || opt.Restarts != 1 ||
			!strings.Contains(opt.LastError, "executable file not found") || opt.LastErrorAt == nil || opt.Transport != TransportHTTP {
			t.Errorf("opt: %+v", opt)
		}
		if off.State != StateDisabled || off.Ready || off.Required {
			t.Errorf("off: %+v", off)
		}
		if len(st.Sessions) != 1 || st.Sessions[0] != (metrics.SessionCount{Era: "legacy", Transport: "stdio", Open: 1}) {
			t.Errorf("sessions: %+v", st.Sessions)
		}
	}
}

func TestStatusHTML(t *testing.T) {
	s, _, _ := testServer(t, nil)
	rec := get(t, s.Handler(), "/status", http.Header{"Accept": {"text/html,application/xhtml+xml"}})
	body := rec.Body.String()
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("%d %s", rec.Code, rec.Header())
	}
	for _, want := range []string{
		`<tr id="upstream-fast" class="upstream up">`,
		`<td class="state up">up</td>`,
		`<tr id="upstream-opt" class="upstream restarting">`,
		`<tr id="upstream-off" class="upstream disabled">`,
		`exec: &#34;nope&#34;: executable file not found`, // escaped
		`<p id="ready" class="yes">Ready</p>`,
		`<code id="config-path">/etc/mcp-proxy/proxy.hcl</code>`,
		`<code id="config-hash" title="` + strings.Repeat("ab", 32) + `">abababababab</code>`,
		`legacy (2025-06-18)`,
		`<script`, // must not appear: checked below
	} {
		if want == `<script` {
			if strings.Contains(body, want) {
				t.Error("the page has a script")
			}
			continue
		}
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s\n%s", want, body)
		}
	}
	if rec := get(t, s.Handler(), "/", nil); rec.Code != http.StatusFound || rec.Header().Get("Location") != "/status" {
		t.Errorf("/: %d %s", rec.Code, rec.Header())
	}
}

// TestAuth: with an authenticator, /metrics and /status need credentials; the probes
// do not.
func TestAuth(t *testing.T) {
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer good-key-0123456789" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	s, _, _ := testServer(t, auth)
	h := s.Handler()
	for _, p := range []string{"/metrics", "/status", "/status?format=json", "/"} {
		if rec := get(t, h, p, nil); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s without credentials: %d", p, rec.Code)
		}
		if rec := get(t, h, p, http.Header{"Authorization": {"Bearer good-key-0123456789"}}); rec.Code >= 400 {
			t.Errorf("%s with credentials: %d", p, rec.Code)
		}
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if rec := get(t, h, p, nil); rec.Code != 200 {
			t.Errorf("%s without credentials: %d", p, rec.Code)
		}
	}
}

// TestListener: Start serves on a real port (metrics included), Fetch and WriteText
// read it, and Close stops it; Close is safe twice and before Start.
func TestListener(t *testing.T) {
	if err := New(Options{Metrics: metrics.New(metrics.Options{})}).Close(); err != nil {
		t.Errorf("close before start: %v", err)
	}
	s, _, _ := testServer(t, nil)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil {
		t.Error("started twice")
	}
	base := "http://" + s.Addr()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"go_goroutines", "process_cpu_seconds_total", `mcp_proxy_upstream_state{state="up",upstream="fast"} 1`,
		`mcp_proxy_build_info{`, `mcp_proxy_client_sessions{era="legacy",transport="stdio"} 1`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	st, err := Fetch(context.Background(), nil, base, "")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteText(&out, st); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"mcp-proxy v9: ready, up 0s\n",
		"config /etc/mcp-proxy/proxy.hcl (sha256 abababababab, loaded ",
		"UPSTREAM  STATE       REQUIRED  TRANSPORT  ERA     TOOLS  PROMPTS  RESOURCES  TEMPLATES  RESTARTS  CALLS  P50  P99  LAST ERROR\n",
		"fast      up          yes       stdio      legacy  11     0        1          1          0         0      -    -\n",
		"opt       restarting  no        http       -       0      0        0          0          1         0      -    -    exec: \"nope\": executable file not found in $PATH\n",
		"off       disabled    no        stdio      -       0",
		"SESSIONS  ERA     TRANSPORT  OPEN\n          legacy  stdio      1\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if _, err := Fetch(context.Background(), nil, base+"/nothing-here", ""); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("fetch of a wrong URL: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("still serving after Close")
	}
}

// TestWaitingForFirstClient: upstreams not started yet (they start with the first
// client) leave the proxy ready, so that a load balancer lets that client in.
func TestWaitingForFirstClient(t *testing.T) {
	m := metrics.New(metrics.Options{})
	m.Upstreams("t")
	eng := &fakeEngine{ups: []router.UpstreamStatus{{Name: "t", State: upstream.StateStarting}}}
	s := New(Options{Engine: eng, Metrics: m, Upstreams: []UpstreamConfig{{Name: "t", Required: true}}})
	rec := get(t, s.Handler(), "/readyz", nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"waiting": [`) {
		t.Errorf("readyz before the first client: %d %s", rec.Code, rec.Body)
	}
	if st := s.Status(); st.Upstreams[0].State != metrics.StateWaiting || !st.Ready || len(st.Waiting) != 1 {
		t.Errorf("status: %+v", st)
	}
	// Its first attempt under way: starting, and not ready until it is up.
	m.UpstreamEvent(upstream.Event{Kind: upstream.EventStarting, Upstream: "t", Time: t0})
	if rec := get(t, s.Handler(), "/readyz", nil); rec.Code != 503 {
		t.Errorf("readyz while starting: %d %s", rec.Code, rec.Body)
	}
	if st := s.Status(); st.Upstreams[0].State != metrics.StateStarting {
		t.Errorf("state while starting: %s", st.Upstreams[0].State)
	}
}

// epEngine is a fakeEngine with endpoints.
type epEngine struct{ *fakeEngine }

func (epEngine) Endpoints() []router.EndpointInfo {
	return []router.EndpointInfo{
		{Name: "review", Path: "/mcp/review", Upstreams: []string{"fast"}, Search: true, Always: []string{"fast__read"}},
		{Name: "ops", Upstreams: []string{"fast", "opt"}},
	}
}

func (epEngine) EndpointTools(name string) ([]router.Tool, bool) {
	if name == "review" {
		return []router.Tool{{Name: "fast__read"}, {Name: "fast__write"}}, true
	}
	return nil, true
}

// TestStatusEndpoints: /status shows each endpoint, where it is served and its
// catalogue, in JSON and in HTML.
func TestStatusEndpoints(t *testing.T) {
	s, eng, _ := testServer(t, nil)
	s.opts.Engine = epEngine{eng}
	rec := get(t, s.Handler(), "/status?format=json", nil)
	var st Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	want := []EndpointStatus{
		{Name: "review", Path: "/mcp/review", Mode: "search", Upstreams: []string{"fast"}, Always: []string{"fast__read"}, Tools: []string{"fast__read", "fast__write"}},
		{Name: "ops", Mode: "all", Upstreams: []string{"fast", "opt"}, Tools: []string{}},
	}
	if !reflect.DeepEqual(st.Endpoints, want) {
		t.Errorf("endpoints %+v", st.Endpoints)
	}
	html := get(t, s.Handler(), "/status", nil).Body.String()
	for _, w := range []string{`id="endpoint-review"`, "<code>/mcp/review</code>", "2 tools", "fast__read, fast__write", "always: fast__read", `id="endpoint-ops"`} {
		if !strings.Contains(html, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	if strings.Contains(get(t, eng2(t), "/status", nil).Body.String(), "Endpoints") {
		t.Error("a proxy without endpoints shows an Endpoints section")
	}
}

func eng2(t *testing.T) http.Handler {
	s, _, _ := testServer(t, nil)
	return s.Handler()
}
