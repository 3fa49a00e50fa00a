package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunStartup: -startup runs every phase over real processes (the proxy itself as
// the baseline too) and reports what it measured: every upstream of the fan-out ready,
// initialize answered with the fast upstream's tool while the slow one starts and the
// slow one's tool listed after list_changed, every tool listed by every list target,
// the idle proxy's memory split.
func TestRunStartup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the proxy")
	}
	dir := t.TempDir()
	for pkg, out := range map[string]string{"../mcp-proxy": "mcp-proxy", "../../internal/testing/testserver": "testserver"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", pkg, err, b)
		}
	}
	proxy := filepath.Join(dir, "mcp-proxy")
	jsonPath := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{
		"-startup", "-proxy", proxy, "-baseline-proxy", proxy, "-upstream", filepath.Join(dir, "testserver") + " -fast",
		"-fanout", "3", "-init-delay", "50ms", "-slow-delay", "3s", "-list-tools", "30", "-list-calls", "20", "-warmup", "5",
		"-idle-upstreams", "2", "-startup-sessions", "20", "-json", jsonPath,
	}, nil, &stdout, &lockedWriter{w: &stderr})
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var rep startupReport
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rounds) != 1 {
		t.Fatalf("rounds = %d", len(rep.Rounds))
	}
	r := rep.Rounds[0]
	// The slow upstream takes 3s to answer initialize and the default grace is 1s: it is
	// not in the first list (the fast one is, unless the machine is very slow), then it is.
	if r.SlowFirstTools > 1 || r.SlowTools != 2 || r.FanoutNSec <= 0 || r.FanoutOneSec <= 0 {
		t.Errorf("slow start: %+v", r)
	}
	for name, want := range map[string]int{"direct": 30, "proxy-1": 30, "proxy-n": 90, "baseline-1": 30, "baseline-n": 90} {
		if f := r.List[name]; f == nil || f.Tools != want || f.FirstP50US <= 0 {
			t.Errorf("list %s: %+v, want %d tools", name, f, want)
		}
	}
	if r.Idle == nil || r.BaselineIdle == nil || r.Idle.Tools != 2 || r.Idle.AnonkB <= 0 || r.Idle.FilekB <= 0 {
		t.Errorf("idle: %+v %+v", r.Idle, r.BaselineIdle)
	}
	// Twice the idle upstreams, all listed; the idle sessions' readings, the Go heap's
	// from the proxy's pprof listener (deltas over 20 sessions are noise: not checked).
	if m := r.IdleMore; m == nil || m.Upstreams != 4 || m.Tools != 4 || m.AnonkB <= 0 {
		t.Errorf("idle with twice the upstreams: %+v", m)
	}
	if s := r.IdleSessions; s == nil || s.Sessions != 20 || s.BaseAnonkB <= 0 || s.OpenAnonkB <= 0 || s.BaseHeapkB <= 0 || s.OpenHeapkB <= 0 {
		t.Errorf("idle sessions: %+v", s)
	}
	for _, want := range []string{"fan-out:", "slow start:", "tools/list:", "baseline", "idle:",
		"idle target: RssAnon with 2 child upstreams", "idle target: each further upstream", "idle target: each idle HTTP session",
		"resident total (VmRSS)"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout.String())
		}
	}
}
