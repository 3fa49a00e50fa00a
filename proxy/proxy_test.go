package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/admin"
	"github.com/mcp-proxy/mcp-proxy/auth"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
	"github.com/mcp-proxy/mcp-proxy/proxy"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// wait bounds every wait of these tests; reached only when something is broken.
const wait = 20 * time.Second

// logLines is a proxy's log: every JSON line it wrote, and a way to wait for one.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
	raw   bytes.Buffer
	grew  chan struct{}
}

func newLogLines() *logLines { return &logLines{grew: make(chan struct{}, 1)} }

func (l *logLines) Write(p []byte) (int, error) {
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		return 0, fmt.Errorf("a log line that is not JSON: %q", p)
	}
	l.mu.Lock()
	l.lines = append(l.lines, m)
	l.raw.Write(p)
	l.mu.Unlock()
	select {
	case l.grew <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.raw.String()
}

// find returns the first line, at or after the from-th, whose message is msg and whose
// fields include those of want, and its index.
func (l *logLines) find(from int, msg string, want map[string]any) (map[string]any, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for i := from; i < len(l.lines); i++ {
		m := l.lines[i]
		if m["message"] != msg {
			continue
		}
		for k, v := range want {
			if fmt.Sprint(m[k]) != fmt.Sprint(v) {
				continue next
			}
		}
		return m, i
	}
	return nil, -1
}

func (l *logLines) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// waitFor waits for the first line from the from-th on with message msg and the fields
// of want.
func (l *logLines) waitFor(t *testing.T, from int, msg string, want map[string]any) map[string]any {
	t.Helper()
	deadline := time.After(wait)
	for {
		if m, _ := l.find(from, msg, want); m != nil {
			return m
		}
		select {
		case <-l.grew:
		case <-deadline:
			t.Fatalf("no log line %q %v after %s; the log:\n%s", msg, want, wait, l)
		}
	}
}

func (l *logLines) logger() zerolog.Logger { return zerolog.New(l).With().Timestamp().Logger() }

func writeFile(t *testing.T, path, src string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
}

// counting is a middleware that counts the calls it passes on.
type counting struct{ n atomic.Int64 }

func (c *counting) middleware(next router.Handler) router.Handler {
	return func(ctx context.Context, call *router.Call, reply router.Reply) {
		c.n.Add(1)
		next(ctx, call, reply)
	}
}

// mcpClient is a Streamable HTTP client of one legacy session.
type mcpClient struct {
	t     *testing.T
	url   string
	token string
	sid   string
}

// post sends one JSON-RPC message and returns the status and the JSON-RPC message
// answered (the event stream's data, or the JSON body).
func (c *mcpClient) post(body string) (int, map[string]json.RawMessage) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		c.sid = sid
	}
	b, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(b))
		b = nil
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id"`) {
				b = []byte(d)
			}
		}
	}
	var m map[string]json.RawMessage
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatalf("answer %d %q: %v", resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, m
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},` +
	`"clientInfo":{"name":"test","version":"1"}}}`

func greetCall(id int, name string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"greeter__greet","arguments":{"name":%q}}}`, id, name)
}

