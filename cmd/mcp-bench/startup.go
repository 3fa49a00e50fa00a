package main

// The start-up mode (-startup): what a proxy with many upstreams costs before and
// between calls, measured in one run and reported as ratios against a baseline measured
// alongside:
//
//   - fan-out: -fanout upstreams that each take -init-delay to answer initialize, against
//     one such upstream: the time from spawning the proxy to its initialize answer with
//     ready_grace long enough for all (every upstream ready), so the ratio says whether
//     the upstreams start together (1×) or one after another (N×);
//   - slow start: a fast upstream and one taking -slow-delay, with the default
//     ready_grace and with ready_grace long enough for both (waiting for every upstream,
//     as the proxy did before ready_grace): when initialize is answered, what the first
//     tools/list holds, and when the slow upstream's tools are listed after the
//     tools/list_changed announcing them;
//   - list cost: tools/list over one upstream of -list-tools tools and over -fanout such
//     upstreams: p50 of the first page and of a walk of every page, and the proxy's CPU
//     per first page; the upstream listing its tools itself (direct) for scale;
//   - idle memory: the proxy holding -idle-upstreams copies of -upstream, its VmRSS split
//     into private memory (RssAnon) and mapped file pages (RssFile: its binary), and its
//     threads.
//
// -upstream must be the test server (internal/testing/testserver): the mode passes it -fast,
// -init-delay and -extra-tools itself (the idle phase runs -upstream as given).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// testserverBaseTools is how many tools the test server lists without -extra-tools (and
// without -fast, which lists echo alone).
const testserverBaseTools = 11

// startupRound holds the figures of one round of the -startup mode.
type startupRound struct {
	Round int `json:"round"`

	FanoutOneSec float64 `json:"fanout_one_sec"` // spawn → initialize, one slow-to-initialize upstream
	FanoutNSec   float64 `json:"fanout_n_sec"`   // the same with -fanout of them

	SlowWaitAllInitSec float64 `json:"slow_wait_all_init_sec"` // ready_grace covering both: initialize answered
	SlowInitSec        float64 `json:"slow_init_sec"`          // default ready_grace: initialize answered
	SlowFirstTools     int     `json:"slow_first_tools"`       // tools in the first list then (the fast one's: 1)
	SlowListedSec      float64 `json:"slow_listed_sec"`        // spawn → list_changed received and both listed
	SlowTools          int     `json:"slow_tools"`             // tools listed then (2)

	List map[string]*listFigures `json:"list"` // by target: direct, proxy-1, proxy-n (baseline-1, baseline-n)

	Idle     *idleResult `json:"idle,omitempty"`
	IdleMore *idleResult `json:"idle_more,omitempty"` // twice -idle-upstreams: the per-upstream cost
	// IdleSessions is what -startup-sessions idle HTTP sessions add (0: not measured).
	IdleSessions *idleSessionsResult `json:"idle_sessions,omitempty"`
	BaselineIdle *idleResult         `json:"baseline_idle,omitempty"` // -baseline-proxy
}

// startupReport is the JSON of the -startup mode.
type startupReport struct {
	Mode      string         `json:"mode"`
	Fanout    int            `json:"fanout"`
	InitDelay string         `json:"init_delay"`
	SlowDelay string         `json:"slow_delay"`
	ListTools int            `json:"list_tools"`
	Rounds    []startupRound `json:"rounds"`
}

// runStartupMode runs -rounds rounds of the start-up phases and prints each round and
// the medians.
func runStartupMode(ctx context.Context, o *options, tmp string, stdout, errw io.Writer) error {
	rep := startupReport{Mode: "startup", Fanout: o.fanout, InitDelay: o.initDelay.String(),
		SlowDelay: o.slowDelay.String(), ListTools: o.listTools}
	for round := range o.rounds {
		rr, err := startupRoundRun(ctx, o, tmp, round, errw)
		if err != nil {
			return fmt.Errorf("round %d: %w", round+1, err)
		}
		rep.Rounds = append(rep.Rounds, rr)
	}
	printStartup(stdout, o, rep.Rounds)
	if o.jsonPath != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonPath, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", o.jsonPath, err)
		}
	}
	return nil
}

