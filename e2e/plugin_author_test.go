package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// buildAuthorPlugin builds e2e/testdata/authorplugin, a plugin written against the public
// SDK only, as its author would build it.
func buildAuthorPlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "authorplugin")
	build := exec.Command("go", "build", "-o", bin, "./e2e/testdata/authorplugin")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	return bin
}

// authorBlock is a plugin block running the author plugin on t__* with config.
func authorBlock(label, bin, config string) string {
	return fmt.Sprintf("plugin %q {\n  command = [%s]\n  tools = [\"t__*\"]\n  config {\n    %s\n  }\n}\n", label, q(bin), config)
}

// proxyIn is proxyCmd with TMPDIR set to tmp: where the proxy and its plugins put
// their temporary files.
func proxyIn(cfg, tmp string) (*exec.Cmd, *syncBuffer) {
	cmd, stderr := proxyCmd(cfg)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	return cmd, stderr
}

// connectCmd connects the Go SDK client to the proxy cmd runs; the session is closed at
// the end of the test unless the test closed it.
func connectCmd(t *testing.T, cmd *exec.Cmd, stderr *syncBuffer) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-author-plugin", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connecting to the proxy: %v\nproxy stderr:\n%s", err, stderr)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		checkStderr(t, stderr)
	})
	return cs
}

// pluginPids reads the author plugin's pids file: the pid of each process Configure
// ran in, in order, and the tag it was configured with.
func pluginPids(t *testing.T, path string) (pids []int, tags []string) {
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		p, _ := strconv.Atoi(f[0])
		pids = append(pids, p)
		tags = append(tags, strings.Join(f[1:], " "))
	}
	return pids, tags
}

// alive reports whether pid is a running process (not a zombie).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return !strings.Contains(string(b), ") Z ")
}

// leftovers lists what is under dir: every file, socket and directory, relative.
func leftovers(t *testing.T, dir string) (all, sockets []string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		all = append(all, rel)
		if d.Type()&fs.ModeSocket != 0 {
			sockets = append(sockets, rel)
		}
		return nil
	})
	return all, sockets
}

// pluginProcesses lists the processes below pid running the program bin.
func pluginProcesses(pid int, bin string) []int {
	var out []int
	for _, p := range descendants(pid) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); strings.HasPrefix(string(b), bin+"\x00") {
			out = append(out, p)
		}
	}
	return out
}

// TestPluginLogLines: every way a plugin's author logs arrives in the proxy's log as a
// record of its own, at the line's level, with "plugin":"NAME": the SDK's logger made
// before Serve and after it (inside Configure and a hook), hclog in text and JSON on
// stderr, the standard log package, slog's JSON and text handlers, plain lines on
// stderr (at info, or at the level a [LEVEL] prefix says) and on stdout.
func TestPluginLogLines(t *testing.T) {
	bin := buildAuthorPlugin(t)
	cfg := writeConfig(t, testUpstream("t", "t", nil, "")+authorBlock("author", bin, "logs = true"))
	cmd, stderr := proxyCmd(cfg)
	cs := connectCmd(t, cmd, stderr)
	ctx := ctxT(t, 60*time.Second)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("t__echo: %v\n%s", err, stderr)
	}
	want := map[string]string{
		"early-sdk-info": "info", "early-sdk-warn": "warn",
		"late-sdk-debug": "debug", "late-sdk-info": "info", "late-sdk-error": "error",
		"hclog-text-info": "info", "hclog-text-stderr-warn": "warn", "hclog-json-error": "error",
		"stdlog-plain": "info", "slog-json-warn": "warn", "slog-text-error": "error",
		"plain-stderr": "info", "prefixed-stderr-warn": "warn", "plain-stdout": "info",
	}
	type seen struct{ level, plugin, at string }
	records := func() map[string]seen {
		got := map[string]seen{}
		for _, l := range strings.Split(stderr.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) != nil {
				continue
			}
			msg, _ := rec["message"].(string)
			for key := range want {
				for _, at := range []string{"main", "configure", "before"} {
					if strings.HasSuffix(msg, key+" "+at) {
						lv, _ := rec["level"].(string)
						pl, _ := rec["plugin"].(string)
						a, _ := rec["at"].(string)
						got[key+" "+at] = seen{lv, pl, a}
					}
				}
			}
		}
		return got
	}
	// The hook's lines were written before it answered; the proxy reads them from two
	// streams, so the last ones may still be on their way.
	expected := []string{"early-sdk-info main", "plain-stderr main"}
	for key := range want {
		expected = append(expected, key+" configure", key+" before")
	}
	slices.Sort(expected)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if len(records()) == len(expected) {
			break
		}
	}
	got := records()
	for _, e := range expected {
		key, at, _ := strings.Cut(e, " ")
		r, ok := got[e]
		switch {
		case !ok:
			t.Errorf("%q is not in the proxy's log", e)
		case r.level != want[key] || r.plugin != "author":
			t.Errorf("%q arrived at %q with plugin %q; want %q with plugin \"author\"", e, r.level, r.plugin, want[key])
		case strings.HasPrefix(key, "early-sdk-info") || key == "late-sdk-info":
			if r.at != at {
				t.Errorf("%q lost its field at=%q (got %q)", e, at, r.at)
			}
		}
	}
	if t.Failed() {
		t.Logf("proxy stderr:\n%s", stderr)
	}
}

