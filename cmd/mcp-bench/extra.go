package main

import (
	"fmt"
	"io"
)

// -extra-hcl: a third target, proxy+extra, is the same proxy and upstream with the HCL of
// a file appended to its config (an admin listener, a telemetry block, ...). Its CPU figure
// is the proxy process's alone, so that comparing it with proxy gives what that config
// adds to a call.

const targetProxyExtra = "proxy+extra"

// proxyConfigExtra renders the proxy+extra config: the plain proxy config of ups, then
// the HCL of the file at path, verbatim.
func proxyConfigExtra(ups []upstreamBlock, path string, extra []byte) string {
	s := proxyConfig(ups) + "\n# appended from -extra-hcl " + path + "\n" + string(extra)
	if len(extra) > 0 && extra[len(extra)-1] != '\n' {
		s += "\n"
	}
	return s
}

// extraCost is what the extra config adds to a call in one phase: proxy+extra against
// proxy, from the medians over rounds.
type extraCost struct {
	Kind        string `json:"kind"`
	Concurrency int    `json:"concurrency"`
	// P50AddedUS is the median p50 of proxy+extra minus the median p50 of proxy; P50Ratio
	// is their quotient.
	P50AddedUS float64 `json:"p50_added_us"`
	P50Ratio   float64 `json:"p50_ratio"`
	// CPUAddedUS is the median CPU per call of proxy+extra minus that of proxy (the proxy
	// process alone in both).
	CPUAddedUS float64 `json:"cpu_added_us"`
	// ThroughputRatio is calls/s of proxy+extra over calls/s of proxy.
	ThroughputRatio float64 `json:"throughput_ratio"`
	// The same differences within each round, in round order (rounds that measured both).
	RoundsP50AddedUS []float64 `json:"rounds_p50_added_us"`
	RoundsCPUAddedUS []float64 `json:"rounds_cpu_added_us"`
}

// summarizeExtra compares proxy+extra with proxy in one phase, from their figures
// (medians over rounds) and, round by round, from rounds.
func summarizeExtra(kind string, conc int, rounds []roundResult, plain, extra *figures) extraCost {
	c := extraCost{Kind: kind, Concurrency: conc}
	c.P50AddedUS = extra.P50US - plain.P50US
	c.P50Ratio = ratio(extra.P50US, plain.P50US)
	c.CPUAddedUS = extra.CPUPerCallUS - plain.CPUPerCallUS
	c.ThroughputRatio = ratio(extra.CallsPerSec, plain.CallsPerSec)
	c.RoundsP50AddedUS, c.RoundsCPUAddedUS = roundsAdded(rounds, kind, conc, targetProxyExtra)
	return c
}

// roundsAdded returns, for each round that measured both proxy and target in the phase
// (kind, conc), what target adds to proxy's p50 and CPU per call, in round order.
func roundsAdded(rounds []roundResult, kind string, conc int, target string) (p50, cpu []float64) {
	for _, rr := range rounds {
		var a, b *phaseResult
		for i := range rr.Phases {
			p := &rr.Phases[i]
			if p.Kind != kind || p.Concurrency != conc {
				continue
			}
			switch p.Target {
			case targetProxy:
				a = p
			case target:
				b = p
			}
		}
		if a != nil && b != nil {
			p50 = append(p50, b.P50US-a.P50US)
			cpu = append(cpu, b.CPUPerCallUS-a.CPUPerCallUS)
		}
	}
	return p50, cpu
}

// writeExtraCosts writes the summary lines of the extra config (tab-separated for the
// summary's tabwriter).
func writeExtraCosts(w io.Writer, costs []extraCost) {
	for _, c := range costs {
		fmt.Fprintf(w, "  extra config, %s c=%d:\tp50 %+.1f µs (%s), CPU %+.1f µs/call vs proxy\n",
			c.Kind, c.Concurrency, c.P50AddedUS, fmtRatio(c.P50Ratio), c.CPUAddedUS)
	}
}
