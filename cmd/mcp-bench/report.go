package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
)

// report is everything a run measured; it is printed as a table and written as JSON.
type report struct {
	Machine  machineInfo   `json:"machine"`
	Settings settings      `json:"settings"`
	Rounds   []roundResult `json:"rounds"`
	Summary  summary       `json:"summary"`
}

type machineInfo struct {
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"` // of mcp-bench itself
	CPUModel   string `json:"cpu_model,omitempty"`
	Kernel     string `json:"kernel,omitempty"`
}

type settings struct {
	Proxy         string   `json:"proxy"`
	Upstream      []string `json:"upstream"`
	Tool          string   `json:"tool"`
	Args          string   `json:"args"`
	DurationSec   float64  `json:"duration_sec"`
	LatencyCalls  int      `json:"latency_calls"`
	Warmup        int      `json:"warmup"`
	Concurrency   []int    `json:"concurrency"`
	IdleUpstreams int      `json:"idle_upstreams"`
	Rounds        int      `json:"rounds"`
	TimeoutSec    float64  `json:"timeout_sec"`
}

// roundResult is one round: every phase against both targets, then the idle phase.
type roundResult struct {
	Round           int           `json:"round"`
	Phases          []phaseResult `json:"phases"`
	ProxyPeakRSSkB  int64         `json:"proxy_peak_rss_kb"` // VmHWM of the proxy process over the round
	ProxyPeakRSSMiB float64       `json:"proxy_peak_rss_mib"`
	Idle            *idleResult   `json:"idle,omitempty"`
}

// figures are one target's results of one phase, as medians over the rounds (Errors is
// the total).
type figures struct {
	Calls        float64 `json:"calls"`
	Errors       int     `json:"errors"`
	CallsPerSec  float64 `json:"calls_per_sec"`
	P50US        float64 `json:"p50_us"`
	P90US        float64 `json:"p90_us"`
	P99US        float64 `json:"p99_us"`
	MaxUS        float64 `json:"max_us"`
	MeanUS       float64 `json:"mean_us"`
	CPUPerCallUS float64 `json:"cpu_per_call_us"`
	// BenchCPUPerCallUS is the CPU time of mcp-bench itself per call.
	BenchCPUPerCallUS float64 `json:"bench_cpu_per_call_us"`
}

// phaseSummary compares the targets in one phase. Ratios are proxy/direct (0 when the
// direct figure is 0).
type phaseSummary struct {
	Kind            string  `json:"kind"`
	Concurrency     int     `json:"concurrency"`
	Direct          figures `json:"direct"`
	Proxy           figures `json:"proxy"`
	P50Ratio        float64 `json:"p50_ratio"`
	P99Ratio        float64 `json:"p99_ratio"`
	ThroughputRatio float64 `json:"throughput_ratio"`
}

type summary struct {
	Phases          []phaseSummary `json:"phases"`
	ProxyPeakRSSMiB float64        `json:"proxy_peak_rss_mib"` // median over rounds
	IdleUpstreams   int            `json:"idle_upstreams,omitempty"`
	IdleTools       int            `json:"idle_tools,omitempty"` // fewest listed in any round
	IdleRSSMiB      float64        `json:"idle_rss_mib,omitempty"`
	Errors          int            `json:"errors"` // failed calls in all phases and rounds, plus idle-phase mismatches
}

