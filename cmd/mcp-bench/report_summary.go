package main

// The report's summary: medians over the rounds of each phase, per target and concurrency.

import "fmt"

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
