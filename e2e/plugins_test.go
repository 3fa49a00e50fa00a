package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testPlugin is a plugin block running the test plugin with flags, matchers and config.
func testPlugin(label string, flags []string, attrs, config string) string {
	parts := []string{q(testpluginBin)}
	for _, f := range flags {
		parts = append(parts, q(f))
	}
	return fmt.Sprintf("plugin %q {\n  command = [%s]\n  %s\n  config {\n    %s\n  }\n}\n", label, strings.Join(parts, ", "), attrs, config)
}

// callsOf reads a test plugin's calls file: one "hook name pid [principal groups
// arguments meta]" line per hook call.
func callsOf(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func callErrCode(err error) int64 {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return werr.Code
	}
	return 0
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// TestPluginHooks runs two plugins in one chain through the real proxy: before hooks in
// file order (a rewrites the arguments, a denies), after hooks in reverse order (the text
// ends "BA"), the catalogue hook (hides and describes), the audit record of what each
// decided, and calls no plugin selects never reaching a plugin.
func TestPluginHooks(t *testing.T) {
	dir := t.TempDir()
	callsA, callsB, audit := filepath.Join(dir, "a.calls"), filepath.Join(dir, "b.calls"), filepath.Join(dir, "audit.jsonl")
	cfg := writeConfig(t, testUpstream("t", "t", nil, "")+everythingUpstream("ev", "ev")+
		testPlugin("a", []string{"-hooks", "before,after,catalogue"}, `tools = ["t__*"]`,
			fmt.Sprintf("tag = \"A\"\n set_args = { added = \"by-a\" }\n deny = \"env\"\n hide = [\"crash\"]\n describe = \"via a\"\n structure = true\n calls_file = %s", q(callsA)))+
		testPlugin("b", nil, `tools = ["t__echo"]`, fmt.Sprintf("tag = \"B\"\n calls_file = %s", q(callsB)))+
		fmt.Sprintf("audit {\n  file = %s\n}\n", q(audit)))
	cs, stderr := connectSDK(t, cfg, nil, "")
	ctx := ctxT(t, 60*time.Second)

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	descs := map[string]string{}
	for _, tl := range tools.Tools {
		descs[tl.Name] = tl.Description
	}
	if _, ok := descs["t__crash"]; ok {
		t.Errorf("t__crash is listed although plugin a hides it")
	}
	if descs["t__echo"] != "via a" {
		t.Errorf("t__echo description = %q, want the catalogue hook's", descs["t__echo"])
	}
	if d, ok := descs["ev__test_simple_text"]; !ok || d == "via a" {
		t.Errorf("ev__test_simple_text (not selected by a) = %q, %v; want its own description", d, ok)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"x": 1}})
	if err != nil {
		t.Fatalf("t__echo: %v\n%s", err, stderr)
	}
	text := textOf(res)
	if !strings.Contains(text, `"added":"by-a"`) || !strings.Contains(text, `"x":1`) {
		t.Errorf("t__echo text %q: plugin a's rewritten arguments did not reach the upstream", text)
	}
	if !strings.HasSuffix(text, "BA") {
		t.Errorf("t__echo text %q: after hooks must run in reverse file order (b, then a)", text)
	}
	if sc := structured(t, res); sc["tag"] != "A" || sc["added"] != "by-a" {
		t.Errorf("structuredContent %v: want plugin a's tag over the upstream's echo", sc)
	}

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__env", Arguments: map[string]any{"name": "HOME"}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -31007 || !strings.Contains(werr.Message, "plugin a") || !strings.Contains(werr.Message, "not allowed by testplugin") {
		t.Errorf("t__env: got %v, want -31007 from plugin a", err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__crash"}); callErrCode(err) != -32602 {
		t.Errorf("t__crash (hidden): got %v, want unknown tool", err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_simple_text"})
	if err != nil || strings.ContainsAny(textOf(res), "AB") && strings.HasSuffix(textOf(res), "A") {
		t.Errorf("ev__test_simple_text: %v %q: no plugin selects it", err, textOf(res))
	}
	for _, line := range append(callsOf(t, callsA), callsOf(t, callsB)...) {
		if strings.Contains(line, "ev__") {
			t.Errorf("a plugin was called for a call it does not select: %q", line)
		}
	}
	if got := callsOf(t, callsB); len(got) != 2 || !strings.HasPrefix(got[0], "before t__echo") || !strings.HasPrefix(got[1], "after t__echo") {
		t.Errorf("plugin b's calls = %q, want its before and after hook for t__echo only", got)
	}

	// The audit record of the echo call holds what both plugins decided, in order.
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	type record struct {
		Name     string `json:"name"`
		Decision string `json:"decision"`
		Rule     string `json:"rule"`
		Plugins  []struct {
			Plugin, Hook, Decision string
			Notes                  map[string]any
		} `json:"plugins"`
	}
	var recs []record
	deadline := time.Now().Add(10 * time.Second)
	for len(recs) < 4 && time.Now().Before(deadline) {
		recs = recs[:0]
		f, _ := os.ReadFile(audit)
		sc := bufio.NewScanner(strings.NewReader(string(f)))
		for sc.Scan() {
			var r record
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				recs = append(recs, r)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	var seq []string
	var denied bool
	for _, r := range recs {
		if r.Name == "t__echo" {
			for _, p := range r.Plugins {
				seq = append(seq, p.Plugin+":"+p.Hook+":"+p.Decision)
			}
		}
		if r.Name == "t__env" && r.Decision == "deny" && r.Rule == "plugin:a" {
			denied = true
		}
	}
	want := "a:before:rewrite b:before:allow b:after:rewrite a:after:rewrite"
	if strings.Join(seq, " ") != want {
		t.Errorf("audit of t__echo records plugins %q, want %q (records: %+v)", strings.Join(seq, " "), want, recs)
	}
	if !denied {
		t.Errorf("audit has no deny record by plugin:a for t__env: %+v", recs)
	}
}

// TestPluginFailures: a plugin that crashes, hangs or answers badly refuses the call
// under failure = "closed" (-31008) and lets it through unchanged under "open"; the
// proxy keeps serving everything else, and answers each call exactly once.
func TestPluginFailures(t *testing.T) {
	cfg := writeConfig(t, testUpstream("t", "t", nil, "")+
		testPlugin("crash_closed", nil, `tools = ["t__echo"]`, `crash = "before"`+"\n tag = \"X\"")+
		testPlugin("crash_open", nil, `tools = ["t__cwd"]`+"\n failure = \"open\"", `crash = "after"`+"\n tag = \"X\"")+
		testPlugin("hang_closed", nil, `tools = ["t__env"]`+"\n timeout = \"300ms\"", `hang = "after"`)+
		testPlugin("hang_open", nil, `tools = ["t__slow"]`+"\n timeout = \"300ms\"\n failure = \"open\"", `hang = "before"`+"\n tag = \"X\"")+
		testPlugin("bad_closed", nil, `tools = ["t__big"]`, `bad = "args"`)+
		testPlugin("bad_result", nil, `tools = ["t__fail"]`+"\n failure = \"open\"", `bad = "result"`))
	cs, stderr := connectSDK(t, cfg, nil, "")
	ctx := ctxT(t, 90*time.Second)
	for round := 0; round < 2; round++ { // the second round meets restarted (or still restarting) plugins
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"a": 1}}); callErrCode(err) != -31008 {
			t.Errorf("round %d: crashing plugin, failure closed: got %v, want -31008", round, err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__cwd"})
		if err != nil || strings.HasSuffix(textOf(res), "X") {
			t.Errorf("round %d: crashing plugin, failure open: %v %q, want the upstream's answer unchanged", round, err, textOf(res))
		}
		start := time.Now()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__env", Arguments: map[string]any{"name": "HOME"}}); callErrCode(err) != -31008 {
			t.Errorf("round %d: hanging plugin, failure closed: got %v, want -31008", round, err)
		}
		t.Logf("round %d: hanging after hook refused after %v", round, time.Since(start))
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__slow", Arguments: map[string]any{"ms": 1}})
		if err != nil || res.IsError {
			t.Errorf("round %d: hanging plugin, failure open: %v %+v", round, err, res)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__big", Arguments: map[string]any{"bytes": 10}}); callErrCode(err) != -31008 {
			t.Errorf("round %d: plugin rewriting to a non-object, failure closed: got %v, want -31008", round, err)
		}
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__fail"}); err != nil || res == nil {
			t.Errorf("round %d: plugin answering a non-object result, failure open: %v, want the upstream's answer", round, err)
		}
	}
	log := stderr.String()
	for _, want := range []string{`"plugin":"crash_closed"`, "plugin process exited; restarting it", "did not answer within 300ms", "its arguments are not a JSON object"} {
		if !strings.Contains(log, want) {
			t.Errorf("proxy log lacks %q", want)
		}
	}
}

