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
	Mode          string   `json:"mode"`
	HTTPUpstream  bool     `json:"http_upstream,omitempty"`
	StdioHTTPUp   bool     `json:"stdio_httpup,omitempty"`
	Floor         bool     `json:"floor,omitempty"`
	TLS           bool     `json:"tls,omitempty"`
	Sessions      int      `json:"sessions,omitempty"`
	SessionCalls  int      `json:"session_calls,omitempty"`
	IdleSessions  int      `json:"idle_sessions,omitempty"`
	Plugin        []string `json:"plugin,omitempty"`      // -plugin: the command of proxy+plugin's plugin
	PluginHops    int      `json:"plugin_hops,omitempty"` // -plugin: process crossings per call
	ExtraHCL      string   `json:"extra_hcl,omitempty"`   // -extra-hcl: the file appended to proxy+extra's config
	Cluster       int      `json:"cluster,omitempty"`     // -cluster: replicas of cluster-N
}

// roundResult is one round: every phase against both targets, then the idle phase.
type roundResult struct {
	Round           int           `json:"round"`
	Phases          []phaseResult `json:"phases"`
	ProxyPeakRSSkB  int64         `json:"proxy_peak_rss_kb"` // VmHWM of the proxy process over the round
	ProxyPeakRSSMiB float64       `json:"proxy_peak_rss_mib"`
	// ProxyHTTPUpPeakRSSkB is the VmHWM of the proxy with an HTTP upstream (-mode http).
	ProxyHTTPUpPeakRSSkB int64 `json:"proxy_httpup_peak_rss_kb,omitempty"`
	// ProxyPluginPeakRSSkB is the VmHWM of the proxy process of proxy+plugin (-plugin).
	ProxyPluginPeakRSSkB int64 `json:"proxy_plugin_peak_rss_kb,omitempty"`
	// ProxyExtraPeakRSSkB is the VmHWM of the proxy of proxy+extra (-extra-hcl).
	ProxyExtraPeakRSSkB int64           `json:"proxy_extra_peak_rss_kb,omitempty"`
	Idle                *idleResult     `json:"idle,omitempty"`
	Sessions            *sessionsResult `json:"sessions,omitempty"`
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
	// -mode http: TCP connections mcp-bench opened to the target per call, and the
	// percentage of the upstream's tools/call that came on a new connection from the
	// proxy (proxy-httpup only).
	NewConnsPerCall    *float64 `json:"new_conns_per_call,omitempty"`
	UpstreamNewConnPct *float64 `json:"upstream_new_conn_pct,omitempty"`
	// proxy+plugin: CPUPerCallUS divided between the proxy and its plugin processes.
	CPUSplit *cpuSplitUS `json:"cpu_split,omitempty"`
}

// cpuSplitUS is the CPU per call of proxy+plugin by process, medians over rounds.
type cpuSplitUS struct {
	ProxyUS  float64 `json:"proxy_us"`
	PluginUS float64 `json:"plugin_us"`
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
	// -mode http -http-upstream: the proxy with an HTTP upstream, its ratios to direct.
	ProxyHTTPUp           *figures `json:"proxy_httpup,omitempty"`
	HTTPUpP50Ratio        float64  `json:"httpup_p50_ratio,omitempty"`
	HTTPUpP99Ratio        float64  `json:"httpup_p99_ratio,omitempty"`
	HTTPUpThroughputRatio float64  `json:"httpup_throughput_ratio,omitempty"`
	// -plugin: the proxy with the plugin (compared with proxy in summary.plugin_hops).
	ProxyPlugin *figures `json:"proxy_plugin,omitempty"`
	// -extra-hcl: the proxy with the extra config (compared with proxy in
	// summary.extra_config).
	ProxyExtra *figures `json:"proxy_extra,omitempty"`
	// -stdio-httpup, -floor: the further targets, in start order, with their ratios to
	// direct.
	Others []otherFigures `json:"others,omitempty"`
}

// otherFigures are one further target's figures in a phase.
type otherFigures struct {
	Target          string  `json:"target"`
	Figures         figures `json:"figures"`
	P50Ratio        float64 `json:"p50_ratio"`
	ThroughputRatio float64 `json:"throughput_ratio"`
}

// floorPairs names, for each proxy target, the floor forwarder of its path.
var floorPairs = [][2]string{
	{targetProxy, targetFloor},
	{targetProxyHTTPUp, targetFloorHTTPUp},
	{targetStdioHTTPUp, targetFloorStdioHTTPUp},
}

