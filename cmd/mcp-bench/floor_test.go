package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMain lets the test binary stand in for mcp-bench as the floor forwarder
// ("floor" as its first argument), as -floor runs os.Executable().
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "floor" {
		if err := runFloor(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString("floor: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRunFloor: -floor -stdio-httpup measures every path and its floor forwarder in one
// run, over real processes, with no errors, and reports each proxy against its floor.
func TestRunFloor(t *testing.T) {
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
	jsonPath := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{
		"-proxy", filepath.Join(dir, "mcp-proxy"), "-upstream", filepath.Join(dir, "testserver") + " -fast",
		"-mode", "http", "-floor", "-stdio-httpup", "-duration", "200ms", "-latency-calls", "50", "-warmup", "10",
		"-concurrency", "4", "-idle-upstreams", "0", "-json", jsonPath,
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
	if len(rep.Summary.Phases) != 2 || rep.Summary.Errors != 0 {
		t.Fatalf("summary = %+v\n%s", rep.Summary, stdout.String())
	}
	for _, p := range rep.Summary.Phases {
		for _, name := range otherTargets {
			f := p.figuresOf(name)
			if f == nil || f.Calls == 0 || f.Errors != 0 {
				t.Errorf("%s c=%d %s: %+v", p.Kind, p.Concurrency, name, f)
				continue
			}
			if name != targetFloor && f.UpstreamNewConnPct == nil {
				t.Errorf("%s c=%d %s: no upstream connection figure", p.Kind, p.Concurrency, name)
			}
		}
	}
	for _, want := range []string{"CPU per call proxy/floor", "CPU per call proxy-httpup/floor-httpup", "CPU per call stdio-httpup/floor-stdio-httpup", "p50 latency stdio-httpup/direct"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("no %q in the report:\n%s", want, stdout.String())
		}
	}
}

// TestRunTLS: with -tls the upstreams serve HTTPS with the run's own certificate; the
// proxies (through SSL_CERT_FILE), the floors and mcp-bench all trust it, calls succeed,
// the proxies' POSTs to the upstream go over HTTP/2, and no phase opens a connection
// (so no TLS handshake) per call.
func TestRunTLS(t *testing.T) {
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
	jsonPath := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{
		"-proxy", filepath.Join(dir, "mcp-proxy"), "-upstream", filepath.Join(dir, "testserver") + " -fast",
		"-mode", "http", "-tls", "-floor", "-stdio-httpup", "-duration", "200ms", "-latency-calls", "50", "-warmup", "10",
		"-concurrency", "4", "-idle-upstreams", "0", "-json", jsonPath,
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
	if rep.Summary.Errors != 0 || !rep.Settings.TLS {
		t.Fatalf("summary = %+v\n%s", rep.Summary, stdout.String())
	}
	seen := 0
	for _, rr := range rep.Rounds {
		for _, p := range rr.Phases {
			h := p.HTTP
			if h == nil || h.UpstreamHTTP2Pct == nil {
				continue
			}
			seen++
			if *h.UpstreamHTTP2Pct != 100 {
				t.Errorf("%s %s: %.0f%% of the upstream's POSTs over HTTP/2", p.Target, p.key(), *h.UpstreamHTTP2Pct)
			}
			if *h.UpstreamNewConns != 0 {
				t.Errorf("%s %s: %d new connections to the upstream during the phase", p.Target, p.key(), *h.UpstreamNewConns)
			}
		}
	}
	if seen < 4 {
		t.Errorf("upstream HTTP/2 figures for %d phases\n%s", seen, stderr.String())
	}
}

// TestReportFloorPairs: each proxy's "CPU per call" summary line against its floor
// carries that pair's own figures in every phase (latency, and each concurrency), not
// another pair's or another phase's, whatever order the rounds ran the targets in.
func TestReportFloorPairs(t *testing.T) {
	o, err := parseOptions([]string{"-mode", "http", "-floor", "-stdio-httpup", "-rounds", "3", "-concurrency", "1,64"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rep := newReport(o)
	targets := []string{targetDirect, targetProxy, targetProxyHTTPUp, targetStdioHTTPUp, targetFloor, targetFloorHTTPUp, targetFloorStdioHTTPUp}
	phases := []phaseSpec{{kindLatency, 1}, {kindThroughput, 1}, {kindThroughput, 64}}
	// Every target and phase has a CPU figure of its own: 100×target + 10×phase, plus the
	// round (so the median is round 2's).
	cpu := func(ti, pi, round int) float64 { return float64(100*(ti+1) + 10*pi + round) }
	for round := range 3 {
		rr := roundResult{Round: round + 1}
		for pi, ph := range phases {
			for ti, tg := range rotate(targets, round) {
				ti = (ti + round) % len(targets)
				rr.Phases = append(rr.Phases, phaseResult{Kind: ph.kind, Concurrency: ph.concurrency, Target: tg, Calls: 5000,
					CallsPerSec: 1000, P50US: 100, CPUPerCallUS: cpu(ti, pi, round)})
			}
		}
		rep.Rounds = append(rep.Rounds, rr)
	}
	rep.summarize()
	var b strings.Builder
	if err := rep.writeText(&b); err != nil {
		t.Fatal(err)
	}
	index := func(name string) int { return slices.Index(targets, name) }
	for _, pair := range floorPairs {
		x, y := index(pair[0]), index(pair[1])
		want := fmt.Sprintf("CPU per call %s/%s", pair[0], pair[1])
		line := ""
		for l := range strings.Lines(b.String()) {
			if strings.Contains(l, want) {
				line = l
			}
		}
		if line == "" {
			t.Fatalf("no %q line:\n%s", want, b.String())
		}
		for pi, label := range []string{"latency", "c=1", "c=64"} {
			part := fmt.Sprintf("%s %.2fx (%.1f vs %.1f µs)", label, cpu(x, pi, 1)/cpu(y, pi, 1), cpu(x, pi, 1), cpu(y, pi, 1))
			if !strings.Contains(line, part) {
				t.Errorf("%s: want %q in\n%s", want, part, line)
			}
		}
	}
}
