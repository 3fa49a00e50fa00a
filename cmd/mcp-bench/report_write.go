package main

// The report's output: the human-readable table and the JSON file.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

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