// otherTargets are the targets summarized in phaseSummary.Others, in report order.
var otherTargets = []string{targetStdioHTTPUp, targetFloor, targetFloorHTTPUp, targetFloorStdioHTTPUp}

// figuresOf returns the figures of target name in p, nil when it was not measured.
func (p *phaseSummary) figuresOf(name string) *figures {
	switch name {
	case targetDirect:
		return &p.Direct
	case targetProxy:
		return &p.Proxy
	case targetProxyHTTPUp:
		return p.ProxyHTTPUp
	}
	for i := range p.Others {
		if p.Others[i].Target == name {
			return &p.Others[i].Figures
		}
	}
	return nil
}

// sessionsSummary condenses the sessions phases of all rounds: medians, except where
// noted.
type sessionsSummary struct {
	Sessions        int     `json:"sessions"`
	CallsPerSession int     `json:"calls_per_session"`
	OpenedMin       int     `json:"opened_min"` // fewest sessions fully opened in a round
	Errors          int     `json:"errors"`     // total
	FirstError      string  `json:"first_error,omitempty"`
	OpenSec         float64 `json:"open_sec"`
	BaselineRSSMiB  float64 `json:"baseline_rss_mib"`
	OpenRSSMiB      float64 `json:"open_rss_mib"`
	AfterRSSMiB     float64 `json:"after_rss_mib"`
	PerSessionKB    float64 `json:"per_session_kb"`
	PerSessionKBMax float64 `json:"per_session_kb_max"`
	PerSessionGoKB  float64 `json:"per_session_go_kb,omitempty"` // Go heap and stacks (debug listener)
	StreamsEndedMin int     `json:"streams_ended_min"`
	// Residues after DELETE, worst round: After minus Baseline.
	FDResidue        int   `json:"fd_residue"`
	ThreadResidue    int64 `json:"thread_residue"`
	GoroutineResidue *int  `json:"goroutine_residue,omitempty"` // nil: no debug listener
	// The last round's snapshots, for the counts.
	Baseline    procSnapshot `json:"baseline"`
	Open        procSnapshot `json:"open"`
	After       procSnapshot `json:"after"`
	ProxyNofile int64        `json:"proxy_nofile"`
	BenchNofile int64        `json:"bench_nofile"`
}

type summary struct {
	Phases          []phaseSummary `json:"phases"`
	ProxyPeakRSSMiB float64        `json:"proxy_peak_rss_mib"` // median over rounds
	IdleUpstreams   int            `json:"idle_upstreams,omitempty"`
	IdleTools       int            `json:"idle_tools,omitempty"` // fewest listed in any round
	IdleRSSMiB      float64        `json:"idle_rss_mib,omitempty"`
	// ProxyHTTPUpPeakRSSMiB is the median VmHWM of the proxy with an HTTP upstream.
	ProxyHTTPUpPeakRSSMiB float64          `json:"proxy_httpup_peak_rss_mib,omitempty"`
	Sessions              *sessionsSummary `json:"sessions,omitempty"`
	// -plugin: the median VmHWM of the proxy process of proxy+plugin, and what the plugin
	// adds to a call in each phase.
	ProxyPluginPeakRSSMiB float64     `json:"proxy_plugin_peak_rss_mib,omitempty"`
	PluginHops            []pluginHop `json:"plugin_hops,omitempty"`
	// -extra-hcl: the median VmHWM of the proxy of proxy+extra, and what the extra config
	// adds to a call in each phase.
	ProxyExtraPeakRSSMiB float64     `json:"proxy_extra_peak_rss_mib,omitempty"`
	ExtraConfig          []extraCost `json:"extra_config,omitempty"`
	// -cluster: cluster-1 against proxy and cluster-N against cluster-1, in each phase.
	Cluster []clusterCost `json:"cluster,omitempty"`
	Errors  int           `json:"errors"` // failed calls in all phases and rounds, plus idle-phase mismatches and sessions-phase errors
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
			Mode:          o.mode,
			HTTPUpstream:  o.mode == modeHTTP && o.httpUpstream,
			StdioHTTPUp:   o.stdioHTTPUp,
			Floor:         o.floor,
			TLS:           o.useTLS,
			Sessions:      o.sessions,
			SessionCalls:  o.sessionCalls,
			IdleSessions:  o.idleSessions,
			Plugin:        o.plugin,
			PluginHops:    pluginHopsSetting(o),
			ExtraHCL:      o.extraHCL,
			Cluster:       o.cluster,
		},
	}
}

