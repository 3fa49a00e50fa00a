package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reloadConfig is one version of TestReload's configuration: an HTTP front end, an
// admin listener, and the upstreams and policy given.
func reloadConfig(addr, adminAddr, upstreams, policy string) string {
	return fmt.Sprintf(`
listen "http" {
  address = %q
}
admin {
  address = %q
}
%s
%s
`, addr, adminAddr, upstreams, policy)
}

// rewrite replaces the file at path as editors do: a new file renamed over it.
func rewrite(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(withTestGrace(content)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// reloadCLI runs `mcp-proxy reload --admin base --json` and returns its exit status
// and outcome.
func reloadCLI(t *testing.T, base string) (int, map[string]any) {
	t.Helper()
	cmd := exec.Command(proxyBin, "reload", "--admin", base, "--json")
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("reload --json printed %q: %v", out, err)
	}
	return code, m
}

func toolSet(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// TestReload changes a running HTTP proxy's configuration under load, through
// `mcp-proxy reload`, SIGHUP and a broken file: an upstream is removed (its call in
// flight is answered), one is added, a rule and a limit change; the client session
// stays, calls to the unaffected upstream never fail, each change is in effect from the
// next call, the rate-limit bucket keeps its tokens, clients are told once per kind, a
// broken file is refused with its file:line and changes nothing, and what needs a
// restart is said.
func TestReload(t *testing.T) {
	t.Parallel()
	addr, adminAddr := freeAddr(t), freeAddr(t)
	base := "http://" + adminAddr
	ups := func(names ...string) string {
		var b strings.Builder
		for _, n := range names {
			b.WriteString(testUpstream(n, n, nil, ""))
		}
		return b.String()
	}
	v1policy := `
policy {
  default = "allow"
  rate_limit "echo-b" {
    rate  = "1/h"
    burst = 2
    tools = ["b__echo"]
  }
}`
	v2policy := `
policy {
  default = "allow"
  rule "no-echo-on-a" {
    effect = "deny"
    tools  = ["a__echo"]
  }
  rate_limit "echo-b" {
    rate  = "1/h"
    burst = 3
    tools = ["b__echo"]
  }
}`
	cfg := writeConfig(t, reloadConfig(addr, adminAddr, ups("a", "b", "gone"), v1policy))
	stderr, cmd := startProxy(t, cfg, true, addr, adminAddr)
	ctx := ctxT(t, 180*time.Second)

	var toolsChanged atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-reload", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { toolsChanged.Add(1) },
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer cs.Close()
	session := cs.ID()
	if got := toolSet(t, ctx, cs); !slices.Contains(got, "gone__echo") || !slices.Contains(got, "b__echo") {
		t.Fatalf("tools before the reload: %v", got)
	}
	callErr := func(name string, args map[string]any) string {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		switch {
		case err != nil:
			return err.Error()
		case res.IsError:
			return "tool error: " + textOf(res)
		}
		return ""
	}
	// One token of b's bucket (burst 2) is used before the reload.
	if e := callErr("b__echo", map[string]any{"n": 1}); e != "" {
		t.Fatalf("b__echo: %s", e)
	}

	// Load on the unaffected upstream "a" all through the reloads: not one call fails.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var calls, failures atomic.Int64
	var firstFailure atomic.Value
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__slow", Arguments: map[string]any{"ms": 5}})
				calls.Add(1)
				if err != nil || res.IsError {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("worker %d call %d: %v %v", w, i, err, res))
				}
			}
		}()
	}
	// A slow call is in flight on "gone" when it is removed: it is answered.
	inflight := make(chan string, 1)
	go func() { inflight <- callErr("gone__slow", map[string]any{"ms": 1500}) }()
	time.Sleep(300 * time.Millisecond)

	// v2: "gone" removed, "c" added, a rule denies a__echo, b's burst is 3.
	rewrite(t, cfg, reloadConfig(addr, adminAddr, ups("a", "b", "c"), v2policy))
	code, out := reloadCLI(t, base)
	if code != 0 || out["outcome"] != "applied" {
		t.Fatalf("reload: exit %d, %v\n%s", code, out, stderr)
	}
	changes := fmt.Sprint(out["changes"])
	for _, want := range []string{"policy", "upstream added: c", "upstream removed: gone"} {
		if !strings.Contains(changes, want) {
			t.Errorf("changes %s lack %q", changes, want)
		}
	}
	if e := <-inflight; e != "" {
		t.Errorf("the call in flight on the removed upstream: %s", e)
	}
	got := toolSet(t, ctx, cs)
	if slices.Contains(got, "gone__echo") || !slices.Contains(got, "c__echo") {
		t.Errorf("tools after the reload: %v", got)
	}
	// A tool a rule denies is hidden: the same answer as for a tool that does not exist.
	if e := callErr("a__echo", nil); !strings.Contains(e, "Unknown tool: a__echo") {
		t.Errorf("a__echo after the rule was added: %q, want it hidden by the policy", e)
	}
	if got := toolSet(t, ctx, cs); slices.Contains(got, "a__echo") {
		t.Errorf("a__echo still listed after the rule denies it: %v", got)
	}
	if e := callErr("c__echo", map[string]any{"n": 1}); e != "" {
		t.Errorf("the added upstream's tool: %s", e)
	}
	// b's bucket kept its tokens: 1 left of 2, +1 for the new burst of 3 would be a
	// fresh bucket's 3. Two more calls pass, the third is refused.
	if e := callErr("b__echo", map[string]any{"n": 2}); e != "" {
		t.Errorf("b__echo, second token: %s", e)
	}
	if e := callErr("b__echo", map[string]any{"n": 3}); !strings.Contains(e, "rate") && !strings.Contains(e, "31006") {
		// With the tokens kept the bucket held 1 (burst 2, one used) when the burst
		// became 3: this call finds it empty.
		t.Errorf("b__echo after two tokens: %q, want rate limited (the bucket kept its tokens)", e)
	}

	// A broken file is refused at its line and changes nothing.
	broken := reloadConfig(addr, adminAddr, ups("a", "b"), v2policy) + "\nupstream \"x\" {\n  command = \n}\n"
	rewrite(t, cfg, broken)
	code, out = reloadCLI(t, base)
	if code != 1 || out["outcome"] != "rejected" || !strings.Contains(fmt.Sprint(out["errors"]), filepath.Base(cfg)+":") {
		t.Errorf("broken file: exit %d, %v", code, out)
	}
	if got := toolSet(t, ctx, cs); !slices.Contains(got, "c__echo") {
		t.Errorf("tools after a refused reload: %v", got)
	}
	_, st := statusCLI(t, base, "")
	if lr, _ := st["last_reload"].(map[string]any); lr == nil || lr["outcome"] != "rejected" {
		t.Errorf("status last_reload: %v", st["last_reload"])
	}

	// SIGHUP back to v1 but with another listen address: the upstreams and policy apply,
	// the listen block needs a restart.
	rewrite(t, cfg, reloadConfig(freeAddr(t), adminAddr, ups("a", "b", "gone"), v1policy))
	before := strings.Count(stderr.String(), `"trigger":"signal"`)
	cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(stderr.String(), `"trigger":"signal"`) == before {
		if time.Now().After(deadline) {
			t.Fatalf("no reload logged after SIGHUP\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	logs := stderr.String()
	last := logs[strings.LastIndex(logs, `"trigger":"signal"`):]
	last = last[:strings.IndexByte(last, '\n')]
	if !strings.Contains(last, `"outcome":"applied"`) || !strings.Contains(last, `"restart_required":["listen"]`) {
		t.Errorf("SIGHUP reload logged %s", last)
	}
	if e := callErr("a__echo", nil); e != "" {
		t.Errorf("a__echo after the rule was removed again: %s", e)
	}
	if got := toolSet(t, ctx, cs); !slices.Contains(got, "gone__echo") || slices.Contains(got, "c__echo") {
		t.Errorf("tools after SIGHUP: %v", got)
	}
	close(stop)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("%d of %d calls to the unaffected upstream failed during the reloads; first: %v", n, calls.Load(), firstFailure.Load())
	}
	if cs.ID() != session {
		t.Errorf("the client session changed: %q → %q", session, cs.ID())
	}
	// One list_changed per reload that changed the tools (two), coalesced; the SDK may
	// see them a moment later.
	time.Sleep(500 * time.Millisecond)
	if n := toolsChanged.Load(); n < 2 || n > 3 {
		t.Errorf("%d tools/list_changed notifications for two reloads that changed the tools", n)
	}
	m := scrape(t, base, "")
	for series, want := range map[string]float64{
		`mcp_proxy_config_reloads_total{outcome="applied"}`:  2,
		`mcp_proxy_config_reloads_total{outcome="rejected"}`: 1,
		`mcp_proxy_config_last_reload_successful`:            1,
	} {
		if m[series] != want {
			t.Errorf("%s = %v, want %v", series, m[series], want)
		}
	}
	t.Logf("%d calls to the unaffected upstream during three reloads, %d failed", calls.Load(), failures.Load())
}

// TestReloadWatchStdio: a stdio proxy with proxy { watch = true } picks up an upstream
// added to its file, and its client is told.
func TestReloadWatchStdio(t *testing.T) {
	t.Parallel()
	body := func(extra string) string {
		return "proxy {\n  watch = true\n}\n" + testUpstream("a", "a", nil, "") + extra
	}
	cfg := writeConfig(t, body(""))
	changed := make(chan struct{}, 4)
	cs, stderr := connectSDK(t, cfg, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}, "")
	ctx := ctxT(t, 60*time.Second)
	if got := toolSet(t, ctx, cs); slices.Contains(got, "w__echo") {
		t.Fatalf("tools before: %v", got)
	}
	rewrite(t, cfg, body(testUpstream("w", "w", nil, "")))
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatalf("no tools/list_changed after the file changed\n%s", stderr)
	}
	if got := toolSet(t, ctx, cs); !slices.Contains(got, "w__echo") {
		t.Fatalf("tools after the watched file changed: %v\n%s", got, stderr)
	}
	if !strings.Contains(stderr.String(), `"trigger":"watch"`) {
		t.Errorf("the reload was not logged as the watch's\n%s", stderr)
	}
}