// pidsOf returns the pids a test plugin wrote in its calls file.
func pidsOf(t *testing.T, path string) []int {
	var out []int
	for _, l := range callsOf(t, path) {
		f := strings.Fields(l)
		if len(f) >= 3 {
			if p, err := strconv.Atoi(f[2]); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// TestPluginRestartAfterKill kills a plugin with SIGKILL: calls meanwhile fail closed,
// the plugin is restarted with backoff, and calls are hooked again.
func TestPluginRestartAfterKill(t *testing.T) {
	calls := filepath.Join(t.TempDir(), "calls")
	cfg := writeConfig(t, testUpstream("t", "t", nil, "")+
		testPlugin("k", nil, `tools = ["t__echo"]`, fmt.Sprintf("tag = \"K\"\n calls_file = %s", q(calls))))
	cs, stderr := connectSDK(t, cfg, nil, "")
	ctx := ctxT(t, 60*time.Second)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{}})
	if err != nil || !strings.HasSuffix(textOf(res), "K") {
		t.Fatalf("first call: %v %q", err, textOf(res))
	}
	pids := pidsOf(t, calls)
	if len(pids) == 0 {
		t.Fatal("the plugin recorded no pid")
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	var refused int
	for {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{}})
		if err == nil && strings.HasSuffix(textOf(res), "K") {
			break
		}
		if err != nil && callErrCode(err) != -31008 {
			t.Fatalf("while the plugin is down: %v, want -31008 (failure closed)", err)
		}
		refused++
		if time.Now().After(deadline) {
			t.Fatalf("the plugin was not restarted within 20s\n%s", stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	now := pidsOf(t, calls)
	if last := now[len(now)-1]; last == pids[0] {
		t.Errorf("hooked by pid %d again, the killed one", last)
	}
	if !strings.Contains(stderr.String(), "plugin restarted") {
		t.Errorf("no restart in the log")
	}
	t.Logf("%d calls refused while the plugin restarted", refused)
}

// descendants lists every process below pid.
func descendants(pid int) []int {
	var out []int
	for _, c := range childPIDs(pid) {
		out = append(out, c)
		out = append(out, descendants(c)...)
	}
	return out
}

// TestPluginProcessesEnd: no plugin process outlives the proxy, whether it exits
// normally (its client closed stdin) or is killed with SIGKILL.
func TestPluginProcessesEnd(t *testing.T) {
	cfg := writeConfig(t, testUpstream("t", "t", nil, "")+
		testPlugin("p1", nil, `tools = ["t__echo"]`, `tag = "1"`)+testPlugin("p2", nil, `tools = ["t__echo"]`, `tag = "2"`))
	for _, kill := range []bool{false, true} {
		cmd, stderr := proxyCmd(cfg)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var plugins []int
		for deadline := time.Now().Add(30 * time.Second); len(plugins) < 2 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			plugins = plugins[:0]
			for _, p := range descendants(cmd.Process.Pid) {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); strings.Contains(string(b), "testplugin") {
					plugins = append(plugins, p)
				}
			}
		}
		if len(plugins) != 2 {
			_ = cmd.Process.Kill()
			t.Fatalf("want 2 plugin processes under the proxy, found %v\n%s", plugins, stderr)
		}
		if kill {
			_ = cmd.Process.Signal(syscall.SIGKILL)
		} else {
			_ = stdin.Close()
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if !kill && err != nil {
				t.Errorf("the proxy exited with %v\n%s", err, stderr)
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("the proxy did not exit")
		}
		assertGone(t, plugins)
		checkStderr(t, stderr)
	}
}

func runProxy(args ...string) (string, string, int) {
	cmd := exec.Command(proxyBin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return out.String(), errb.String(), code
}

// TestPluginValidate: validate and run check a plugin as they check the rest of the
// file: its config block against its schema at file:line with suggestions, its own
// configuration errors, its sha256, and plugins that describe themselves wrongly or
// speak another protocol version.
func TestPluginValidate(t *testing.T) {
	sum := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	good := sum(testpluginBin)
	bad := strings.Repeat("0", 64)
	cases := []struct {
		name   string
		block  string
		code   int
		stderr []string
	}{
		{"ok", testPlugin("p", nil, "sha256 = "+q(good), `tag = "x"`), 0, nil},
		{"unverified", testPlugin("p", nil, "", `tag = "x"`), 0, []string{"warning: Plugin not verified", good}},
		{"unknown attribute", testPlugin("p", nil, "", `tga = "x"`), 1, []string{"proxy.hcl:10:5: error: Unsupported argument", `Did you mean "tag"?`}},
		{"wrong type", testPlugin("p", nil, "", `limit = "many"`), 1, []string{"proxy.hcl:10:", "a number is required"}},
		{"plugin's own check", testPlugin("p", nil, "", `limit = 11`), 1, []string{"proxy.hcl:10:5: error: Limit too high", "at most 10"}},
		{"checksum", testPlugin("p", nil, "sha256 = "+q(bad), `tag = "x"`), 1, []string{"proxy.hcl:8:", "sha256", "refusing to start it"}},
		{"no name", testPlugin("p", []string{"-describe", "noname"}, "", ""), 1, []string{"Plugin described itself wrongly", "no name"}},
		{"bad schema", testPlugin("p", []string{"-describe", "badschema"}, "", ""), 1, []string{"Plugin described itself wrongly", `"broken"`}},
		{"protocol", testPlugin("p", []string{"-protocol", "2"}, "", ""), 1, []string{"Plugin did not start", "ncompatible"}},
		{"missing program", strings.Replace(testPlugin("p", nil, "", ""), testpluginBin, testpluginBin+".missing", 1), 1, []string{"Plugin did not start", "finding the plugin program"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := writeConfig(t, testUpstream("t", "t", nil, "")+c.block)
			stdout, stderr, code := runProxy("validate", "--config", cfg)
			if code != c.code {
				t.Fatalf("validate exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout, stderr)
			}
			for _, w := range c.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("validate stderr lacks %q:\n%s", w, stderr)
				}
			}
			if c.code != 0 {
				// run refuses to start with the same problem.
				_, rstderr, rcode := runProxy("run", "--config", cfg)
				if rcode == 0 || !strings.Contains(rstderr, c.stderr[0]) {
					t.Errorf("run: exit %d, stderr lacks %q:\n%s", rcode, c.stderr[0], rstderr)
				}
			}
		})
	}
}

// TestReadmePlugin builds the plugin docs/plugins.md shows ("Writing a plugin", which
// the README's plugin recipe points to), as it is written there, and runs it through the
// proxy: what a newcomer copies works.
func TestReadmePlugin(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "plugins.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	i := strings.Index(s, "## Writing a plugin")
	if i < 0 {
		t.Fatal("docs/plugins.md has no Writing a plugin section")
	}
	j := strings.Index(s[i:], "```go\n")
	if j < 0 {
		t.Fatal("docs/plugins.md has no Go example in its Writing a plugin section")
	}
	code := s[i+j+len("```go\n"):]
	code = code[:strings.Index(code, "```")]
	// Inside the module, so that it builds against this checkout's SDK; a dot directory is
	// left out of ./... patterns.
	dir, err := os.MkdirTemp(filepath.Join(repoRoot, "e2e"), ".readme-plugin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "forbid")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the plugin of docs/plugins.md does not build: %v\n%s", err, out)
	}
	block := fmt.Sprintf("plugin \"forbid\" {\n  command = [%s]\n  tools = [\"t__*\"]\n  config {\n    %%s\n  }\n}\n", q(bin))
	bad := writeConfig(t, testUpstream("t", "t", nil, "")+fmt.Sprintf(block, `wrods = ["password"]`))
	if _, stderr, code := runProxy("validate", "--config", bad); code != 1 || !strings.Contains(stderr, `Did you mean "words"?`) {
		t.Errorf("validate of a misspelt attribute: exit %d\n%s", code, stderr)
	}
	cfg := writeConfig(t, testUpstream("t", "t", nil, "")+fmt.Sprintf(block, `words = ["password", "secret"]`))
	cs, _ := connectSDK(t, cfg, nil, "")
	ctx := ctxT(t, 60*time.Second)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"note": "my PASSWORD is"}}); callErrCode(err) != -31007 {
		t.Errorf("a forbidden word: got %v, want -31007", err)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{"note": "fine"}}); err != nil || !strings.Contains(textOf(res), "fine") {
		t.Errorf("an allowed call: %v %q", err, textOf(res))
	}
}