func newReport(o *options) *report {
	return &report{
		Machine: machineInfo{
			GOOS:       runtime.GOOS,
			GOARCH:     runtime.GOARCH,
			NumCPU:     runtime.NumCPU(),
			GOMAXPROCS: runtime.GOMAXPROCS(0),
			GoVersion:  runtime.Version(),
			CPUModel:   cpuModel(),
			Kernel:     readTrimmed("/proc/sys/kernel/osrelease"),
		},
		Settings: settings{
			Proxy:         o.proxyPath,
			Upstream:      o.upstream,
			Tool:          o.tool,
			Args:          o.args,
			DurationSec:   o.duration.Seconds(),
			LatencyCalls:  o.latencyCalls,
			Warmup:        o.warmup,
			Concurrency:   o.concurrency,
			IdleUpstreams: o.idleUpstreams,
			Rounds:        o.rounds,
			TimeoutSec:    o.timeout.Seconds(),
		},
	}
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "".
func cpuModel() string {
	for line := range strings.Lines(readTrimmed("/proc/cpuinfo")) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// summarize fills r.Summary from r.Rounds.
func (r *report) summarize() {
	var s summary
	type key struct {
		kind string
		conc int
	}
	var order []key
	byKey := map[key]map[string][]phaseResult{}
	for _, rr := range r.Rounds {
		for _, p := range rr.Phases {
			k := key{p.Kind, p.Concurrency}
			if byKey[k] == nil {
				byKey[k] = map[string][]phaseResult{}
				order = append(order, k)
			}
			byKey[k][p.Target] = append(byKey[k][p.Target], p)
			s.Errors += p.Errors
		}
	}
	for _, k := range order {
		ps := phaseSummary{
			Kind:        k.kind,
			Concurrency: k.conc,
			Direct:      medianFigures(byKey[k][targetDirect]),
			Proxy:       medianFigures(byKey[k][targetProxy]),
		}
		ps.P50Ratio = ratio(ps.Proxy.P50US, ps.Direct.P50US)
		ps.P99Ratio = ratio(ps.Proxy.P99US, ps.Direct.P99US)
		ps.ThroughputRatio = ratio(ps.Proxy.CallsPerSec, ps.Direct.CallsPerSec)
		s.Phases = append(s.Phases, ps)
	}
	var peaks, idle []float64
	for _, rr := range r.Rounds {
		peaks = append(peaks, rr.ProxyPeakRSSMiB)
		if rr.Idle != nil {
			idle = append(idle, rr.Idle.RSSMiB)
			if s.IdleUpstreams == 0 || rr.Idle.Tools < s.IdleTools {
				s.IdleTools = rr.Idle.Tools
			}
			s.IdleUpstreams = rr.Idle.Upstreams
			if rr.Idle.Error != "" {
				s.Errors++
			}
		}
	}
	s.ProxyPeakRSSMiB = median(peaks)
	s.IdleRSSMiB = median(idle)
	r.Summary = s
}

// medianFigures takes the median of each figure over rounds; errors are summed.
func medianFigures(ps []phaseResult) figures {
	var f figures
	col := func(get func(*phaseResult) float64) float64 {
		v := make([]float64, len(ps))
		for i := range ps {
			v[i] = get(&ps[i])
		}
		return median(v)
	}
	for i := range ps {
		f.Errors += ps[i].Errors
	}
	f.Calls = col(func(p *phaseResult) float64 { return float64(p.Calls) })
	f.CallsPerSec = col(func(p *phaseResult) float64 { return p.CallsPerSec })
	f.P50US = col(func(p *phaseResult) float64 { return p.P50US })
	f.P90US = col(func(p *phaseResult) float64 { return p.P90US })
	f.P99US = col(func(p *phaseResult) float64 { return p.P99US })
	f.MaxUS = col(func(p *phaseResult) float64 { return p.MaxUS })
	f.MeanUS = col(func(p *phaseResult) float64 { return p.MeanUS })
	f.CPUPerCallUS = col(func(p *phaseResult) float64 { return p.CPUPerCallUS })
	f.BenchCPUPerCallUS = col(func(p *phaseResult) float64 { return p.BenchCPUPerCallUS })
	return f
}

// firstError returns the first recorded call error, for the exit message.
func (r *report) firstError() string {
	for _, rr := range r.Rounds {
		for _, p := range rr.Phases {
			if p.FirstError != "" {
				return fmt.Sprintf("%s %s: %s", p.key(), p.Target, p.FirstError)
			}
		}
		if rr.Idle != nil && rr.Idle.Error != "" {
			return "idle phase: " + rr.Idle.Error
		}
	}
	return "unknown"
}

func fmtRatio(v float64) string {
	if v == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", v)
}

// writeText prints the human-readable report.
func (r *report) writeText(w io.Writer) error {
	var b strings.Builder
	m, st := r.Machine, r.Settings
	fmt.Fprintf(&b, "mcp-bench: tools/call %q %s, mcp-proxy vs. the upstream called directly\n", st.Tool, st.Args)
	fmt.Fprintf(&b, "machine:  %s/%s, NumCPU %d, GOMAXPROCS %d, %s (mcp-bench)", m.GOOS, m.GOARCH, m.NumCPU, m.GOMAXPROCS, m.GoVersion)
	if m.CPUModel != "" {
		fmt.Fprintf(&b, ", %s", m.CPUModel)
	}
	if m.Kernel != "" {
		fmt.Fprintf(&b, ", Linux %s", m.Kernel)
	}
	fmt.Fprintf(&b, "\nproxy:    %s\nupstream: %s\n", st.Proxy, strings.Join(st.Upstream, " "))
	fmt.Fprintf(&b, "settings: rounds %d, warmup %d, latency calls %d, %gs per throughput phase, timeout %gs",
		st.Rounds, st.Warmup, st.LatencyCalls, st.DurationSec, st.TimeoutSec)
	if st.Rounds > 1 {
		b.WriteString(" (figures are medians over rounds, errors are totals)")
	}
	b.WriteString("\n\n")

	const row = "%-16s %-12s %8s %6s %9s %8s %8s %8s %9s %9s %8s %8s\n"
	fmt.Fprintf(&b, row, "phase", "target", "calls", "errors", "calls/s", "p50 µs", "p90 µs", "p99 µs", "max µs", "mean µs", "CPU µs", "bench µs")
	for _, p := range r.Summary.Phases {
		name := fmt.Sprintf("%s c=%d", p.Kind, p.Concurrency)
		for _, t := range []struct {
			name string
			f    figures
		}{{targetDirect, p.Direct}, {targetProxy, p.Proxy}} {
			f := t.f
			fmt.Fprintf(&b, row, name, t.name, fmt.Sprintf("%.0f", f.Calls), fmt.Sprint(f.Errors),
				fmt.Sprintf("%.0f", f.CallsPerSec), fmt.Sprintf("%.1f", f.P50US), fmt.Sprintf("%.1f", f.P90US),
				fmt.Sprintf("%.1f", f.P99US), fmt.Sprintf("%.1f", f.MaxUS), fmt.Sprintf("%.1f", f.MeanUS),
				fmt.Sprintf("%.1f", f.CPUPerCallUS), fmt.Sprintf("%.1f", f.BenchCPUPerCallUS))
		}
		d, x := p.Direct, p.Proxy
		fmt.Fprintf(&b, row, "", "proxy/direct", "", "",
			fmtRatio(p.ThroughputRatio), fmtRatio(p.P50Ratio), fmtRatio(ratio(x.P90US, d.P90US)),
			fmtRatio(p.P99Ratio), fmtRatio(ratio(x.MaxUS, d.MaxUS)), fmtRatio(ratio(x.MeanUS, d.MeanUS)),
			fmtRatio(ratio(x.CPUPerCallUS, d.CPUPerCallUS)), fmtRatio(ratio(x.BenchCPUPerCallUS, d.BenchCPUPerCallUS)))
	}
	b.WriteString("CPU µs: CPU time per call of the target process alone (the upstream for direct; the proxy\n")
	b.WriteString("process, not its upstream, for proxy). bench µs: CPU of mcp-bench itself per call.\n")
	b.WriteString("Both from /proc/PID/stat at 10 ms resolution per phase.\n\n")

	s := r.Summary
	b.WriteString("summary\n")
	sw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, p := range s.Phases {
		switch {
		case p.Kind == kindLatency:
			fmt.Fprintf(sw, "  p50 latency proxy/direct at c=%d\t%s (%.1f µs vs %.1f µs)\n", p.Concurrency, fmtRatio(p.P50Ratio), p.Proxy.P50US, p.Direct.P50US)
		default:
			fmt.Fprintf(sw, "  throughput proxy/direct at c=%d\t%s (%.0f vs %.0f calls/s)\n", p.Concurrency, fmtRatio(p.ThroughputRatio), p.Proxy.CallsPerSec, p.Direct.CallsPerSec)
		}
	}
	var cpu []string
	for _, p := range s.Phases {
		cpu = append(cpu, fmt.Sprintf("c=%d %.1f µs", p.Concurrency, p.Proxy.CPUPerCallUS))
	}
	fmt.Fprintf(sw, "  proxy CPU per call\t%s\n", strings.Join(cpu, ", "))
	fmt.Fprintf(sw, "  proxy peak RSS (VmHWM)\t%.1f MiB\n", s.ProxyPeakRSSMiB)
	if s.IdleUpstreams > 0 {
		fmt.Fprintf(sw, "  proxy idle RSS, %d upstreams\t%.1f MiB (%d tools listed)\n", s.IdleUpstreams, s.IdleRSSMiB, s.IdleTools)
	}
	fmt.Fprintf(sw, "  errors\t%d\n", s.Errors)
	if err := sw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeJSON writes the report as indented JSON to path.
func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the JSON report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the JSON report: %w", err)
	}
	return nil
}
