package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// -plugin: a third target, proxy+plugin, is the same proxy and upstream with one plugin
// selecting the measured tool. Its CPU figure is the proxy's plus its plugin processes',
// so that comparing it with proxy gives what one plugin adds to a call.

const (
	targetProxyPlugin = "proxy+plugin"

	// benchPluginLabel names the plugin in the generated config.
	benchPluginLabel = "bench"
	// benchPluginTimeout is the plugin's per-hook timeout: generous, so that a slow hook on
	// a loaded machine shows in the latency instead of failing the call.
	benchPluginTimeout = "5s"

	maxPluginHops = 64

	// The target for what one plugin hop (one process crossing) may add to a
	// call, compared in the latency phase.
	hopTargetP50US = 250
	hopTargetCPUUS = 150
)

// benchPlugin is the plugin block of the proxy+plugin config: the -plugin command,
// selecting exactly the measured tool, failing closed, with an empty config block.
func benchPlugin(o *options) pluginBlock {
	return pluginBlock{
		Label:   benchPluginLabel,
		Command: o.plugin,
		Tools:   []string{globLiteral(o.tool)},
		Failure: "closed",
		Timeout: benchPluginTimeout,
	}
}

// pluginFinder finds the plugin processes a proxy runs: its descendants running the
// plugin program.
type pluginFinder struct {
	programs []string // the program as configured, and with symlinks resolved
}

func newPluginFinder(program string) *pluginFinder {
	f := &pluginFinder{programs: []string{program}}
	if real, err := filepath.EvalSymlinks(program); err == nil && real != program {
		f.programs = append(f.programs, real)
	}
	return f
}

