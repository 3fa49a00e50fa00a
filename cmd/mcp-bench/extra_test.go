package main

import (
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// TestParseOptionsExtra checks -extra-hcl and the combinations it refuses.
func TestParseOptionsExtra(t *testing.T) {
	o, err := parseOptions([]string{"-extra-hcl", "bin/ops.hcl"}, io.Discard)
	if err != nil || o.extraHCL != "bin/ops.hcl" {
		t.Fatalf("-extra-hcl: %+v, %v", o, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-mode", "http", "-extra-hcl", "ops.hcl"}, "-extra-hcl needs -mode stdio"},
		{[]string{"-plugin", "tp", "-extra-hcl", "ops.hcl"}, "-extra-hcl and -plugin cannot be combined"},
	} {
		_, err := parseOptions(tc.args, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseOptions(%q) = %v, want the usage error %q", tc.args, err, tc.want)
		}
	}
}

// TestProxyConfigExtra checks the proxy+extra config: the plain config, then the file's
// text verbatim, parsing into the same upstream plus the admin and telemetry blocks.
func TestProxyConfigExtra(t *testing.T) {
	ups := []upstreamBlock{{Label: "bench", Command: []string{"/bin/srv", "-fast"}, Cwd: "/tmp"}}
	extra := "admin {\n  address = \"127.0.0.1:0\"\n}\n\ntelemetry {\n  otlp_endpoint = \"http://127.0.0.1:1\"\n  sampling      = 0\n}"
	src := proxyConfigExtra(ups, "/x/ops.hcl", []byte(extra))
	if want := proxyConfig(ups) + "\n# appended from -extra-hcl /x/ops.hcl\n" + extra + "\n"; src != want {
		t.Errorf("config:\n%s\nwant:\n%s", src, want)
	}
	cfg, diags := config.Parse([]byte(src), "extra.hcl", "/tmp")
	if diags.HasErrors() {
		t.Fatalf("config does not parse: %v\n%s", diags, src)
	}
	if len(cfg.Upstreams) != 1 || !slices.Equal(cfg.Upstreams[0].Command, ups[0].Command) {
		t.Errorf("upstreams = %+v", cfg.Upstreams)
	}
	if cfg.Admin == nil || cfg.Admin.Address != "127.0.0.1:0" {
		t.Errorf("admin = %+v, want address 127.0.0.1:0", cfg.Admin)
	}
	if tel := cfg.Telemetry; tel == nil || tel.Endpoint != "http://127.0.0.1:1" || tel.Sampling != 0 {
		t.Errorf("telemetry = %+v", tel)
	}
}

// TestReportExtra checks the extra config figures and their text.
func TestReportExtra(t *testing.T) {
	o, err := parseOptions([]string{"-extra-hcl", "bin/ops.hcl"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rep := newReport(o)
	for r := 1; r <= 3; r++ {
		rr := roundResult{Round: r, ProxyPeakRSSMiB: 10, ProxyExtraPeakRSSkB: 11 << 10}
		for _, kind := range []string{kindLatency, kindThroughput} {
			add := func(target string, p50, cpu, rate float64) {
				rr.Phases = append(rr.Phases, phaseResult{Kind: kind, Concurrency: 1, Target: target, Calls: 1000,
					CallsPerSec: rate, P50US: p50, CPUPerCallUS: cpu})
			}
			add(targetDirect, 20, 10, 40000)
			add(targetProxy, 60+float64(r), 40, 15000)
			add(targetProxyExtra, 70+float64(2*r), 45, 12000)
		}
		rep.Rounds = append(rep.Rounds, rr)
	}
	rep.summarize()
	s := rep.Summary
	if len(s.ExtraConfig) != 2 || s.ProxyExtraPeakRSSMiB != 11 || s.Phases[0].ProxyExtra == nil {
		t.Fatalf("summary = %+v", s)
	}
	// Medians: proxy p50 62, proxy+extra p50 74; CPU 40 and 45.
	c := s.ExtraConfig[0]
	if c.Kind != kindLatency || c.P50AddedUS != 12 || c.CPUAddedUS != 5 || c.ThroughputRatio != 0.8 ||
		!slices.Equal(c.RoundsP50AddedUS, []float64{11, 12, 13}) || !slices.Equal(c.RoundsCPUAddedUS, []float64{5, 5, 5}) {
		t.Errorf("latency extra cost = %+v", c)
	}
	var b strings.Builder
	if err := rep.writeText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"proxy+extra = the same\n          with the HCL of bin/ops.hcl appended",
		"proxy+extra/proxy",
		"extra config, latency c=1:",
		"p50 +12.0 µs (1.19x), CPU +5.0 µs/call vs proxy",
		"proxy+extra peak RSS (VmHWM)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"extra_hcl":"bin/ops.hcl"`, `"extra_config":[{"kind":"latency","concurrency":1,"p50_added_us":12,`, `"proxy_extra":{`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("JSON lacks %s:\n%s", want, js)
		}
	}
}

// The reload mode's two versions are valid configurations and its broken one is not;
// the versions differ in what the probes check.
func TestReloadVersions(t *testing.T) {
	o := &options{upstream: []string{"/bin/testserver", "-fast"}, dir: t.TempDir()}
	for _, v := range []struct {
		b, broken bool
		want      []string
	}{
		{false, false, []string{`tools  = ["other__echo"]`}},
		{true, false, []string{`upstream "extra"`, `tools  = ["nothing__here"]`}},
		{true, true, nil},
	} {
		src := reloadVersion(o, "127.0.0.1:1", "127.0.0.1:2", v.b, v.broken)
		_, diags := config.Parse([]byte(src), "v.hcl", o.dir)
		if diags.HasErrors() != v.broken {
			t.Errorf("version b=%v broken=%v: errors %v\n%s", v.b, v.broken, diags, src)
		}
		for _, w := range v.want {
			if !strings.Contains(src, w) {
				t.Errorf("version b=%v lacks %q:\n%s", v.b, w, src)
			}
		}
	}
}