// TestReloadWatchTurnedOnAndOff: a proxy started without proxy { watch } does not poll
// its file; a SIGHUP reload that turns watch on makes it follow the file from then on, and
// a watched change that turns watch off stops it again.
func TestReloadWatchTurnedOnAndOff(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	body := func(watch bool, ups ...string) string {
		s := fmt.Sprintf("listen \"http\" {\n  address = %q\n}\nproxy {\n  watch = %v\n}\n", addr, watch)
		for _, u := range ups {
			s += testUpstream(u, u, nil, "")
		}
		return s
	}
	cfg := writeConfig(t, body(false, "a"))
	stderr, cmd := startProxy(t, cfg, true, addr)
	reloads := func(trigger string) int { return strings.Count(stderr.String(), `"trigger":"`+trigger+`"`) }

	// Not watched: a change waits for a signal.
	rewrite(t, cfg, body(true, "a", "b"))
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 60*time.Second, "the SIGHUP reload", func() bool { return reloads("signal") == 1 }, stderr)
	if reloads("watch") != 0 {
		t.Fatalf("a reload by the watch before watch was on\n%s", stderr)
	}
	// Watched now: the next change is picked up on its own, and turns watch off.
	rewrite(t, cfg, body(false, "a", "b", "c"))
	waitFor(t, 60*time.Second, "the watch's reload", func() bool { return reloads("watch") == 1 }, stderr)
	// Not watched again: a change stays unread for several polls.
	rewrite(t, cfg, body(false, "a"))
	time.Sleep(4 * watchPoll)
	if n := reloads("watch"); n != 1 {
		t.Errorf("%d reloads by the watch after watch was turned off, want 1\n%s", n, stderr)
	}
	c := &httpWire{t: t, url: "http://" + addr + "/mcp"}
	ctx := ctxT(t, 60*time.Second)
	c.initialize(ctx, stderr)
	// What the watch applied stays: a, b and c, though the file now names a alone.
	var listed string
	waitFor(t, 30*time.Second, "a, b and c listed", func() bool {
		listed = string(c.post(ctx, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil).body)
		return strings.Contains(listed, "a__echo") && strings.Contains(listed, "b__echo") && strings.Contains(listed, "c__echo")
	}, stderr)
}