// TestPluginLeavesNoFiles: no socket or temporary file of a plugin outlives its process,
// however it ends (kill -9 and the restart that follows, the proxy's normal exit), and
// after the proxy itself is killed with SIGKILL the next proxy started with the same
// TMPDIR removes what the killed one left, never what a live one holds.
func TestPluginLeavesNoFiles(t *testing.T) {
	bin := buildAuthorPlugin(t)
	tmp := t.TempDir()
	pids := filepath.Join(t.TempDir(), "pids")
	cfg := writeConfig(t, testUpstream("t", "t", nil, "")+authorBlock("p", bin, fmt.Sprintf("tag = \"P\"\n pids_file = %s", q(pids))))
	count := func(n int) func() bool {
		return func() bool { p, _ := pluginPids(t, pids); return len(p) >= n }
	}
	oneSocket := func(what string, logs fmt.Stringer) {
		t.Helper()
		all, socks := leftovers(t, tmp)
		if len(socks) != 1 {
			t.Errorf("%s: %d sockets in TMPDIR, want the running plugin's one: %v\n%s", what, len(socks), all, logs)
		}
	}

	// kill -9 of the plugin, three times: each restart's socket replaces the last.
	cmd, stderr := proxyIn(cfg, tmp)
	cs := connectCmd(t, cmd, stderr)
	ctx := ctxT(t, 90*time.Second)
	waitFor(t, 30*time.Second, "the plugin configured", count(1), stderr)
	oneSocket("started", stderr)
	for i := 1; i <= 3; i++ {
		p, _ := pluginPids(t, pids)
		if err := syscall.Kill(p[len(p)-1], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, fmt.Sprintf("restart %d", i), count(i+1), stderr)
		waitFor(t, 30*time.Second, "a call hooked by the restarted plugin", func() bool {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{}})
			return err == nil && strings.HasSuffix(textOf(res), "P")
		}, stderr)
		oneSocket(fmt.Sprintf("after kill -9 and restart %d", i), stderr)
	}
	// The proxy's normal exit (its client closes stdin): nothing left.
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if all, _ := leftovers(t, tmp); len(all) != 0 {
		t.Errorf("after the proxy exited, TMPDIR holds %v\n%s", all, stderr)
	}

	// SIGKILL of the proxy: its directory stays (nothing ran to remove it) ...
	killed, kstderr := proxyIn(cfg, tmp)
	if _, err := killed.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	n, _ := pluginPids(t, pids)
	waitFor(t, 30*time.Second, "the plugin of the proxy to be killed", count(len(n)+1), kstderr)
	p, _ := pluginPids(t, pids)
	killedPlugin := p[len(p)-1]
	_ = killed.Process.Signal(syscall.SIGKILL)
	_ = killed.Wait()
	waitFor(t, 15*time.Second, "the killed proxy's plugin gone", func() bool { return !alive(killedPlugin) }, kstderr)
	stale, _ := leftovers(t, tmp)
	if len(stale) == 0 {
		t.Fatal("a proxy killed with SIGKILL left nothing: the test does not test the clean-up")
	}
	t.Logf("left by the SIGKILLed proxy: %v", stale)

	// ... and the next proxy removes it, and keeps its own.
	next, nstderr := proxyIn(cfg, tmp)
	ncs := connectCmd(t, next, nstderr)
	waitFor(t, 30*time.Second, "the next proxy's plugin", count(len(p)+1), nstderr)
	all, _ := leftovers(t, tmp)
	for _, s := range stale {
		if slices.Contains(all, s) {
			t.Errorf("the next proxy left the killed one's %s", s)
		}
	}
	oneSocket("the next proxy", nstderr)

	// A third proxy on the same TMPDIR never removes the live one's directory.
	third, tstderr := proxyIn(cfg, tmp)
	tcs := connectCmd(t, third, tstderr)
	waitFor(t, 30*time.Second, "the third proxy's plugin", count(len(p)+2), tstderr)
	if _, socks := leftovers(t, tmp); len(socks) != 2 {
		t.Errorf("two proxies running: %d sockets, want 2", len(socks))
	}
	for _, c := range []*mcp.ClientSession{ncs, tcs} {
		if res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{}}); err != nil || !strings.HasSuffix(textOf(res), "P") {
			t.Errorf("a call with two proxies on one TMPDIR: %v %q", err, textOf(res))
		}
	}
	_ = tcs.Close()
	_ = ncs.Close()
	if all, _ := leftovers(t, tmp); len(all) != 0 {
		t.Errorf("after both proxies exited, TMPDIR holds %v", all)
	}
}