// TestPluginOverHTTP: over the authenticated HTTP front end a plugin sees the principal
// and its groups, never the credentials, and its principals matcher selects who it
// applies to.
func TestPluginOverHTTP(t *testing.T) {
	const aliceKey, bobKey = "alice-key-0123456789abcdef0123", "bob-key-0123456789abcdef012345"
	calls := filepath.Join(t.TempDir(), "calls")
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`
listen "http" {
  address = %q
  path    = "/mcp"
}
auth {
  resource = "http://%s/mcp"
  api_key "alice" {
    token  = %q
    groups = ["dev"]
  }
  api_key "bob" {
    token  = %q
    groups = ["contractors"]
  }
}
`, addr, addr, aliceKey, bobKey) + testUpstream("t", "t", nil, "") +
		testPlugin("no_bob", nil, `principals = ["bob"]`, `deny = "__"`) +
		testPlugin("watch", nil, `tools = ["t__echo"]`, fmt.Sprintf("calls_file = %s", q(calls)))
	startProxyAt(t, writeConfig(t, cfg), addr)
	ctx := ctxT(t, 60*time.Second)
	call := func(key string) map[string]json.RawMessage {
		c := &httpWire{t: t, url: "http://" + addr + "/mcp"}
		c.initializeAs(ctx, key)
		r := c.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__echo","arguments":{"note":"hi"},"_meta":{"trace":"x"}}}`, bearer(key))
		body := r.body
		if i := strings.Index(string(body), "data: "); i >= 0 {
			body = body[i+len("data: "):]
			if j := strings.IndexByte(string(body), '\n'); j >= 0 {
				body = body[:j]
			}
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("not JSON: %s", r.body)
		}
		return m
	}
	if m := call(aliceKey); m["result"] == nil {
		t.Errorf("alice: %s", m["error"])
	}
	if m := call(bobKey); errorCode(t, m) != -31007 {
		t.Errorf("bob: want -31007 from plugin no_bob, got %s", m["error"])
	}
	lines := callsOf(t, calls)
	if len(lines) == 0 || !strings.Contains(lines[0], " alice dev ") || !strings.Contains(lines[0], `{"note":"hi"}`) || !strings.Contains(lines[0], `"trace":"x"`) {
		t.Errorf("the plugin saw %q, want alice, her groups, the arguments and _meta", lines)
	}
	for _, l := range lines {
		if strings.Contains(l, aliceKey) || strings.Contains(l, bobKey) || strings.Contains(l, "Bearer") {
			t.Errorf("a plugin saw credentials: %q", l)
		}
		if strings.Contains(l, " bob ") {
			t.Errorf("plugin watch ran for bob's call, which no_bob refused before it: %q", l)
		}
	}
}