func startupRoundRun(ctx context.Context, o *options, tmp string, round int, errw io.Writer) (startupRound, error) {
	rr := startupRound{Round: round + 1}
	ts := o.upstream[0]
	// ready_grace long enough for every upstream: initialize is answered once all are.
	waitAll := "proxy {\n  ready_grace = \"10m\"\n}\n\n"
	write := func(name, text string) (string, error) {
		p := filepath.Join(tmp, name)
		return p, os.WriteFile(p, []byte(text), 0o600)
	}
	slowInit := []string{ts, "-fast", "-init-delay", o.initDelay.String()}
	oneCfg, err := write("fanout-1.hcl", waitAll+proxyConfig(idleUpstreams(1, slowInit, o.dir)))
	if err != nil {
		return rr, err
	}
	nCfg, err := write("fanout-n.hcl", waitAll+proxyConfig(idleUpstreams(o.fanout, slowInit, o.dir)))
	if err != nil {
		return rr, err
	}
	swap := round%2 == 1 // alternate who goes first, so drift hits both alike
	for i := range 2 {
		one := (i == 0) != swap
		cfg, n, dst := oneCfg, 1, &rr.FanoutOneSec
		if !one {
			cfg, n, dst = nCfg, o.fanout, &rr.FanoutNSec
		}
		sec, tools, err := timeToInitialize(ctx, o, cfg, errw)
		if err != nil {
			return rr, fmt.Errorf("fan-out of %d: %w", n, err)
		}
		if tools != n {
			return rr, fmt.Errorf("fan-out of %d: %d tools listed once initialize was answered, want %d", n, tools, n)
		}
		*dst = sec
	}
	fmt.Fprintf(errw, "round %d/%d fan-out: %d upstreams of %v initialize ready in %.2fs, one in %.2fs\n",
		round+1, o.rounds, o.fanout, o.initDelay, rr.FanoutNSec, rr.FanoutOneSec)

	// Slow start: a fast upstream and a slow one.
	pair := []upstreamBlock{
		{Label: "fast", Command: []string{ts, "-fast"}, Cwd: o.dir, Namespace: "fast"},
		{Label: "slow", Command: []string{ts, "-fast", "-init-delay", o.slowDelay.String()}, Cwd: o.dir, Namespace: "slow"},
	}
	graceCfg, err := write("slow-grace.hcl", proxyConfig(pair))
	if err != nil {
		return rr, err
	}
	allCfg, err := write("slow-all.hcl", waitAll+proxyConfig(pair))
	if err != nil {
		return rr, err
	}
	for i := range 2 {
		if (i == 0) != swap {
			sec, _, err := timeToInitialize(ctx, o, allCfg, errw)
			if err != nil {
				return rr, fmt.Errorf("slow start, waiting for all: %w", err)
			}
			rr.SlowWaitAllInitSec = sec
			continue
		}
		if err := slowStart(ctx, o, graceCfg, &rr, errw); err != nil {
			return rr, fmt.Errorf("slow start: %w", err)
		}
	}
	fmt.Fprintf(errw, "round %d/%d slow start (%v): initialize in %.2fs with %d tool(s) listed, the slow one's listed after list_changed at %.2fs; waiting for all: initialize in %.2fs\n",
		round+1, o.rounds, o.slowDelay, rr.SlowInitSec, rr.SlowFirstTools, rr.SlowListedSec, rr.SlowWaitAllInitSec)

	if err := listCost(ctx, o, tmp, round, &rr, errw); err != nil {
		return rr, fmt.Errorf("list cost: %w", err)
	}

	if o.idleUpstreams > 0 {
		cfg, err := write("idle.hcl", proxyConfig(idleUpstreams(o.idleUpstreams, o.upstream, o.dir)))
		if err != nil {
			return rr, err
		}
		bins := []struct {
			name string
			path string
			dst  **idleResult
		}{{"proxy", o.proxyPath, &rr.Idle}}
		if o.baselineProxy != "" {
			bins = append(bins, struct {
				name string
				path string
				dst  **idleResult
			}{"baseline", o.baselineProxy, &rr.BaselineIdle})
			if swap {
				bins[0], bins[1] = bins[1], bins[0]
			}
		}
		for _, b := range bins {
			p := *o
			p.proxyPath = b.path
			idle, err := measureIdle(ctx, proxyArgv(&p, cfg), o.dir, o.idleUpstreams, errw)
			if err != nil {
				return rr, fmt.Errorf("%s idle: %w", b.name, err)
			}
			fmt.Fprintf(errw, "round %d/%d idle %s with %d upstreams: VmRSS %.1f MiB (RssAnon %.1f, RssFile %.1f), %d threads, %.1f wake-ups/s, CPU %.2f ms/s\n",
				round+1, o.rounds, b.name, idle.Upstreams, idle.RSSMiB, kBToMiB(idle.AnonkB), kBToMiB(idle.FilekB), idle.Threads, idle.WakeupsPerSec, idle.CPUmsPerSec)
			*b.dst = &idle
		}
		// The same proxy with twice the upstreams: what each further one costs.
		moreCfg, err := write("idle-more.hcl", proxyConfig(idleUpstreams(2*o.idleUpstreams, o.upstream, o.dir)))
		if err != nil {
			return rr, err
		}
		more, err := measureIdle(ctx, proxyArgv(o, moreCfg), o.dir, 2*o.idleUpstreams, errw)
		if err != nil {
			return rr, fmt.Errorf("proxy idle with %d upstreams: %w", 2*o.idleUpstreams, err)
		}
		rr.IdleMore = &more
		fmt.Fprintf(errw, "round %d/%d idle proxy with %d upstreams: RssAnon %.1f MiB: %.0f KiB per upstream beyond %d\n",
			round+1, o.rounds, more.Upstreams, kBToMiB(more.AnonkB), perUpstreamKiB(rr.Idle, &more), o.idleUpstreams)
		if o.startupSessions > 0 {
			is, err := measureIdleSessions(ctx, o, tmp, o.startupSessions, errw)
			if err != nil {
				return rr, fmt.Errorf("idle HTTP sessions: %w", err)
			}
			rr.IdleSessions = &is
			fmt.Fprintf(errw, "round %d/%d %d idle HTTP sessions: RssAnon %.1f → %.1f MiB, %.1f kB per session; Go heap and stacks %.1f kB per session\n",
				round+1, o.rounds, is.Sessions, kBToMiB(is.BaseAnonkB), kBToMiB(is.OpenAnonkB), is.PerSessionKB, is.PerSessionGo)
		}
	}
	return rr, nil
}