// find returns the pids, sorted, of root's descendants that run the plugin program; none
// is an error.
func (f *pluginFinder) find(root int) ([]int, error) {
	parents, err := readParents()
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var out []int
	for _, pid := range descendants(parents, root) {
		exe, err := readExe(pid)
		if err != nil {
			continue // gone, or not ours to read
		}
		if slices.Contains(f.programs, exe) {
			out = append(out, pid)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no process running %s below the proxy (pid %d)", f.programs[0], root)
	}
	return out, nil
}

// cpuPIDs returns the processes whose CPU time a phase measures: the target process and,
// for proxy+plugin, the plugin processes it runs now (read afresh for every phase).
func (t *target) cpuPIDs() ([]int, error) {
	if t.pids != nil { // -cluster
		return t.pids, nil
	}
	pids := []int{t.child.pid()}
	if t.plugin == nil {
		return pids, nil
	}
	pp, err := t.plugin.find(t.child.pid())
	if err != nil {
		return nil, fmt.Errorf("%s: finding the plugin processes: %w", t.name, err)
	}
	return append(pids, pp...), nil
}

// stopCPU ends a measurement started on t.cpuPIDs, and checks that the plugin processes
// are still the ones measured: a plugin the proxy restarted during the phase would leave
// CPU time uncounted.
func (t *target) stopCPU(m *cpuMeter) (cpuUse, error) {
	use, err := m.stop()
	if err != nil {
		return use, fmt.Errorf("reading CPU time of %s: %w", t.name, err)
	}
	if t.plugin == nil {
		return use, nil
	}
	now, err := t.plugin.find(t.child.pid())
	if err != nil {
		return use, fmt.Errorf("%s: after the phase: %w", t.name, err)
	}
	if was := m.pids[1:]; !slices.Equal(now, was) {
		return use, fmt.Errorf("%s: the plugin processes changed during the phase (pids %v, now %v): did the proxy restart the plugin?",
			t.name, was, now)
	}
	return use, nil
}

// cpuSplit divides the CPU time of proxy+plugin between the proxy process and its plugin
// processes.
type cpuSplit struct {
	PluginPIDs         []int   `json:"plugin_pids"`
	ProxyCPUSec        float64 `json:"proxy_cpu_sec"`
	PluginCPUSec       float64 `json:"plugin_cpu_sec"`
	ProxyCPUPerCallUS  float64 `json:"proxy_cpu_per_call_us"`
	PluginCPUPerCallUS float64 `json:"plugin_cpu_per_call_us"`
}

// setCPUSplit records the split when pids holds plugin processes (after fill).
func (r *phaseResult) setCPUSplit(pids []int, cpu cpuUse) {
	if len(pids) < 2 {
		return
	}
	s := &cpuSplit{PluginPIDs: slices.Clone(pids[1:]), ProxyCPUSec: (cpu.target - cpu.plugins).Seconds(), PluginCPUSec: cpu.plugins.Seconds()}
	if r.Calls > 0 {
		s.ProxyCPUPerCallUS = us(cpu.target-cpu.plugins) / float64(r.Calls)
		s.PluginCPUPerCallUS = us(cpu.plugins) / float64(r.Calls)
	}
	r.CPUSplit = s
}

// startPluginTarget starts the proxy with the plugin config, makes one tools/call (so
// that the plugin has answered at least once) and finds the plugin processes.
func startPluginTarget(ctx context.Context, env *roundEnv) (*target, error) {
	o := env.o
	t, err := startTarget(ctx, targetProxyPlugin, proxyArgv(o, env.pluginCfg), o.dir, true, env.errw)
	if err != nil {
		return nil, err
	}
	if err := callTool(ctx, newCaller(t.child.conn, startupTimeout), env.params); err != nil {
		return nil, errors.Join(fmt.Errorf("%s: first tools/call: %w", t.name, err), t.Close())
	}
	t.plugin = newPluginFinder(o.plugin[0])
	if _, err := t.cpuPIDs(); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	return t, nil
}

// pluginHop is what the plugin adds to a call in one phase: proxy+plugin against proxy,
// from the medians over rounds.
type pluginHop struct {
	Kind        string `json:"kind"`
	Concurrency int    `json:"concurrency"`
	Hops        int    `json:"hops"` // plugin process crossings per call (-plugin-hops)
	// P50AddedUS is the median p50 of proxy+plugin minus the median p50 of proxy; P50Ratio
	// is their quotient.
	P50AddedUS float64 `json:"p50_added_us"`
	P50Ratio   float64 `json:"p50_ratio"`
	// CPUAddedUS is the median CPU per call of proxy+plugin (proxy and plugin processes)
	// minus the median CPU per call of proxy.
	CPUAddedUS       float64 `json:"cpu_added_us"`
	P50AddedPerHopUS float64 `json:"p50_added_per_hop_us"`
	CPUAddedPerHopUS float64 `json:"cpu_added_per_hop_us"`
	// ThroughputRatio is calls/s of proxy+plugin over calls/s of proxy.
	ThroughputRatio float64 `json:"throughput_ratio"`
	// The CPU of proxy+plugin divided between its processes (medians).
	ProxyCPUPerCallUS  float64 `json:"proxy_cpu_per_call_us"`
	PluginCPUPerCallUS float64 `json:"plugin_cpu_per_call_us"`
	// The same differences within each round, in round order (rounds that measured both).
	RoundsP50AddedUS []float64 `json:"rounds_p50_added_us"`
	RoundsCPUAddedUS []float64 `json:"rounds_cpu_added_us"`
	// Latency phase only: the per-hop target and whether it is met.
	TargetP50PerHopUS float64 `json:"target_p50_per_hop_us,omitempty"`
	TargetCPUPerHopUS float64 `json:"target_cpu_per_hop_us,omitempty"`
	WithinTarget      *bool   `json:"within_target,omitempty"`
}

// summarizePluginHop compares proxy+plugin with proxy in one phase, from their figures
// (medians over rounds) and, round by round, from rounds.
func summarizePluginHop(kind string, conc, hops int, rounds []roundResult, plain, plugin *figures) pluginHop {
	h := pluginHop{Kind: kind, Concurrency: conc, Hops: max(hops, 1)}
	h.P50AddedUS = plugin.P50US - plain.P50US
	h.P50Ratio = ratio(plugin.P50US, plain.P50US)
	h.CPUAddedUS = plugin.CPUPerCallUS - plain.CPUPerCallUS
	h.P50AddedPerHopUS = h.P50AddedUS / float64(h.Hops)
	h.CPUAddedPerHopUS = h.CPUAddedUS / float64(h.Hops)
	h.ThroughputRatio = ratio(plugin.CallsPerSec, plain.CallsPerSec)
	if s := plugin.CPUSplit; s != nil {
		h.ProxyCPUPerCallUS, h.PluginCPUPerCallUS = s.ProxyUS, s.PluginUS
	}
	h.RoundsP50AddedUS, h.RoundsCPUAddedUS = roundsAdded(rounds, kind, conc, targetProxyPlugin)
	if kind == kindLatency {
		h.TargetP50PerHopUS, h.TargetCPUPerHopUS = hopTargetP50US, hopTargetCPUUS
		ok := h.P50AddedPerHopUS <= hopTargetP50US && h.CPUAddedPerHopUS <= hopTargetCPUUS
		h.WithinTarget = &ok
	}
	return h
}

// writePluginHops writes the summary lines of the plugin hops (tab-separated for the
// summary's tabwriter).
func writePluginHops(w io.Writer, hops []pluginHop) {
	for _, h := range hops {
		fmt.Fprintf(w, "  plugin hop, %s c=%d\tp50 %+.1f µs (proxy+plugin p50 / proxy p50 = %.2f×), CPU %+.1f µs/call (proxy+plugin vs proxy), hops per call %d → per hop %+.1f µs p50, %+.1f µs CPU\n",
			h.Kind, h.Concurrency, h.P50AddedUS, h.P50Ratio, h.CPUAddedUS, h.Hops, h.P50AddedPerHopUS, h.CPUAddedPerHopUS)
	}
	for _, h := range hops {
		if h.WithinTarget == nil {
			continue
		}
		verdict := "met"
		if !*h.WithinTarget {
			var over []string
			if h.P50AddedPerHopUS > h.TargetP50PerHopUS {
				over = append(over, fmt.Sprintf("p50 %+.1f µs per hop > %.0f µs", h.P50AddedPerHopUS, h.TargetP50PerHopUS))
			}
			if h.CPUAddedPerHopUS > h.TargetCPUPerHopUS {
				over = append(over, fmt.Sprintf("CPU %+.1f µs per hop > %.0f µs", h.CPUAddedPerHopUS, h.TargetCPUPerHopUS))
			}
			verdict = "EXCEEDED: " + strings.Join(over, "; ")
		}
		fmt.Fprintf(w, "  plugin hop target (%s c=%d)\tat most +%.0f µs p50 and +%.0f µs CPU per hop: %s\n",
			h.Kind, h.Concurrency, h.TargetP50PerHopUS, h.TargetCPUPerHopUS, verdict)
	}
}