// getJSON asks the admin listener for path with the token, into v.
func getJSON(t *testing.T, method, url, token string, v any) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil && resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// TestListenAndServe embeds a proxy served over HTTP with an auth block and an admin
// listener, an in-process upstream and a middleware: a client authenticates and calls
// the upstream's tool through the middleware; the admin listener reports the upstream
// and reloads the file (a policy that denies the tool); Reload applies a configuration
// made in memory (the policy gone) and rejects one that takes the in-process upstream's
// name; cancelling the context drains and closes the proxy.
func TestListenAndServe(t *testing.T) {
	leaktest.Check(t, 10*time.Second)
	dir := t.TempDir()
	path := filepath.Join(dir, "proxy.hcl")
	const token = "test-token-0123456789abcdef"
	base := fmt.Sprintf(`listen "http" {
  address = "127.0.0.1:0"
  path    = "/mcp"
}
auth {
  api_key "ops" {
    sha256 = %q
  }
}
admin {
  address = "127.0.0.1:0"
}
upstream "spare" {
  command  = ["/bin/true"]
  disabled = true
}
`, auth.HashToken(token))
	writeFile(t, path, base)
	cfg, err := proxy.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := newLogLines()
	var mw counting
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := proxy.New(ctx, cfg, proxy.WithLogger(logs.logger()), proxy.WithVersion("9.9.9"),
		proxy.WithUpstream("greeter", dialGreeter), proxy.WithMiddleware(mw.middleware))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ServeStdio(ctx, strings.NewReader(""), io.Discard); err == nil || !strings.Contains(err.Error(), "listen block") {
		t.Errorf("ServeStdio of a proxy with a listen block: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.ListenAndServe(ctx) }()
	serving := logs.waitFor(t, 0, "mcp-proxy serving on HTTP", map[string]any{"version": "9.9.9"})
	adminAt := logs.waitFor(t, 0, "admin listener serving /metrics, /healthz, /readyz, /status", nil)
	url, adminURL := "http://"+serving["address"].(string)+"/mcp", "http://"+adminAt["address"].(string)

	if code, _ := (&mcpClient{t: t, url: url}).post(initialize); code != http.StatusUnauthorized {
		t.Errorf("initialize without the key: %d, want 401", code)
	}
	c := &mcpClient{t: t, url: url, token: token}
	if code, m := c.post(initialize); code != http.StatusOK || !strings.Contains(string(m["result"]), `"version":"9.9.9"`) {
		t.Fatalf("initialize: %d %s %s\n%s", code, m["result"], m["error"], logs)
	}
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if _, m := c.post(greetCall(2, "Ada")); !strings.Contains(string(m["result"]), "Hello, Ada!") {
		t.Fatalf("tools/call: %s %s\n%s", m["result"], m["error"], logs)
	}
	if n := mw.n.Load(); n != 1 {
		t.Errorf("the middleware saw %d calls, want 1", n)
	}

	var st admin.Status
	if code := getJSON(t, http.MethodGet, adminURL+"/status?format=json", token, &st); code != http.StatusOK {
		t.Fatalf("/status: %d", code)
	}
	var names []string
	for _, u := range st.Upstreams {
		names = append(names, u.Name)
	}
	if strings.Join(names, " ") != "spare greeter" || st.Version != "9.9.9" {
		t.Errorf("status: version %q, upstreams %v; want 9.9.9, [spare greeter]", st.Version, names)
	}

	// The file gets a policy that denies the tool; the admin listener reloads it.
	writeFile(t, path, base+`policy {
  default = "allow"
  rule "no-greeting" {
    effect = "deny"
    tools  = ["greeter__greet"]
  }
}
`)
	var out admin.Reload
	if code := getJSON(t, http.MethodPost, adminURL+"/reload", token, &out); code != http.StatusOK ||
		out.Outcome != admin.ReloadApplied || strings.Join(out.Changes, ",") != "policy" {
		t.Fatalf("/reload: %d %+v", code, out)
	}
	if _, m := c.post(greetCall(3, "Ada")); m["error"] == nil {
		t.Errorf("tools/call denied by the reloaded policy: %s", m["result"])
	}

	// In memory: the policy goes again; the in-process upstream stays.
	back, err := proxy.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	back.Policy = nil
	if r := p.Reload(ctx, back); r.Outcome != admin.ReloadApplied || r.Trigger != "api" {
		t.Fatalf("Reload: %+v", r)
	}
	if _, m := c.post(greetCall(4, "Grace")); !strings.Contains(string(m["result"]), "Hello, Grace!") {
		t.Errorf("tools/call after Reload: %s %s", m["result"], m["error"])
	}
	clash := *back
	clash.Upstreams = append(clash.Upstreams, config.Upstream{Name: "greeter", Command: []string{"/bin/true"}})
	if r := p.Reload(ctx, &clash); r.Outcome != admin.ReloadRejected || len(r.Errors) == 0 || !strings.Contains(r.Errors[0], `"greeter"`) {
		t.Errorf("Reload taking the in-process upstream's name: %+v", r)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ListenAndServe: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("ListenAndServe did not return after its context ended")
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close after serving: %v", err)
	}
	if err := p.ListenAndServe(context.Background()); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("ListenAndServe of a closed proxy: %v", err)
	}
}

// TestNewRefuses: bad options, an in-process upstream whose name a block has, nothing
// to serve, and serving a proxy the wrong way fail with errors that say so, leaving
// nothing running.
func TestNewRefuses(t *testing.T) {
	leaktest.Check(t, 10*time.Second)
	ctx := context.Background()
	withBlock := config.Defaults()
	withBlock.Upstreams = []config.Upstream{{Name: "greeter", Command: []string{"/bin/true"}}}
	for _, tc := range []struct {
		name string
		cfg  *config.Config
		opts []proxy.Option
		want string
	}{
		{"bad name", nil, []proxy.Option{proxy.WithUpstream("a b", dialGreeter)}, `in-process upstream "a b": a name is`},
		{"no dial", nil, []proxy.Option{proxy.WithUpstream("a", nil)}, `in-process upstream "a": no dial function`},
		{"twice", nil, []proxy.Option{proxy.WithUpstream("a", dialGreeter), proxy.WithUpstream("a", dialGreeter)}, `in-process upstream "a": given twice`},
		{"name of a block", withBlock, []proxy.Option{proxy.WithUpstream("greeter", dialGreeter)}, `the configuration has an upstream block of that name`},
		{"no upstreams", nil, nil, "no upstreams"},
	} {
		p, err := proxy.New(ctx, tc.cfg, tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, %v; want an error containing %q", tc.name, p, err, tc.want)
		}
	}

	p, err := proxy.New(ctx, nil, proxy.WithUpstream("greeter", dialGreeter), proxy.Oneshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ServeStdio(ctx, strings.NewReader(""), io.Discard); err == nil || !strings.Contains(err.Error(), "Oneshot") {
		t.Errorf("ServeStdio of a Oneshot proxy: %v", err)
	}
	if r := p.Reload(ctx, nil); r.Outcome != admin.ReloadRejected || !strings.Contains(strings.Join(r.Errors, " "), "in memory") {
		t.Errorf("Reload of the file of a proxy made in memory: %+v", r)
	}
	p.Close()

	p, err = proxy.New(ctx, nil, proxy.WithUpstream("greeter", dialGreeter))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ListenAndServe(ctx); err == nil || !strings.Contains(err.Error(), "no listen block") {
		t.Errorf("ListenAndServe without a listen block: %v", err)
	}
	if err := p.ServeStdio(ctx, strings.NewReader(""), io.Discard); err != nil {
		t.Errorf("ServeStdio of a client that goes at once: %v", err)
	}
	if err := p.ServeStdio(ctx, strings.NewReader(""), io.Discard); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("ServeStdio again: %v", err)
	}
}

// TestLoad: an HCL file, a client's JSON file, and broken ones of each: the diagnostics
// at file:line go to the writer, the error says the file is invalid.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	hcl := filepath.Join(dir, "proxy.hcl")
	writeFile(t, hcl, "upstream \"a\" {\n  command = [\"/bin/true\"]\n}\n")
	if cfg, err := proxy.Load(hcl, nil); err != nil || len(cfg.Upstreams) != 1 || cfg.Filename != hcl {
		t.Errorf("Load(%s) = %+v, %v", hcl, cfg, err)
	}
	writeFile(t, hcl, "upstream \"a\" {\n  command = \n}\n")
	var diags strings.Builder
	if cfg, err := proxy.Load(hcl, &diags); err == nil || cfg != nil || err.Error() != hcl+": invalid configuration" ||
		!strings.Contains(diags.String(), "proxy.hcl:") {
		t.Errorf("Load of a broken file = %v, %v; diagnostics %q", cfg, err, diags.String())
	}

	claude := filepath.Join(dir, "claude_desktop_config.json")
	writeFile(t, claude, `{"mcpServers":{"files":{"command":"/bin/true","args":["x"]}}}`)
	if cfg, err := proxy.Load(claude, nil); err != nil || len(cfg.Upstreams) != 1 || cfg.Upstreams[0].Name != "files" {
		t.Errorf("Load(%s) = %+v, %v", claude, cfg, err)
	}
	writeFile(t, claude, `{"mcpServers":{"files":{"args":["x"]}}}`)
	diags.Reset()
	if cfg, err := proxy.Load(claude, &diags); err == nil || cfg != nil || !strings.Contains(err.Error(), "invalid configuration") {
		t.Errorf("Load of a client file with a server without a command = %v, %v; diagnostics %q", cfg, err, diags.String())
	}
}