// TestPluginReloadStopsOld: a reload that changes a plugin's config starts the new
// plugin, lets the old one answer the call that was in its hooks, and stops the old
// process once that call is answered (at the latest after the longest call's timeout,
// here 3 s), and several reloads in a row leave one plugin process and one socket.
func TestPluginReloadStopsOld(t *testing.T) {
	bin := buildAuthorPlugin(t)
	tmp := t.TempDir()
	dir := t.TempDir()
	pids, calls := filepath.Join(dir, "pids"), filepath.Join(dir, "calls")
	body := func(tag string) string {
		return testUpstream("t", "t", nil, `timeout = "3s"`) +
			authorBlock("p", bin, fmt.Sprintf("tag = %q\n pids_file = %s\n calls_file = %s", tag, q(pids), q(calls)))
	}
	cfg := writeConfig(t, body("v1"))
	cmd, stderr := proxyIn(cfg, tmp)
	cs := connectCmd(t, cmd, stderr)
	ctx := ctxT(t, 120*time.Second)
	configured := func(n int) func() bool {
		return func() bool { p, _ := pluginPids(t, pids); return len(p) >= n }
	}
	waitFor(t, 30*time.Second, "the plugin configured", configured(1), stderr)

	// A call in the old plugin's hooks while the reload happens.
	type answer struct {
		text string
		err  error
	}
	slow := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__slow", Arguments: map[string]any{"ms": 2000}})
		slow <- answer{textOf(res), err}
	}()
	waitFor(t, 30*time.Second, "the slow call in the before hook", func() bool {
		b, _ := os.ReadFile(calls)
		return strings.Contains(string(b), "t__slow")
	}, stderr)
	reloads := 0
	reload := func(tag string) {
		t.Helper()
		reloads++
		rewrite(t, cfg, body(tag))
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "the plugin "+tag+" configured", configured(reloads+1), stderr)
		waitFor(t, 30*time.Second, "reload "+tag+" applied", func() bool {
			return strings.Count(stderr.String(), `"message":"configuration reloaded"`) >= reloads
		}, stderr)
	}
	reload("v2")
	if len(slow) != 0 {
		t.Log("the slow call was answered before the reload applied: the old plugin's drain is not exercised this time")
	}
	p, tags := pluginPids(t, pids)
	old := p[0]
	a := <-slow
	if a.err != nil || !strings.HasSuffix(a.text, "v1") {
		t.Errorf("the call in flight during the reload: %v %q, want the old plugin's answer (tag v1)", a.err, a.text)
	}
	// The old process ends once its last call is answered: well within its 3 s timeout
	// and go-plugin's 2 s graceful stop (the old code waited 65 s).
	answered := time.Now()
	waitFor(t, 15*time.Second, fmt.Sprintf("the old plugin (pid %d) gone", old), func() bool { return !alive(old) }, stderr)
	t.Logf("the old plugin was gone %v after the call in its hooks was answered", time.Since(answered).Round(time.Millisecond))
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{}}); err != nil || !strings.HasSuffix(textOf(res), "v2") {
		t.Errorf("after the reload: %v %q, want the new plugin's tag v2 (configured: %v)", err, textOf(res), tags)
	}

	// Several reloads in a row, without calls: each old process is gone.
	for _, tag := range []string{"v3", "v4", "v5"} {
		reload(tag)
	}
	p, _ = pluginPids(t, pids)
	newest := p[len(p)-1]
	for _, pid := range p[:len(p)-1] {
		waitFor(t, 15*time.Second, fmt.Sprintf("replaced plugin pid %d gone", pid), func() bool { return !alive(pid) }, stderr)
	}
	if live := pluginProcesses(cmd.Process.Pid, bin); !slices.Equal(live, []int{newest}) {
		t.Errorf("after %d reloads the plugin processes are %v, want only %d", reloads, live, newest)
	}
	if all, socks := leftovers(t, tmp); len(socks) != 1 {
		t.Errorf("after %d reloads: %d sockets in TMPDIR, want 1: %v", reloads, len(socks), all)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{}}); err != nil || !strings.HasSuffix(textOf(res), "v5") {
		t.Errorf("after the reloads: %v %q, want tag v5", err, textOf(res))
	}
	_ = cs.Close()
	if all, _ := leftovers(t, tmp); len(all) != 0 {
		t.Errorf("after the proxy exited, TMPDIR holds %v", all)
	}
}
