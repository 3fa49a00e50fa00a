package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/policy"
)

func TestParseOptionsPluginHTTP(t *testing.T) {
	_, err := parseOptions([]string{"-mode", "http", "-plugin", "bin/testplugin"}, io.Discard)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "-plugin needs -mode stdio") {
		t.Errorf("-mode http -plugin: %v, want the usage error \"-plugin needs -mode stdio\"", err)
	}
}

// TestProxyConfigPlugin checks the proxy+plugin config: the text asked for, and that it
// loads with the proxy's own config package and means the same.
func TestProxyConfigPlugin(t *testing.T) {
	o := &options{tool: "echo", plugin: []string{"/opt/bench dir/testplugin", "-hooks", "before,after"}}
	ups := []upstreamBlock{{Label: "bench", Command: []string{"/bin/ts", "-fast"}, Cwd: "/w"}}
	src := proxyConfigPlugins(ups, []pluginBlock{benchPlugin(o)})
	want := `
plugin "bench" {
  command = ["/opt/bench dir/testplugin", "-hooks", "before,after"]
  tools   = ["echo"]
  failure = "closed"
  timeout = "5s"
  config {
  }
}
`
	if !strings.HasSuffix(src, want) {
		t.Errorf("config does not end with the plugin block:\n%s\nwant the suffix:%s", src, want)
	}
	cfg, diags := config.Parse([]byte(src), "plugin.hcl", "/tmp")
	if diags.HasErrors() {
		t.Fatalf("generated config does not load: %s\n%s", config.FormatDiagnostics(diags), src)
	}
	if len(cfg.Upstreams) != 1 || len(cfg.Plugins) != 1 {
		t.Fatalf("got %d upstreams and %d plugins, want 1 and 1", len(cfg.Upstreams), len(cfg.Plugins))
	}
	p := cfg.Plugins[0]
	if p.Name != "bench" || !slices.Equal(p.Command, o.plugin) || !slices.Equal(p.Tools, []string{"echo"}) ||
		p.FailOpen || p.Timeout != 5*time.Second || p.Config == nil || p.Disabled {
		t.Errorf("plugin = %+v", p)
	}

	// A tool name with wildcards selects that tool alone.
	o.tool = `get*?\x`
	src = proxyConfigPlugins(ups, []pluginBlock{benchPlugin(o)})
	cfg, diags = config.Parse([]byte(src), "plugin.hcl", "/tmp")
	if diags.HasErrors() {
		t.Fatalf("config with tool %q does not load: %s\n%s", o.tool, config.FormatDiagnostics(diags), src)
	}
	g, err := policy.CompileGlob(cfg.Plugins[0].Tools[0])
	if err != nil {
		t.Fatal(err)
	}
	if !g.Match(o.tool) || g.Match(`getab\x`) || g.Match(`get*?x`) {
		t.Errorf("pattern %q of tool %q matches other names, or not the tool", cfg.Plugins[0].Tools[0], o.tool)
	}
}

func TestParseStatPPID(t *testing.T) {
	got, err := parseStatPPID("4242 (my) (proc 1) S 17 4242 4242 0 -1 4194560\n")
	if err != nil || got != 17 {
		t.Errorf("parseStatPPID = %d, %v; want 17", got, err)
	}
	for _, bad := range []string{"", "4242 (x S 1", "4242 (x) S", "4242 (x) S p 1"} {
		if _, err := parseStatPPID(bad); err == nil {
			t.Errorf("parseStatPPID(%q) succeeded, want an error", bad)
		}
	}
}

func TestDescendants(t *testing.T) {
	// 1 -> 10 -> {11 -> 13, 12}; 1 -> 20; 0 -> 1 (and the kernel's self-parented 0 is left alone).
	parents := map[int]int{1: 0, 10: 1, 11: 10, 12: 10, 13: 11, 20: 1, 0: 0}
	for root, want := range map[int][]int{10: {11, 12, 13}, 11: {13}, 13: nil, 1: {10, 11, 12, 13, 20}, 99: nil} {
		if got := descendants(parents, root); !slices.Equal(got, want) {
			t.Errorf("descendants(%d) = %v, want %v", root, got, want)
		}
	}
}