// TestVisibleTools: the catalogue as a principal sees it under the policy, with the
// groups of the API key of its name, or those given.
func TestVisibleTools(t *testing.T) {
	p := startGreeterOneshot(t, fmt.Sprintf(`auth {
  api_key "bob" {
    sha256 = %q
    groups = ["guests"]
  }
}
policy {
  default = "allow"
  rule "no-guests" {
    effect = "deny"
    tools  = ["greeter__greet"]
    groups = ["guests"]
  }
}
upstream "spare" {
  command  = ["/bin/true"]
  disabled = true
}
`, auth.HashToken("bob-token-0123456789abcdef")))
	for _, tc := range []struct {
		name   string
		groups []string
		want   int
	}{{"alice", nil, 1}, {"bob", nil, 0}, {"alice", []string{"guests"}, 0}} {
		if got := p.VisibleTools(tc.name, tc.groups...); len(got) != tc.want {
			t.Errorf("VisibleTools(%s, %v) = %v, want %d tools", tc.name, tc.groups, got, tc.want)
		}
	}
}

// TestVisibleToolsByIdentity: `tools --as` takes an identity, and a bare name the
// configuration establishes one way only as that identity, so that a rule about the API
// key bob applies to "bob" and "api_key:bob", not to the token subject "jwt:bob"; a name
// two ways could establish is ambiguous.
func TestVisibleToolsByIdentity(t *testing.T) {
	p := startGreeterOneshot(t, fmt.Sprintf(`proxy {
  principal = "carol"
}
auth {
  resource = "https://mcp.example.com/mcp"
  api_key "bob" {
    sha256 = %q
  }
  jwt {
    issuer   = "https://idp.example.com"
    jwks_url = "https://idp.example.com/jwks"
  }
}
policy {
  default = "allow"
  rule "no-key-bob" {
    effect     = "deny"
    tools      = ["greeter__greet"]
    principals = ["api_key:bob", "stdio:carol"]
  }
}
upstream "spare" {
  command  = ["/bin/true"]
  disabled = true
}
`, auth.HashToken("bob-token-0123456789abcdef")))
	for name, want := range map[string]int{"api_key:bob": 0, "jwt:bob": 1, "jwt:https://idp.example.com#bob": 1,
		"stdio:carol": 0, "jwt:carol": 1, "dave": 1} {
		if got := p.VisibleTools(name); len(got) != want {
			t.Errorf("VisibleTools(%s) = %v, want %d tools", name, got, want)
		}
	}
	for name, want := range map[string]string{
		"bob":         "api_key:bob jwt:https://idp.example.com#bob",
		"carol":       "jwt:https://idp.example.com#carol stdio:carol",
		"dave":        "jwt:https://idp.example.com#dave",
		"api_key:bob": "api_key:bob",
	} {
		if got := strings.Join(p.PrincipalIdentities(name), " "); got != want {
			t.Errorf("PrincipalIdentities(%s) = %q, want %q", name, got, want)
		}
	}
}

// startGreeterOneshot starts a one-shot proxy on the configuration text src, with the
// in-process greeter as its upstream "greeter"; the test's end closes it.
func startGreeterOneshot(t *testing.T, src string) *proxy.Proxy {
	t.Helper()
	cfg, diags := config.Parse([]byte(src), "visible.hcl", ".")
	if diags.HasErrors() {
		t.Fatal(config.FormatDiagnostics(diags))
	}
	ctx := context.Background()
	p, err := proxy.New(ctx, cfg, proxy.WithUpstream("greeter", dialGreeter), proxy.Oneshot())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}