// watchPoll is how often a watching proxy polls its file (watchInterval).
const watchPoll = time.Second

// TestReloadAuthAndPlugins: a reload that changes an API key and a plugin's config
// applies both from the next request, to the same client session: the old key is
// refused, the new one accepted, and the plugin answers with its new configuration;
// then one that makes a plugin fail to start is rejected and changes nothing.
func TestReloadAuthAndPlugins(t *testing.T) {
	t.Parallel()
	addr, adminAddr := freeAddr(t), freeAddr(t)
	newKey := "alice-new-key-0123456789abcdef"
	version := func(key, tag string, extra string) string {
		return fmt.Sprintf(`
listen "http" {
  address = %q
}
admin {
  address = %q
}
auth {
  api_key "alice" {
    token = %q
  }
}
`, addr, adminAddr, key) + testUpstream("t", "t", nil, "") + testPlugin("tagger", nil, "", fmt.Sprintf("tag = %q", tag)) + extra
	}
	cfg := writeConfig(t, version(aliceKey, "v1", ""))
	stderr, _ := startProxy(t, cfg, true, addr, adminAddr)
	ctx := ctxT(t, 120*time.Second)
	c := &httpWire{t: t, url: "http://" + addr + "/mcp"}
	c.initializeAs(ctx, aliceKey)
	echo := func(key string) wireReply {
		return c.post(ctx, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t__echo","arguments":{"n":1}}}`, bearer(key))
	}
	if r := echo(aliceKey); !strings.Contains(string(r.body), "v1") {
		t.Fatalf("before the reload: %d %s", r.status, r.body)
	}
	reload := func(key string) map[string]any {
		t.Helper()
		status, body := adminPost(t, "http://"+adminAddr, "/reload", key)
		var out map[string]any
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("/reload answered %d %q", status, body)
		}
		return out
	}

	rewrite(t, cfg, version(newKey, "v2", ""))
	out := reload(aliceKey) // the request is authenticated before the keys change
	if out["outcome"] != "applied" || !strings.Contains(fmt.Sprint(out["changes"]), "auth") || !strings.Contains(fmt.Sprint(out["changes"]), "plugins") {
		t.Fatalf("reload: %v\n%s", out, stderr)
	}
	if r := echo(aliceKey); r.status != 401 {
		t.Errorf("the old key after the reload: %d %s", r.status, r.body)
	}
	r := echo(newKey)
	if r.status != 200 || !strings.Contains(string(r.body), "v2") || strings.Contains(string(r.body), "v1") {
		t.Errorf("the new key, same session, after the reload: %d %s", r.status, r.body)
	}

	// A plugin that cannot start rejects the whole reload: the key stays the new one.
	rewrite(t, cfg, version("third-key-0123456789abcdefgh", "v3", strings.Replace(testPlugin("bad", nil, "", ""), testpluginBin, testpluginBin+".missing", 1)))
	out = reload(newKey)
	if out["outcome"] != "rejected" || !strings.Contains(fmt.Sprint(out["errors"]), "plugins") {
		t.Errorf("reload with a plugin that cannot start: %v", out)
	}
	if r := echo(newKey); r.status != 200 || !strings.Contains(string(r.body), "v2") {
		t.Errorf("after the rejected reload: %d %s", r.status, r.body)
	}
}

// adminPost POSTs to path of the admin listener at base with an optional bearer key.
func adminPost(t *testing.T, base, path, key string) (int, []byte) {
	t.Helper()
	return adminDo(t, http.MethodPost, base, path, key)
}