// TestPluginFinder finds real child processes of the test by their program, and
// notices when one has gone.
func TestPluginFinder(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep program")
	}
	var pids []int
	for range 2 {
		cmd := exec.Command(sleep, "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		pids = append(pids, cmd.Process.Pid)
	}
	slices.Sort(pids)
	f := newPluginFinder(sleep)
	got, err := f.find(os.Getpid())
	if err != nil || !slices.Equal(got, pids) {
		t.Fatalf("find = %v, %v; want %v", got, err, pids)
	}
	if _, err := newPluginFinder("/nonexistent/plugin").find(os.Getpid()); err == nil {
		t.Error("find of a program nobody runs succeeded")
	}

	m := startCPU(append([]int{os.Getpid()}, pids...))
	p, err := os.FindProcess(pids[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.stop(); err == nil || !strings.Contains(err.Error(), "vanished during the phase") {
		t.Errorf("stop after a plugin process exited: %v, want a \"vanished\" error", err)
	}
}

// TestReportPlugin checks the plugin hop figures and their text.
func TestReportPlugin(t *testing.T) {
	o, err := parseOptions([]string{"-plugin", "/bin/tp -hooks before,after", "-plugin-hops", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rep := newReport(o)
	for r := 1; r <= 3; r++ {
		rr := roundResult{Round: r, ProxyPeakRSSMiB: 10, ProxyPluginPeakRSSkB: 12 << 10}
		for _, kind := range []string{kindLatency, kindThroughput} {
			add := func(target string, p50, cpu, rate float64, split *cpuSplit) {
				rr.Phases = append(rr.Phases, phaseResult{Kind: kind, Concurrency: 1, Target: target, Calls: 1000,
					CallsPerSec: rate, P50US: p50, CPUPerCallUS: cpu, CPUSplit: split})
			}
			add(targetDirect, 20, 10, 40000, nil)
			add(targetProxy, 60+float64(r), 40, 15000, nil)
			add(targetProxyPlugin, 460+float64(3*r), 240, 2000,
				&cpuSplit{PluginPIDs: []int{7}, ProxyCPUPerCallUS: 150, PluginCPUPerCallUS: 90})
		}
		rep.Rounds = append(rep.Rounds, rr)
	}
	rep.summarize()
	s := rep.Summary
	if len(s.PluginHops) != 2 || s.ProxyPluginPeakRSSMiB != 12 {
		t.Fatalf("summary = %+v", s)
	}
	h := s.PluginHops[0]
	// Medians: proxy p50 62, proxy+plugin p50 466; CPU 40 and 240.
	if h.Kind != kindLatency || h.Hops != 2 || h.P50AddedUS != 404 || h.P50AddedPerHopUS != 202 || h.CPUAddedUS != 200 ||
		h.CPUAddedPerHopUS != 100 || h.ProxyCPUPerCallUS != 150 || h.PluginCPUPerCallUS != 90 ||
		!slices.Equal(h.RoundsP50AddedUS, []float64{402, 404, 406}) || !slices.Equal(h.RoundsCPUAddedUS, []float64{200, 200, 200}) {
		t.Errorf("latency hop = %+v", h)
	}
	if h.WithinTarget == nil || !*h.WithinTarget || s.PluginHops[1].WithinTarget != nil {
		t.Errorf("targets: latency %v, throughput %v; want met and not judged", h.WithinTarget, s.PluginHops[1].WithinTarget)
	}
	if p := s.Phases[0].ProxyPlugin; p == nil || p.CPUSplit == nil || p.CPUSplit.PluginUS != 90 {
		t.Errorf("proxy+plugin figures = %+v", p)
	}
	var b strings.Builder
	if err := rep.writeText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"plugin:   /bin/tp -hooks before,after (2 hops per call)",
		"proxy+plugin/proxy",
		"latency 240.0 µs (proxy 150.0 + plugin 90.0)",
		"plugin hop, latency c=1",
		"p50 +404.0 µs (proxy+plugin p50 / proxy p50 = 7.52×), CPU +200.0 µs/call (proxy+plugin vs proxy), hops per call 2 → per hop +202.0 µs p50, +100.0 µs CPU",
		"at most +250 µs p50 and +150 µs CPU per hop: met",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}

	// One hop per call and a slower plugin: over the target.
	rep.Settings.PluginHops = 1
	rep.summarize()
	if h := rep.Summary.PluginHops[0]; h.WithinTarget == nil || *h.WithinTarget || h.P50AddedPerHopUS != 404 {
		t.Errorf("one hop: %+v", h)
	}
	b.Reset()
	if err := rep.writeText(&b); err != nil {
		t.Fatal(err)
	}
	if want := "EXCEEDED: p50 +404.0 µs per hop > 250 µs; CPU +200.0 µs per hop > 150 µs"; !strings.Contains(b.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
}

// TestRunPlugin builds the proxy, the test server and the test plugin and runs a short
// benchmark with the proxy+plugin target, end to end.
func TestRunPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the proxy")
	}
	dir := t.TempDir()
	for pkg, out := range map[string]string{"../mcp-proxy": "mcp-proxy", "../../internal/testing/testserver": "testserver",
		"../../internal/testing/testplugin": "testplugin"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", pkg, err, b)
		}
	}
	jsonPath := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{
		"-proxy", filepath.Join(dir, "mcp-proxy"), "-upstream", filepath.Join(dir, "testserver") + " -fast",
		"-plugin", filepath.Join(dir, "testplugin") + " -hooks before", "-plugin-hops", "1",
		"-duration", "200ms", "-latency-calls", "50", "-warmup", "10", "-concurrency", "2",
		"-idle-upstreams", "0", "-rounds", "2", "-json", jsonPath,
	}, nil, &stdout, &lockedWriter{w: &stderr})
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var rep report
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	s := rep.Summary
	if len(s.Phases) != 2 || len(s.PluginHops) != 2 || s.Errors != 0 || rep.Settings.PluginHops != 1 {
		t.Fatalf("summary = %+v\n%s", s, stdout.String())
	}
	for _, p := range s.Phases {
		if f := p.ProxyPlugin; f == nil || f.Calls == 0 || f.CPUSplit == nil {
			t.Errorf("%s c=%d: proxy+plugin figures %+v", p.Kind, p.Concurrency, f)
		}
	}
	// Every phase of proxy+plugin measured the same one plugin process; the targets took
	// turns going first.
	var first []string
	for _, rr := range rep.Rounds {
		first = append(first, rr.Phases[0].Target)
		for _, p := range rr.Phases {
			if p.Target != targetProxyPlugin {
				continue
			}
			if p.CPUSplit == nil || len(p.CPUSplit.PluginPIDs) != 1 {
				t.Errorf("round %d %s: cpu split %+v", rr.Round, p.key(), p.CPUSplit)
			}
		}
	}
	if !slices.Equal(first, []string{targetDirect, targetProxy}) {
		t.Errorf("first targets of the rounds = %v", first)
	}
	if !strings.Contains(stdout.String(), "plugin hop, latency c=1") || !strings.Contains(stdout.String(), "plugin hop target") {
		t.Errorf("report:\n%s", stdout.String())
	}
}