// timeToInitialize spawns the proxy on cfg and returns the time from the spawn to its
// initialize answer, and how many tools it then lists.
func timeToInitialize(ctx context.Context, o *options, cfg string, errw io.Writer) (float64, int, error) {
	began := time.Now()
	t, err := startTarget(ctx, "proxy", proxyArgv(o, cfg), o.dir, false, errw)
	if err != nil {
		return 0, 0, err
	}
	sec := time.Since(began).Seconds()
	defer t.Close()
	n, err := countTools(ctx, newCaller(t.child.conn, startupTimeout))
	if err != nil {
		return 0, 0, err
	}
	return sec, n, t.Close()
}

// slowStart measures the proxy on cfg (a fast and a slow upstream, the default
// ready_grace): when initialize is answered and what it lists, then when the
// tools/list_changed announcing the slow upstream arrives and both are listed.
func slowStart(ctx context.Context, o *options, cfg string, rr *startupRound, errw io.Writer) error {
	began := time.Now()
	c, err := startChild("proxy", proxyArgv(o, cfg), o.dir, nil, errw)
	if err != nil {
		return err
	}
	t := &target{name: "proxy", child: c}
	defer t.Close()
	changed := make(chan struct{}, 16)
	note := func(method string) {
		if method == "notifications/tools/list_changed" {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	c.conn.onNotify.Store(&note)
	if err := handshake(ctx, c.conn); err != nil {
		return err
	}
	rr.SlowInitSec = time.Since(began).Seconds()
	k := newCaller(c.conn, startupTimeout)
	if rr.SlowFirstTools, err = countTools(ctx, k); err != nil {
		return err
	}
	deadline := time.NewTimer(o.slowDelay + startupTimeout)
	defer deadline.Stop()
	for rr.SlowTools < 2 {
		select {
		case <-changed:
		case <-deadline.C:
			return fmt.Errorf("the slow upstream's tools were not announced within %v (listed %d)", o.slowDelay+startupTimeout, rr.SlowTools)
		case <-ctx.Done():
			return ctx.Err()
		}
		if rr.SlowTools, err = countTools(ctx, k); err != nil {
			return err
		}
		rr.SlowListedSec = time.Since(began).Seconds()
	}
	return t.Close()
}

// listFigures are one target's tools/list figures.
type listFigures struct {
	FirstP50US float64 `json:"first_p50_us"` // the first page
	WalkP50US  float64 `json:"walk_p50_us"`  // every page
	CPUUS      float64 `json:"cpu_us"`       // the target's CPU per first page
	Bytes      int     `json:"bytes"`        // size of the first page's result
	FirstTools int     `json:"first_tools"`  // tools on the first page
	Tools      int     `json:"tools"`        // tools on all pages
}

// listCost measures tools/list through a proxy with one upstream of -list-tools tools
// and with -fanout of them (and the same with -baseline-proxy), interleaved, and the
// upstream itself for scale.
func listCost(ctx context.Context, o *options, tmp string, round int, rr *startupRound, errw io.Writer) error {
	argv := []string{o.upstream[0], "-extra-tools", strconv.Itoa(max(0, o.listTools-testserverBaseTools))}
	// Each upstream named after its label, so that their resources do not collide.
	named := func(n int) []upstreamBlock {
		ups := idleUpstreams(n, argv, o.dir)
		for i := range ups {
			ups[i].Command = append(append([]string(nil), argv...), "-name", ups[i].Label)
		}
		return ups
	}
	// No proxy block, so that a baseline proxy without ready_grace takes the same
	// config: the phase waits until every tool is listed instead.
	oneCfg := filepath.Join(tmp, "list-1.hcl")
	nCfg := filepath.Join(tmp, "list-n.hcl")
	if err := os.WriteFile(oneCfg, []byte(proxyConfig(named(1))), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(nCfg, []byte(proxyConfig(named(o.fanout))), 0o600); err != nil {
		return err
	}
	type spec struct {
		name  string
		argv  []string
		tools int
		dst   *listFigures
	}
	rr.List = map[string]*listFigures{}
	fig := func(name string) *listFigures {
		f := &listFigures{}
		rr.List[name] = f
		return f
	}
	specs := []spec{
		{"direct", argv, o.listTools, fig("direct")},
		{"proxy-1", proxyArgv(o, oneCfg), o.listTools, fig("proxy-1")},
		{"proxy-n", proxyArgv(o, nCfg), o.listTools * o.fanout, fig("proxy-n")},
	}
	if o.baselineProxy != "" {
		base := *o
		base.proxyPath = o.baselineProxy
		specs = append(specs,
			spec{"baseline-1", proxyArgv(&base, oneCfg), o.listTools, fig("baseline-1")},
			spec{"baseline-n", proxyArgv(&base, nCfg), o.listTools * o.fanout, fig("baseline-n")})
	}
	if round%2 == 1 { // alternate the order of the proxies, so that drift hits all alike
		for i, j := 1, len(specs)-1; i < j; i, j = i+1, j-1 {
			specs[i], specs[j] = specs[j], specs[i]
		}
	}
	for _, sp := range specs {
		if err := measureList(ctx, o, sp.name, sp.argv, sp.tools, sp.dst, errw); err != nil {
			return err
		}
	}
	line := fmt.Sprintf("round %d/%d tools/list first page p50 (µs), walk p50 (µs), CPU per first page (µs), first page:", round+1, o.rounds)
	for _, name := range listTargets(o) {
		f := rr.List[name]
		line += fmt.Sprintf(" %s %.0f/%.0f/%.1f %dt %dB;", name, f.FirstP50US, f.WalkP50US, f.CPUUS, f.FirstTools, f.Bytes)
	}
	fmt.Fprintln(errw, line)
	return nil
}

// listTargets names the list phase's targets in report order.
func listTargets(o *options) []string {
	names := []string{"direct", "proxy-1", "proxy-n"}
	if o.baselineProxy != "" {
		names = append(names, "baseline-1", "baseline-n")
	}
	return names
}

// measureList starts argv, waits until it lists every one of its tools, and measures
// -list-calls first pages and a tenth as many walks.
func measureList(ctx context.Context, o *options, name string, argv []string, tools int, f *listFigures, errw io.Writer) error {
	t, err := startTarget(ctx, name, argv, o.dir, false, errw)
	if err != nil {
		return err
	}
	defer t.Close()
	k := newCaller(t.child.conn, o.timeout)
	deadline := time.Now().Add(idleListDeadline)
	for {
		n, err := countTools(ctx, k)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if n == tools {
			break
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%s: listed %d tools, want %d", name, n, tools)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	for range o.warmup {
		if _, err := k.call(ctx, "tools/list", nil); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	lat := make([]time.Duration, 0, o.listCalls)
	cpu := startCPU([]int{t.child.pid()})
	var last *jsonrpc.Message
	for range o.listCalls {
		began := time.Now()
		m, err := k.call(ctx, "tools/list", nil)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		lat = append(lat, time.Since(began))
		last = m
	}
	use, err := cpu.stop()
	if err != nil {
		return err
	}
	if last.Error != nil {
		return fmt.Errorf("%s: tools/list: %w", name, last.Error)
	}
	var page struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(last.Result, &page); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	f.FirstP50US = us(summarize(lat).P50)
	f.CPUUS = us(use.target) / float64(o.listCalls)
	f.Bytes, f.FirstTools = len(last.Result), len(page.Tools)
	walks := make([]time.Duration, 0, max(1, o.listCalls/10))
	for range cap(walks) {
		began := time.Now()
		n, err := countTools(ctx, k)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		walks = append(walks, time.Since(began))
		f.Tools = n
	}
	f.WalkP50US = us(summarize(walks).P50)
	return t.Close()
}

// printStartup prints the medians over the rounds.
func printStartup(w io.Writer, o *options, rounds []startupRound) {
	med := func(f func(startupRound) float64) float64 {
		v := make([]float64, len(rounds))
		for i, r := range rounds {
			v[i] = f(r)
		}
		return median(v)
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	fmt.Fprintf(w, "start-up figures, medians of %d round(s)\n", len(rounds))
	one, n := med(func(r startupRound) float64 { return r.FanoutOneSec }), med(func(r startupRound) float64 { return r.FanoutNSec })
	fmt.Fprintf(w, "fan-out:     %d upstreams taking %v to initialize all ready in %.2fs; one alone %.2fs; ratio %.2fx\n",
		o.fanout, o.initDelay, n, one, ratio(n, one))
	grace, all := med(func(r startupRound) float64 { return r.SlowInitSec }), med(func(r startupRound) float64 { return r.SlowWaitAllInitSec })
	fmt.Fprintf(w, "slow start:  a fast upstream and one taking %v: initialize answered in %.2fs (waiting for every upstream: %.2fs, %.2fx); the slow one's tools listed after list_changed at %.2fs\n",
		o.slowDelay, grace, all, ratio(grace, all), med(func(r startupRound) float64 { return r.SlowListedSec }))
	lf := func(name string, f func(*listFigures) float64) float64 {
		return med(func(r startupRound) float64 { return f(r.List[name]) })
	}
	first := func(l *listFigures) float64 { return l.FirstP50US }
	walk := func(l *listFigures) float64 { return l.WalkP50US }
	cpu := func(l *listFigures) float64 { return l.CPUUS }
	r0 := rounds[0].List
	fmt.Fprintf(w, "tools/list:  first page (1x%d: %d tools, %d B; %dx%d: %d tools, %d B; direct 1x%d p50 %.0f µs)\n", o.listTools,
		r0["proxy-1"].FirstTools, r0["proxy-1"].Bytes, o.fanout, o.listTools, r0["proxy-n"].FirstTools, r0["proxy-n"].Bytes,
		o.listTools, lf("direct", first))
	for _, pfx := range []string{"proxy", "baseline"} {
		if r0[pfx+"-1"] == nil {
			continue
		}
		one, n := pfx+"-1", pfx+"-n"
		fmt.Fprintf(w, "  %-9s first page p50 %.0f / %.0f µs: %.2fx; proxy CPU per first page %.1f / %.1f µs: %.2fx; walk p50 %.0f / %.0f µs: %.2fx\n",
			pfx, lf(one, first), lf(n, first), ratio(lf(n, first), lf(one, first)), lf(one, cpu), lf(n, cpu), ratio(lf(n, cpu), lf(one, cpu)),
			lf(one, walk), lf(n, walk), ratio(lf(n, walk), lf(one, walk)))
	}
	if o.idleUpstreams > 0 {
		for _, b := range []struct {
			name string
			of   func(startupRound) *idleResult
		}{{"proxy", func(r startupRound) *idleResult { return r.Idle }}, {"baseline", func(r startupRound) *idleResult { return r.BaselineIdle }}} {
			if b.of(rounds[0]) == nil {
				continue
			}
			fmt.Fprintf(w, "idle:        %-8s %d upstreams: VmRSS %.1f MiB (RssAnon %.1f MiB, RssFile %.1f MiB), %.0f threads, %.1f wake-ups/s, CPU %.2f ms/s\n", b.name, o.idleUpstreams,
				med(func(r startupRound) float64 { return b.of(r).RSSMiB }),
				med(func(r startupRound) float64 { return kBToMiB(b.of(r).AnonkB) }),
				med(func(r startupRound) float64 { return kBToMiB(b.of(r).FilekB) }),
				med(func(r startupRound) float64 { return float64(b.of(r).Threads) }),
				med(func(r startupRound) float64 { return b.of(r).WakeupsPerSec }),
				med(func(r startupRound) float64 { return b.of(r).CPUmsPerSec }))
		}
		printIdleTargets(w, o, rounds, med)
	}
}

// printIdleTargets prints the three idle-memory figures against their targets, and the
// resident total.
func printIdleTargets(w io.Writer, o *options, rounds []startupRound, med func(func(startupRound) float64) float64) {
	if rounds[0].Idle == nil || rounds[0].IdleMore == nil {
		return
	}
	anon := med(func(r startupRound) float64 { return kBToMiB(r.Idle.AnonkB) })
	fmt.Fprintf(w, "idle target: RssAnon with %d child upstreams %.2f MiB (target ≤ %.0f MiB: %s); resident total (VmRSS) %.2f MiB, of which RssFile %.2f MiB\n",
		o.idleUpstreams, anon, targetIdleAnonMiB, verdict(anon, targetIdleAnonMiB),
		med(func(r startupRound) float64 { return r.Idle.RSSMiB }), med(func(r startupRound) float64 { return kBToMiB(r.Idle.FilekB) }))
	per := med(func(r startupRound) float64 { return perUpstreamKiB(r.Idle, r.IdleMore) })
	fmt.Fprintf(w, "idle target: each further upstream %.0f KiB of RssAnon (%d → %d upstreams; target ≤ %d KiB: %s)\n",
		per, o.idleUpstreams, 2*o.idleUpstreams, targetPerUpstreamKiB, verdict(per, targetPerUpstreamKiB))
	if rounds[0].IdleSessions == nil {
		return
	}
	sess := med(func(r startupRound) float64 { return r.IdleSessions.PerSessionKB })
	fmt.Fprintf(w, "idle target: each idle HTTP session %.1f kB of RssAnon (%d sessions; target ≤ %.0f kB: %s); Go heap and stacks %.1f kB per session\n",
		sess, rounds[0].IdleSessions.Sessions, targetPerIdleSessionKB, verdict(sess, targetPerIdleSessionKB),
		med(func(r startupRound) float64 { return r.IdleSessions.PerSessionGo }))
}
