package main

import (
	"os"
	"runtime"
	"strings"
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