// pluginHopsSetting is -plugin-hops when there is a plugin, else 0 (left out).
func pluginHopsSetting(o *options) int {
	if len(o.plugin) == 0 {
		return 0
	}
	return o.pluginHops
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
		if up := byKey[k][targetProxyHTTPUp]; len(up) > 0 {
			f := medianFigures(up)
			ps.ProxyHTTPUp = &f
			ps.HTTPUpP50Ratio = ratio(f.P50US, ps.Direct.P50US)
			ps.HTTPUpP99Ratio = ratio(f.P99US, ps.Direct.P99US)
			ps.HTTPUpThroughputRatio = ratio(f.CallsPerSec, ps.Direct.CallsPerSec)
		}
		if pp := byKey[k][targetProxyPlugin]; len(pp) > 0 {
			f := medianFigures(pp)
			ps.ProxyPlugin = &f
			s.PluginHops = append(s.PluginHops, summarizePluginHop(k.kind, k.conc, r.Settings.PluginHops, r.Rounds, &ps.Proxy, &f))
		}
		for _, name := range otherTargets {
			if rs := byKey[k][name]; len(rs) > 0 {
				f := medianFigures(rs)
				ps.Others = append(ps.Others, otherFigures{Target: name, Figures: f,
					P50Ratio: ratio(f.P50US, ps.Direct.P50US), ThroughputRatio: ratio(f.CallsPerSec, ps.Direct.CallsPerSec)})
			}
		}
		if pe := byKey[k][targetProxyExtra]; len(pe) > 0 {
			f := medianFigures(pe)
			ps.ProxyExtra = &f
			s.ExtraConfig = append(s.ExtraConfig, summarizeExtra(k.kind, k.conc, r.Rounds, &ps.Proxy, &f))
		}
		if n := r.Settings.Cluster; n > 0 && len(byKey[k][clusterTargetName(1)]) > 0 && len(byKey[k][clusterTargetName(n)]) > 0 {
			one, many := medianFigures(byKey[k][clusterTargetName(1)]), medianFigures(byKey[k][clusterTargetName(n)])
			base := medianFigures(byKey[k][targetHAProxy1])
			s.Cluster = append(s.Cluster, summarizeCluster(k.kind, k.conc, n, &ps.Proxy, &one, &many, &base,
				medianClusterStats(byKey[k][clusterTargetName(1)]), medianClusterStats(byKey[k][clusterTargetName(n)])))
		}
		s.Phases = append(s.Phases, ps)
	}
	var peaks, idle, upPeaks, pluginPeaks, extraPeaks []float64
	var sessions []*sessionsResult
	for _, rr := range r.Rounds {
		peaks = append(peaks, rr.ProxyPeakRSSMiB)
		if rr.ProxyHTTPUpPeakRSSkB > 0 {
			upPeaks = append(upPeaks, kBToMiB(rr.ProxyHTTPUpPeakRSSkB))
		}
		if rr.ProxyPluginPeakRSSkB > 0 {
			pluginPeaks = append(pluginPeaks, kBToMiB(rr.ProxyPluginPeakRSSkB))
		}
		if rr.ProxyExtraPeakRSSkB > 0 {
			extraPeaks = append(extraPeaks, kBToMiB(rr.ProxyExtraPeakRSSkB))
		}
		if rr.Sessions != nil {
			sessions = append(sessions, rr.Sessions)
			s.Errors += rr.Sessions.Errors
		}
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
	s.ProxyHTTPUpPeakRSSMiB = median(upPeaks)
	s.ProxyPluginPeakRSSMiB = median(pluginPeaks)
	s.ProxyExtraPeakRSSMiB = median(extraPeaks)
	s.Sessions = summarizeSessions(sessions)
	r.Summary = s
}

// summarizeSessions condenses the sessions phases; nil when there were none.
func summarizeSessions(rs []*sessionsResult) *sessionsSummary {
	if len(rs) == 0 {
		return nil
	}
	last := rs[len(rs)-1]
	s := &sessionsSummary{Sessions: last.Sessions, CallsPerSession: last.CallsPerSession, OpenedMin: last.Opened,
		StreamsEndedMin: last.StreamsEnded, Baseline: last.Baseline, Open: last.Open, After: last.After,
		ProxyNofile: last.ProxyNofile, BenchNofile: last.BenchNofile}
	var openSec, base, open, after, per, perGo []float64
	for _, r := range rs {
		s.Errors += r.Errors
		if s.FirstError == "" {
			s.FirstError = r.FirstError
		}
		s.OpenedMin = min(s.OpenedMin, r.Opened)
		s.StreamsEndedMin = min(s.StreamsEndedMin, r.StreamsEnded)
		openSec = append(openSec, r.OpenSec)
		base = append(base, kBToMiB(r.Baseline.RSSkB))
		open = append(open, kBToMiB(r.Open.RSSkB))
		after = append(after, kBToMiB(r.After.RSSkB))
		per = append(per, r.PerSessionKB)
		if r.PerSessionGoKB != 0 {
			perGo = append(perGo, r.PerSessionGoKB)
		}
		s.PerSessionKBMax = max(s.PerSessionKBMax, r.PerSessionKB)
		s.FDResidue = max(s.FDResidue, r.After.FDs-r.Baseline.FDs)
		s.ThreadResidue = max(s.ThreadResidue, r.After.Threads-r.Baseline.Threads)
		if r.After.Goroutines >= 0 && r.Baseline.Goroutines >= 0 {
			g := r.After.Goroutines - r.Baseline.Goroutines
			if s.GoroutineResidue == nil || g > *s.GoroutineResidue {
				s.GoroutineResidue = &g
			}
		}
	}
	s.OpenSec, s.BaselineRSSMiB, s.OpenRSSMiB, s.AfterRSSMiB, s.PerSessionKB =
		median(openSec), median(base), median(open), median(after), median(per)
	s.PerSessionGoKB = median(perGo)
	return s
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
	var conns, upPct, splitProxy, splitPlugin []float64
	for i := range ps {
		if c := ps[i].CPUSplit; c != nil {
			splitProxy = append(splitProxy, c.ProxyCPUPerCallUS)
			splitPlugin = append(splitPlugin, c.PluginCPUPerCallUS)
		}
		if h := ps[i].HTTP; h != nil {
			conns = append(conns, h.NewConnsPerCall)
			if h.UpstreamNewConnPct != nil {
				upPct = append(upPct, *h.UpstreamNewConnPct)
			}
		}
	}
	if len(conns) > 0 {
		v := median(conns)
		f.NewConnsPerCall = &v
	}
	if len(upPct) > 0 {
		v := median(upPct)
		f.UpstreamNewConnPct = &v
	}
	if len(splitProxy) > 0 {
		f.CPUSplit = &cpuSplitUS{ProxyUS: median(splitProxy), PluginUS: median(splitPlugin)}
	}
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
		if rr.Sessions != nil && rr.Sessions.FirstError != "" {
			return "sessions phase: " + rr.Sessions.FirstError
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
	fmt.Fprintf(&b, "mcp-bench: tools/call %q %s, mcp-proxy vs. the upstream called directly, over %s\n", st.Tool, st.Args, st.Mode)
	fmt.Fprintf(&b, "machine:  %s/%s, NumCPU %d, GOMAXPROCS %d, %s (mcp-bench)", m.GOOS, m.GOARCH, m.NumCPU, m.GOMAXPROCS, m.GoVersion)
	if m.CPUModel != "" {
		fmt.Fprintf(&b, ", %s", m.CPUModel)
	}
	if m.Kernel != "" {
		fmt.Fprintf(&b, ", Linux %s", m.Kernel)
	}
	fmt.Fprintf(&b, "\nproxy:    %s\nupstream: %s\n", st.Proxy, strings.Join(st.Upstream, " "))
	if len(st.Plugin) > 0 {
		fmt.Fprintf(&b, "plugin:   %s (%d hops per call)\n", strings.Join(st.Plugin, " "), st.PluginHops)
		fmt.Fprintf(&b, "targets:  direct = the upstream; proxy = mcp-proxy in front of it; proxy+plugin = the same\n")
		fmt.Fprintf(&b, "          with plugin %q on tools %q (failure closed, timeout %s)\n", benchPluginLabel, globLiteral(st.Tool), benchPluginTimeout)
	}
	if st.ExtraHCL != "" {
		fmt.Fprintf(&b, "targets:  direct = the upstream; proxy = mcp-proxy in front of it; proxy+extra = the same\n")
		fmt.Fprintf(&b, "          with the HCL of %s appended to its config\n", st.ExtraHCL)
	}
	if st.Mode == modeHTTP {
		b.WriteString("targets:  direct = the upstream serving HTTP itself; proxy = mcp-proxy HTTP front end, upstream over stdio")
		if st.HTTPUpstream {
			b.WriteString(";\n          proxy-httpup = mcp-proxy HTTP front end, upstream over HTTP")
		}
		if st.StdioHTTPUp {
			b.WriteString(";\n          stdio-httpup = mcp-proxy over stdio, upstream over HTTP")
		}
		if st.TLS {
			b.WriteString(";\n          -tls: the upstream serving HTTP (direct, and every HTTP upstream) serves HTTPS\n          (self-signed loopback certificate, HTTP/2 offered)")
		}
		if st.Floor {
			b.WriteString(";\n          floor* = the floor forwarder of each path (h1 front end or stdio, the codec, one pipe\n          with a pending map or the lean HTTP client; no logic)")
		}
		b.WriteString("\n")
		if st.IdleSessions > 0 {
			fmt.Fprintf(&b, "          every target holds %d extra idle sessions with open GET streams\n", st.IdleSessions)
		}
	}
	fmt.Fprintf(&b, "settings: rounds %d, warmup %d, latency calls %d, %gs per throughput phase, timeout %gs",
		st.Rounds, st.Warmup, st.LatencyCalls, st.DurationSec, st.TimeoutSec)
	if st.Rounds > 1 {
		b.WriteString(" (figures are medians over rounds, errors are totals)")
	}
	b.WriteString("\n\n")

	const row = "%-16s %-31s %8s %6s %9s %8s %8s %8s %9s %9s %8s %8s\n"
	fmt.Fprintf(&b, row, "phase", "target", "calls", "errors", "calls/s", "p50 µs", "p90 µs", "p99 µs", "max µs", "mean µs", "CPU µs", "bench µs")
	type col struct {
		name string
		f    *figures
	}
	for _, p := range r.Summary.Phases {
		name := fmt.Sprintf("%s c=%d", p.Kind, p.Concurrency)
		cols := []col{{targetDirect, &p.Direct}, {targetProxy, &p.Proxy}}
		if p.ProxyHTTPUp != nil {
			cols = append(cols, col{targetProxyHTTPUp, p.ProxyHTTPUp})
		}
		if p.ProxyPlugin != nil {
			cols = append(cols, col{targetProxyPlugin, p.ProxyPlugin})
		}
		if p.ProxyExtra != nil {
			cols = append(cols, col{targetProxyExtra, p.ProxyExtra})
		}
		for i := range p.Others {
			cols = append(cols, col{p.Others[i].Target, &p.Others[i].Figures})
		}
		for _, c := range cols {
			f := c.f
			fmt.Fprintf(&b, row, name, c.name, fmt.Sprintf("%.0f", f.Calls), fmt.Sprint(f.Errors),
				fmt.Sprintf("%.0f", f.CallsPerSec), fmt.Sprintf("%.1f", f.P50US), fmt.Sprintf("%.1f", f.P90US),
				fmt.Sprintf("%.1f", f.P99US), fmt.Sprintf("%.1f", f.MaxUS), fmt.Sprintf("%.1f", f.MeanUS),
				fmt.Sprintf("%.1f", f.CPUPerCallUS), fmt.Sprintf("%.1f", f.BenchCPUPerCallUS))
		}
		d := p.Direct
		for _, c := range cols[1:] {
			x := c.f
			fmt.Fprintf(&b, row, "", c.name+"/direct", "", "",
				fmtRatio(ratio(x.CallsPerSec, d.CallsPerSec)), fmtRatio(ratio(x.P50US, d.P50US)), fmtRatio(ratio(x.P90US, d.P90US)),
				fmtRatio(ratio(x.P99US, d.P99US)), fmtRatio(ratio(x.MaxUS, d.MaxUS)), fmtRatio(ratio(x.MeanUS, d.MeanUS)),
				fmtRatio(ratio(x.CPUPerCallUS, d.CPUPerCallUS)), fmtRatio(ratio(x.BenchCPUPerCallUS, d.BenchCPUPerCallUS)))
		}
		for _, pair := range floorPairs {
			x, y := p.figuresOf(pair[0]), p.figuresOf(pair[1])
			if x == nil || y == nil {
				continue
			}
			fmt.Fprintf(&b, row, "", pair[0]+"/"+pair[1], "", "",
				fmtRatio(ratio(x.CallsPerSec, y.CallsPerSec)), fmtRatio(ratio(x.P50US, y.P50US)), fmtRatio(ratio(x.P90US, y.P90US)),
				fmtRatio(ratio(x.P99US, y.P99US)), fmtRatio(ratio(x.MaxUS, y.MaxUS)), fmtRatio(ratio(x.MeanUS, y.MeanUS)),
				fmtRatio(ratio(x.CPUPerCallUS, y.CPUPerCallUS)), fmtRatio(ratio(x.BenchCPUPerCallUS, y.BenchCPUPerCallUS)))
		}
		for _, c := range cols[2:] {
			if c.name != targetProxyPlugin && c.name != targetProxyExtra {
				continue
			}
			x, y := c.f, &p.Proxy
			fmt.Fprintf(&b, row, "", c.name+"/proxy", "", "",
				fmtRatio(ratio(x.CallsPerSec, y.CallsPerSec)), fmtRatio(ratio(x.P50US, y.P50US)), fmtRatio(ratio(x.P90US, y.P90US)),
				fmtRatio(ratio(x.P99US, y.P99US)), fmtRatio(ratio(x.MaxUS, y.MaxUS)), fmtRatio(ratio(x.MeanUS, y.MeanUS)),
				fmtRatio(ratio(x.CPUPerCallUS, y.CPUPerCallUS)), fmtRatio(ratio(x.BenchCPUPerCallUS, y.BenchCPUPerCallUS)))
		}
	}
	b.WriteString("CPU µs: CPU time per call of the target process alone (the upstream for direct; the proxy\n")
	if len(st.Plugin) > 0 {
		b.WriteString("process, not its upstream, for proxy; the proxy process and its plugin processes, not\n")
		b.WriteString("the upstream, for proxy+plugin). bench µs: CPU of mcp-bench itself per call.\n")
	} else if st.ExtraHCL != "" {
		b.WriteString("process, not its upstream, for proxy and proxy+extra). bench µs: CPU of mcp-bench itself\n")
		b.WriteString("per call.\n")
	} else {
		b.WriteString("process, not its upstream, for proxy). bench µs: CPU of mcp-bench itself per call.\n")
	}
	b.WriteString("Both from /proc/PID/stat at 10 ms resolution per phase.\n")
	if len(st.Plugin) > 0 {
		b.WriteString("The CPU split of proxy+plugin (proxy + plugin) takes the median of each part over rounds,\n")
		b.WriteString("so the parts need not add up to the median total.\n")
	}
	b.WriteString("\n")

	if st.Mode == modeHTTP {
		b.WriteString("TCP connections opened during the measured part of each phase, per call\n")
		const crow = "%-16s %-19s %16s %26s\n"
		fmt.Fprintf(&b, crow, "phase", "target", "client->target", "proxy->HTTP upstream")
		for _, p := range r.Summary.Phases {
			name := fmt.Sprintf("%s c=%d", p.Kind, p.Concurrency)
			cols := []col{{targetDirect, &p.Direct}, {targetProxy, &p.Proxy}}
			if p.ProxyHTTPUp != nil {
				cols = append(cols, col{targetProxyHTTPUp, p.ProxyHTTPUp})
			}
			for i := range p.Others {
				cols = append(cols, col{p.Others[i].Target, &p.Others[i].Figures})
			}
			for _, c := range cols {
				client, up := "n/a", "n/a"
				if c.f.NewConnsPerCall != nil {
					client = fmt.Sprintf("%.4f", *c.f.NewConnsPerCall)
				}
				switch {
				case c.f.UpstreamNewConnPct != nil:
					up = fmt.Sprintf("%.3f%% of calls", *c.f.UpstreamNewConnPct)
				case c.name == targetProxy:
					up = "n/a (stdio upstream)"
				case c.name == targetDirect:
					up = "-"
				}
				fmt.Fprintf(&b, crow, name, c.name, client, up)
			}
		}
		b.WriteString("\n")
	}

	s := r.Summary
	b.WriteString("summary\n")
	sw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, p := range s.Phases {
		switch {
		case p.Kind == kindLatency:
			fmt.Fprintf(sw, "  p50 latency proxy/direct at c=%d\t%s (%.1f µs vs %.1f µs)\n", p.Concurrency, fmtRatio(p.P50Ratio), p.Proxy.P50US, p.Direct.P50US)
			if p.ProxyHTTPUp != nil {
				fmt.Fprintf(sw, "  p50 latency proxy-httpup/direct at c=%d\t%s (%.1f µs vs %.1f µs)\n", p.Concurrency, fmtRatio(p.HTTPUpP50Ratio), p.ProxyHTTPUp.P50US, p.Direct.P50US)
			}
		default:
			fmt.Fprintf(sw, "  throughput proxy/direct at c=%d\t%s (%.0f vs %.0f calls/s)\n", p.Concurrency, fmtRatio(p.ThroughputRatio), p.Proxy.CallsPerSec, p.Direct.CallsPerSec)
			if p.ProxyHTTPUp != nil {
				fmt.Fprintf(sw, "  throughput proxy-httpup/direct at c=%d\t%s (%.0f vs %.0f calls/s)\n", p.Concurrency, fmtRatio(p.HTTPUpThroughputRatio), p.ProxyHTTPUp.CallsPerSec, p.Direct.CallsPerSec)
			}
		}
	}
	for _, p := range s.Phases {
		for _, o := range p.Others {
			if p.Kind == kindLatency {
				fmt.Fprintf(sw, "  p50 latency %s/direct at c=%d\t%s (%.1f µs vs %.1f µs)\n", o.Target, p.Concurrency, fmtRatio(o.P50Ratio), o.Figures.P50US, p.Direct.P50US)
			} else {
				fmt.Fprintf(sw, "  throughput %s/direct at c=%d\t%s (%.0f vs %.0f calls/s)\n", o.Target, p.Concurrency, fmtRatio(o.ThroughputRatio), o.Figures.CallsPerSec, p.Direct.CallsPerSec)
			}
		}
	}
	for _, pair := range floorPairs {
		var parts []string
		for _, p := range s.Phases {
			x, y := p.figuresOf(pair[0]), p.figuresOf(pair[1])
			if x == nil || y == nil {
				continue
			}
			label := fmt.Sprintf("c=%d", p.Concurrency)
			if p.Kind == kindLatency {
				label = "latency"
			}
			parts = append(parts, fmt.Sprintf("%s %s (%.1f vs %.1f µs)", label, fmtRatio(ratio(x.CPUPerCallUS, y.CPUPerCallUS)), x.CPUPerCallUS, y.CPUPerCallUS))
		}
		if len(parts) > 0 {
			fmt.Fprintf(sw, "  CPU per call %s/%s\t%s\n", pair[0], pair[1], strings.Join(parts, ", "))
		}
	}
	var cpu, cpuUp, cpuPlugin []string
	for _, p := range s.Phases {
		label := fmt.Sprintf("c=%d", p.Concurrency)
		if p.Kind == kindLatency {
			label = "latency"
		}
		cpu = append(cpu, fmt.Sprintf("%s %.1f µs", label, p.Proxy.CPUPerCallUS))
		if p.ProxyHTTPUp != nil {
			cpuUp = append(cpuUp, fmt.Sprintf("%s %.1f µs", label, p.ProxyHTTPUp.CPUPerCallUS))
		}
		if f := p.ProxyPlugin; f != nil {
			split := ""
			if c := f.CPUSplit; c != nil {
				split = fmt.Sprintf(" (proxy %.1f + plugin %.1f)", c.ProxyUS, c.PluginUS)
			}
			cpuPlugin = append(cpuPlugin, fmt.Sprintf("%s %.1f µs%s", label, f.CPUPerCallUS, split))
		}
	}
	fmt.Fprintf(sw, "  proxy CPU per call\t%s\n", strings.Join(cpu, ", "))
	if len(cpuUp) > 0 {
		fmt.Fprintf(sw, "  proxy-httpup CPU per call\t%s\n", strings.Join(cpuUp, ", "))
	}
	if len(cpuPlugin) > 0 {
		fmt.Fprintf(sw, "  proxy+plugin CPU per call\t%s\n", strings.Join(cpuPlugin, ", "))
	}
	writePluginHops(sw, s.PluginHops)
	writeExtraCosts(sw, s.ExtraConfig)
	writeClusterCosts(sw, s.Cluster)
	var worstClient, worstUp float64
	haveUp := false
	for _, p := range s.Phases {
		fs := []*figures{&p.Proxy, p.ProxyHTTPUp}
		for i := range p.Others {
			fs = append(fs, &p.Others[i].Figures)
		}
		for _, f := range fs {
			if f == nil {
				continue
			}
			if f.NewConnsPerCall != nil {
				worstClient = max(worstClient, *f.NewConnsPerCall)
			}
			if f.UpstreamNewConnPct != nil {
				worstUp, haveUp = max(worstUp, *f.UpstreamNewConnPct), true
			}
		}
	}
	if st.Mode == modeHTTP {
		fmt.Fprintf(sw, "  new TCP conns per call, client->proxy\t%.4f (worst phase)\n", worstClient)
		if haveUp {
			fmt.Fprintf(sw, "  calls opening a new TCP conn, proxy->HTTP upstream\t%.3f%% (worst phase)\n", worstUp)
		}
	}
	fmt.Fprintf(sw, "  proxy peak RSS (VmHWM)\t%.1f MiB\n", s.ProxyPeakRSSMiB)
	if s.ProxyHTTPUpPeakRSSMiB > 0 {
		fmt.Fprintf(sw, "  proxy-httpup peak RSS (VmHWM)\t%.1f MiB\n", s.ProxyHTTPUpPeakRSSMiB)
	}
	if s.ProxyPluginPeakRSSMiB > 0 {
		fmt.Fprintf(sw, "  proxy+plugin peak RSS (VmHWM, proxy process)\t%.1f MiB\n", s.ProxyPluginPeakRSSMiB)
	}
	if s.ProxyExtraPeakRSSMiB > 0 {
		fmt.Fprintf(sw, "  proxy+extra peak RSS (VmHWM)\t%.1f MiB\n", s.ProxyExtraPeakRSSMiB)
	}
	if s.IdleUpstreams > 0 {
		fmt.Fprintf(sw, "  proxy idle RSS, %d upstreams\t%.1f MiB (%d tools listed)\n", s.IdleUpstreams, s.IdleRSSMiB, s.IdleTools)
	}
	if ss := s.Sessions; ss != nil {
		fmt.Fprintf(sw, "  sessions: %d concurrent, GET stream open, %d calls each\topened %d (fewest in a round), errors %d, %.1f s to open\n",
			ss.Sessions, ss.CallsPerSession, ss.OpenedMin, ss.Errors, ss.OpenSec)
		fmt.Fprintf(sw, "  sessions: proxy RSS per idle session\t%.1f KB (worst round %.1f KB): %.1f MiB -> %.1f MiB with all open\n",
			ss.PerSessionKB, ss.PerSessionKBMax, ss.BaselineRSSMiB, ss.OpenRSSMiB)
		fmt.Fprintf(sw, "  sessions: after DELETE of all\tRSS %.1f MiB; GET streams ended %d/%d; fds %d -> %d -> %d; threads %d -> %d -> %d\n",
			ss.AfterRSSMiB, ss.StreamsEndedMin, ss.OpenedMin, ss.Baseline.FDs, ss.Open.FDs, ss.After.FDs,
			ss.Baseline.Threads, ss.Open.Threads, ss.After.Threads)
		if ss.GoroutineResidue != nil {
			fmt.Fprintf(sw, "  sessions: goroutines\t%d -> %d -> %d\n", ss.Baseline.Goroutines, ss.Open.Goroutines, ss.After.Goroutines)
			if ss.Baseline.HeapKB >= 0 {
				fmt.Fprintf(sw, "  sessions: Go heap + stacks in use (after GC)\t%d -> %d -> %d KB (%.1f KB per idle session)\n",
					ss.Baseline.HeapKB+ss.Baseline.StackKB, ss.Open.HeapKB+ss.Open.StackKB, ss.After.HeapKB+ss.After.StackKB, ss.PerSessionGoKB)
			}
		} else {
			fmt.Fprintf(sw, "  sessions: goroutines\tn/a (the proxy serves no net/http/pprof on %s)\n", debugEnv)
		}
		fmt.Fprintf(sw, "  sessions: RLIMIT_NOFILE\tproxy %s, mcp-bench %d\n", fmtLimit(ss.ProxyNofile), ss.BenchNofile)
		if ss.FirstError != "" {
			fmt.Fprintf(sw, "  sessions: first error\t%s\n", ss.FirstError)
		}
	}
	fmt.Fprintf(sw, "  errors\t%d\n", s.Errors)
	if err := sw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtLimit(n int64) string {
	if n < 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
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
