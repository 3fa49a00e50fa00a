package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

const (
	// maxCallsPerPhase bounds the calls of one throughput phase, whatever its duration.
	maxCallsPerPhase = 5_000_000
	// startupTimeout bounds the handshake, which includes the proxy starting its upstreams.
	startupTimeout = 30 * time.Second
	// idleListDeadline bounds the wait for all idle upstreams to show their tools.
	idleListDeadline = 30 * time.Second
	// idleSettle is the wait between the tools/list and the idle RSS reading.
	idleSettle = 2 * time.Second
	idleWindow = 3 * time.Second // wake-ups and CPU of the idle proxy are counted over this
	// maxListPages bounds the pagination of one tools/list.
	maxListPages = 1000
	// maxLatencyPhase bounds the wall time of one latency phase, warmup included.
	maxLatencyPhase = 5 * time.Minute
)

const (
	kindLatency    = "latency"
	kindThroughput = "throughput"

	targetDirect = "direct"
	targetProxy  = "proxy"
)

// errToolResult marks a tools/call whose result says isError: the tool ran but failed.
var errToolResult = errors.New("tool result has isError: true")

// target is one endpoint under test: the upstream spoken to directly, or the proxy in
// front of it (with a plugin, for proxy+plugin).
type target struct {
	name    string
	child   *child      // the measured process: its CPU time (with its plugins') is the phase's CPU figure
	sampler *rssSampler // proxies only: peak memory of the proxy process

	// -mode http only.
	http         *httpClient    // nil: stdio, calls go over child.conn
	sessions     []*httpSession // one per worker, opened on first use and kept across phases
	idle         *idleSessions  // -idle-sessions: held open while the phases run
	upstream     *child         // proxy-httpup: the HTTP upstream the proxy calls
	upstreamBase string         // proxy-httpup: http://ADDR of that upstream, for /stats
	statsHC      *http.Client   // reads that /stats (nil: statsClient; -tls: one trusting the run's certificate)

	// proxy+plugin only: finds the plugin processes whose CPU time counts with the proxy's.
	plugin *pluginFinder

	// -cluster only: the topology (child is nil), and the processes whose CPU time is the
	// target's (replicas, HAProxy, redis-server).
	topo     *topology.Topology
	pids     []int
	replicas []int // the replicas alone (part of pids)
}

// callers returns n callers, one per worker: over the one stdio connection, or over HTTP
// one session each (opened now if needed, outside any measurement).
func (t *target) callers(ctx context.Context, n int, timeout time.Duration) ([]rpcCaller, error) {
	out := make([]rpcCaller, n)
	if t.http == nil {
		for i := range out {
			out[i] = newCaller(t.child.conn, timeout)
		}
		return out, nil
	}
	for len(t.sessions) < n {
		s, err := t.http.openSession(ctx, startupTimeout)
		if err != nil {
			return nil, fmt.Errorf("%s: opening HTTP session %d: %w", t.name, len(t.sessions)+1, err)
		}
		t.sessions = append(t.sessions, s)
	}
	for i := range out {
		t.sessions[i].timeout = timeout
		out[i] = t.sessions[i]
	}
	return out, nil
}

// dials returns the TCP connections the HTTP client has dialled so far (0 for stdio).
func (t *target) dials() int64 {
	if t.http == nil {
		return 0
	}
	return t.http.dials.Load()
}

func (t *target) Close() error {
	if t.sampler != nil {
		t.sampler.stop()
	}
	if t.idle != nil {
		t.idle.close()
		t.idle = nil
	}
	if t.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
		for _, s := range t.sessions {
			s.timeout = stopGrace
			_ = s.close(ctx) // best effort: the process is stopped next anyway
		}
		cancel()
		t.sessions = nil
		t.http.close()
	}
	if t.pids != nil { // -cluster: no child of its own
		var err error
		if t.topo != nil {
			err = t.topo.Close()
			t.topo = nil
		}
		return err
	}
	err := t.child.Close()
	if t.upstream != nil {
		err = errors.Join(err, t.upstream.Close())
	}
	return err
}

// phaseResult is the outcome of one phase against one target.
type phaseResult struct {
	Kind        string  `json:"kind"` // latency or throughput
	Concurrency int     `json:"concurrency"`
	Target      string  `json:"target"` // direct or proxy
	Calls       int     `json:"calls"`  // successful calls measured (warmup excluded)
	Errors      int     `json:"errors"` // JSON-RPC errors, isError results and timeouts, warmup included
	Timeouts    int     `json:"timeouts"`
	FirstError  string  `json:"first_error,omitempty"`
	ElapsedSec  float64 `json:"elapsed_sec"`
	CallsPerSec float64 `json:"calls_per_sec"`
	P50US       float64 `json:"p50_us"`
	P90US       float64 `json:"p90_us"`
	P99US       float64 `json:"p99_us"`
	MaxUS       float64 `json:"max_us"`
	MeanUS      float64 `json:"mean_us"`
	// CPUSec is the CPU time (user+system) of the target process itself during the
	// measured part: the upstream for direct, the proxy process (without its upstream) for
	// proxy, the proxy process and its plugin processes (without the upstream) for
	// proxy+plugin. Resolution is one clock tick (10 ms) per process.
	CPUSec       float64 `json:"cpu_sec"`
	CPUPerCallUS float64 `json:"cpu_per_call_us"`
	// BenchCPUSec is the CPU time of mcp-bench itself (the client) in the same interval.
	BenchCPUSec       float64 `json:"bench_cpu_sec"`
	BenchCPUPerCallUS float64 `json:"bench_cpu_per_call_us"`
	// HTTP holds the connection counts of -mode http.
	HTTP *httpPhaseStats `json:"http,omitempty"`
	// CPUSplit divides CPUSec of proxy+plugin between the proxy and its plugin processes.
	CPUSplit *cpuSplit `json:"cpu_split,omitempty"`
	// Cluster holds the cluster targets' own figures: the replicas' CPU, Redis's work.
	Cluster *clusterStats `json:"cluster,omitempty"`
}

// httpPhaseStats counts TCP connections opened during the measured part of a phase.
type httpPhaseStats struct {
	NewConns        int64   `json:"new_conns"` // dialled by mcp-bench to the target
	NewConnsPerCall float64 `json:"new_conns_per_call"`
	// Proxy with an HTTP upstream only: connections the proxy opened to the upstream
	// (connections that carried their first /mcp request, as the upstream counts them)
	// and the tools/call requests the upstream received, over the same interval.
	UpstreamNewConns   *int64   `json:"upstream_new_conns,omitempty"`
	UpstreamToolCalls  *int64   `json:"upstream_tool_calls,omitempty"`
	UpstreamNewConnPct *float64 `json:"upstream_new_conn_pct,omitempty"`
	// UpstreamHTTP2Pct is the percentage of the upstream's POSTs that came over HTTP/2.
	UpstreamHTTP2Pct *float64 `json:"upstream_http2_pct,omitempty"`
}

// key identifies a phase across targets and rounds.
func (p *phaseResult) key() string { return fmt.Sprintf("%s c=%d", p.Kind, p.Concurrency) }

// phaseSpec is one phase to run against each target.
type phaseSpec struct {
	kind        string
	concurrency int
}

func (s phaseSpec) String() string { return fmt.Sprintf("%s c=%d", s.kind, s.concurrency) }

// errorTally counts failed calls of one phase; it is safe for concurrent use.
type errorTally struct {
	mu       sync.Mutex // guards all fields
	errors   int
	timeouts int
	first    string
}

func (e *errorTally) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errors++
	if errors.Is(err, errTimeout) {
		e.timeouts++
	}
	if e.first == "" {
		e.first = err.Error()
	}
}

// get returns the error count and the first error.
func (e *errorTally) get() (int, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.errors, e.first
}

// isFatal reports whether err ends the phase (the connection is gone or we are stopping)
// rather than counting as one failed call.
func isFatal(err error) bool {
	var rpcErr *jsonrpc.Error
	return !errors.As(err, &rpcErr) && !errors.Is(err, errTimeout) && !errors.Is(err, errToolResult)
}

// callTool issues one tools/call and turns an error response or an isError result into
// an error.
func callTool(ctx context.Context, k rpcCaller, params json.RawMessage) error {
	m, err := k.call(ctx, "tools/call", params)
	if err != nil {
		return err
	}
	if m.Error != nil {
		return m.Error
	}
	if bytes.Contains(m.Result, []byte(`"isError":true`)) {
		return errToolResult
	}
	return nil
}

// toolParams builds the params of the measured tools/call.
func toolParams(tool string, args json.RawMessage) (json.RawMessage, error) {
	if !json.Valid(args) || len(bytes.TrimSpace(args)) == 0 || bytes.TrimSpace(args)[0] != '{' {
		return nil, fmt.Errorf("-args must be a JSON object, got %q", args)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, args); err != nil {
		return nil, fmt.Errorf("-args: %w", err)
	}
	return json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}{tool, compact.Bytes()})
}

var initializeParams = json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcp-bench","version":"1"}}`)

// handshake runs initialize and sends notifications/initialized.
func handshake(ctx context.Context, c *conn) error {
	m, err := newCaller(c, startupTimeout).call(ctx, "initialize", initializeParams)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if m.Error != nil {
		return fmt.Errorf("initialize: %w", m.Error)
	}
	if err := c.notify("notifications/initialized", nil); err != nil {
		return fmt.Errorf("sending notifications/initialized: %w", err)
	}
	return nil
}

// cpuMeter measures the CPU time of a set of processes (the target process, and for
// proxy+plugin its plugin processes) and of mcp-bench itself over an interval.
type cpuMeter struct {
	pids     []int   // pids[0] is the target process, the rest its plugin processes
	start    []int64 // clock ticks of each of pids at the start
	startOwn int64
	err      error
}

// startCPU starts measuring pids (the target process first).
func startCPU(pids []int) *cpuMeter {
	m := &cpuMeter{pids: pids, start: make([]int64, len(pids))}
	var errs []error
	for i, pid := range pids {
		var err error
		m.start[i], err = readCPUTicks(pid)
		errs = append(errs, err)
	}
	var err error
	m.startOwn, err = readCPUTicks(os.Getpid())
	m.err = errors.Join(append(errs, err)...)
	return m
}

// cpuUse is the CPU time used during a phase.
type cpuUse struct {
	target  time.Duration // all measured processes: the target and its plugins
	plugins time.Duration // the plugin processes alone (part of target)
	own     time.Duration // mcp-bench
}

// stop returns the CPU time used since start. A measured process that is gone (its
// /proc entry vanished) is an error: its CPU time since start is lost.
func (m *cpuMeter) stop() (cpuUse, error) {
	if m.err != nil {
		return cpuUse{}, m.err
	}
	var use cpuUse
	var errs []error
	for i, pid := range m.pids {
		t, err := readCPUTicks(pid)
		if err != nil {
			if i > 0 {
				err = fmt.Errorf("plugin process %d vanished during the phase: %w", pid, err)
			}
			errs = append(errs, err)
			continue
		}
		d := ticksToDuration(t - m.start[i])
		use.target += d
		if i > 0 {
			use.plugins += d
		}
	}
	o, err := readCPUTicks(os.Getpid())
	if err := errors.Join(append(errs, err)...); err != nil {
		return cpuUse{}, err
	}
	use.own = ticksToDuration(o - m.startOwn)
	return use, nil
}

// runPhase runs one phase against one target.
func runPhase(ctx context.Context, t *target, spec phaseSpec, o *options, params json.RawMessage) (phaseResult, error) {
	if spec.kind == kindLatency {
		return runLatency(ctx, t, o, params)
	}
	return runThroughput(ctx, t, spec.concurrency, o, params)
}

// runLatency issues warmup calls, then o.latencyCalls sequential calls, and records each
// round trip.
func runLatency(ctx context.Context, t *target, o *options, params json.RawMessage) (phaseResult, error) {
	res := phaseResult{Kind: kindLatency, Concurrency: 1, Target: t.name}
	var tally errorTally
	ks, err := t.callers(ctx, 1, o.timeout)
	if err != nil {
		return res, err
	}
	k := ks[0]
	ctx, cancel := context.WithTimeoutCause(ctx, maxLatencyPhase,
		fmt.Errorf("latency phase took longer than %v", maxLatencyPhase))
	defer cancel()
	for range o.warmup {
		if err := callTool(ctx, k, params); err != nil {
			if ctx.Err() != nil {
				return res, fmt.Errorf("%s warmup: %w", t.name, context.Cause(ctx))
			}
			if isFatal(err) {
				return res, fmt.Errorf("%s warmup: %w", t.name, err)
			}
			tally.add(err)
		}
	}
	lat := make([]time.Duration, 0, o.latencyCalls)
	pids, err := t.cpuPIDs()
	if err != nil {
		return res, err
	}
	conns, err := startConnCount(ctx, t)
	if err != nil {
		return res, err
	}
	probe, err := startClusterProbe(t) // nil unless a cluster target
	if err != nil {
		return res, err
	}
	cpu := startCPU(pids)
	start := time.Now()
	for range o.latencyCalls {
		t0 := time.Now()
		err := callTool(ctx, k, params)
		d := time.Since(t0)
		if err != nil {
			if ctx.Err() != nil {
				return res, fmt.Errorf("%s: %w", t.name, context.Cause(ctx))
			}
			if isFatal(err) {
				return res, fmt.Errorf("%s: %w", t.name, err)
			}
			tally.add(err)
			continue
		}
		lat = append(lat, d)
	}
	elapsed := time.Since(start)
	cpuUsed, err := t.stopCPU(cpu)
	if err != nil {
		return res, err
	}
	res.fill(lat, elapsed, cpuUsed, &tally)
	if t.topo == nil { // a cluster's processes are not a proxy and its plugins
		res.setCPUSplit(pids, cpuUsed)
	}
	if res.Cluster, err = probe.stop(res.Calls); err != nil {
		return res, err
	}
	if res.HTTP, err = conns.stop(ctx, res.Calls); err != nil {
		return res, err
	}
	return res, nil
}

// workerResult is what one throughput worker hands back.
type workerResult struct {
	lat   []time.Duration
	fatal error
}

// throughputWarmup is the number of calls each throughput worker makes before the
// measured part starts (so that, over HTTP, each worker has its connection).
const throughputWarmup = 10

// runThroughput runs conc workers, each issuing calls back to back (over the one shared
// stdio connection, or each over its own HTTP session), until o.duration has passed or
// maxCallsPerPhase calls were made. Each worker first makes throughputWarmup calls; the
// measurement starts when all of them have.
func runThroughput(ctx context.Context, t *target, conc int, o *options, params json.RawMessage) (phaseResult, error) {
	res := phaseResult{Kind: kindThroughput, Concurrency: conc, Target: t.name}
	var tally errorTally
	perWorker := max(1, maxCallsPerPhase/conc)
	results := make([]workerResult, conc)
	ks, err := t.callers(ctx, conc, o.timeout)
	if err != nil {
		return res, err
	}
	pids, err := t.cpuPIDs()
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var ready, wg sync.WaitGroup
	ready.Add(conc)
	startc := make(chan struct{})
	var deadline time.Time // written before startc is closed
	for i := range results {
		wg.Go(func() {
			k := ks[i]
			fatal := func(err error) {
				results[i].fatal = err
				cancel() // one dead connection ends the phase for everyone
			}
			warm := true
			for range throughputWarmup {
				if err := callTool(ctx, k, params); err != nil && isFatal(err) {
					fatal(err)
					warm = false
					break
				}
			}
			ready.Done()
			if !warm {
				return
			}
			select {
			case <-startc:
			case <-ctx.Done():
				return
			}
			lat := make([]time.Duration, 0, min(perWorker, 1<<14))
			for n := 0; n < perWorker && ctx.Err() == nil; n++ {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				err := callTool(ctx, k, params)
				d := time.Since(t0)
				if err != nil {
					if isFatal(err) {
						fatal(err)
						break
					}
					tally.add(err)
					continue
				}
				lat = append(lat, d)
			}
			results[i].lat = lat
		})
	}
	ready.Wait()
	conns, connErr := startConnCount(ctx, t)
	probe, probeErr := startClusterProbe(t) // nil unless a cluster target
	cpu := startCPU(pids)
	start := time.Now()
	deadline = start.Add(o.duration)
	close(startc)
	wg.Wait()
	elapsed := time.Since(start)
	cpuUsed, cpuErr := t.stopCPU(cpu)

	total := 0
	for _, r := range results {
		if r.fatal != nil && !errors.Is(r.fatal, context.Canceled) {
			return res, fmt.Errorf("%s c=%d: %w", t.name, conc, r.fatal)
		}
		total += len(r.lat)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if connErr != nil {
		return res, connErr
	}
	if cpuErr != nil {
		return res, cpuErr
	}
	if probeErr != nil {
		return res, probeErr
	}
	lat := make([]time.Duration, 0, total)
	for _, r := range results {
		lat = append(lat, r.lat...)
	}
	res.fill(lat, elapsed, cpuUsed, &tally)
	if t.topo == nil { // a cluster's processes are not a proxy and its plugins
		res.setCPUSplit(pids, cpuUsed)
	}
	if res.Cluster, err = probe.stop(res.Calls); err != nil {
		return res, err
	}
	if res.HTTP, err = conns.stop(ctx, res.Calls); err != nil {
		return res, err
	}
	return res, nil
}

// fill sets the measured figures of r.
func (r *phaseResult) fill(lat []time.Duration, elapsed time.Duration, cpu cpuUse, tally *errorTally) {
	s := summarize(lat)
	r.Calls = s.N
	r.Errors, r.Timeouts, r.FirstError = tally.errors, tally.timeouts, tally.first
	r.ElapsedSec = elapsed.Seconds()
	if elapsed > 0 {
		r.CallsPerSec = float64(s.N) / elapsed.Seconds()
	}
	r.P50US, r.P90US, r.P99US, r.MaxUS, r.MeanUS = us(s.P50), us(s.P90), us(s.P99), us(s.Max), us(s.Mean)
	r.CPUSec, r.BenchCPUSec = cpu.target.Seconds(), cpu.own.Seconds()
	if s.N > 0 {
		r.CPUPerCallUS = us(cpu.target) / float64(s.N)
		r.BenchCPUPerCallUS = us(cpu.own) / float64(s.N)
	}
}

// startTarget spawns a target and performs the MCP handshake.
func startTarget(ctx context.Context, name string, argv []string, dir string, sample bool, stderr io.Writer) (*target, error) {
	return startTargetEnv(ctx, name, argv, dir, nil, sample, stderr)
}

// startTargetEnv is startTarget with env added to the child's environment.
func startTargetEnv(ctx context.Context, name string, argv []string, dir string, env []string, sample bool, stderr io.Writer) (*target, error) {
	c, err := startChild(name, argv, dir, env, stderr)
	if err != nil {
		return nil, err
	}
	t := &target{name: name, child: c}
	if sample {
		t.sampler = startSampler(c.pid(), 50*time.Millisecond)
	}
	if err := handshake(ctx, c.conn); err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", name, err), t.Close())
	}
	return t, nil
}

// idleResult is the resident memory of a proxy holding many idle upstreams.
type idleResult struct {
	Upstreams int     `json:"upstreams"`
	Tools     int     `json:"tools"` // tools listed; should equal Upstreams
	RSSkB     int64   `json:"rss_kb"`
	RSSMiB    float64 `json:"rss_mib"`
	AnonkB    int64   `json:"rss_anon_kb"` // RssAnon: the private part of VmRSS (heap, stacks)
	FilekB    int64   `json:"rss_file_kb"` // RssFile: pages of mapped files (the binary)
	Threads   int64   `json:"threads"`
	// Over idleWindow after the reading: how often the idle proxy's threads were switched
	// in (context switches of all its threads, per second) and the CPU it used (ms per
	// second). An idle proxy should sleep: a laptop pays for every wake-up.
	WakeupsPerSec float64 `json:"wakeups_per_sec"`
	CPUmsPerSec   float64 `json:"cpu_ms_per_sec"`
	Error         string  `json:"error,omitempty"` // set when the tool count never matched
}

// measureIdle starts the proxy with the idle config, waits until it lists one tool per
// upstream, lets it settle and reads its VmRSS (the proxy process only). The binary's
// cached pages are evicted first (evictPageCache), so that its RssFile does not depend
// on whether it was just built.
func measureIdle(ctx context.Context, argv []string, dir string, n int, stderr io.Writer) (idleResult, error) {
	res := idleResult{Upstreams: n}
	if err := evictPageCache(argv[0]); err != nil {
		fmt.Fprintf(stderr, "idle: %v (RssFile may then depend on how the binary is cached)\n", err)
	}
	t, err := startTarget(ctx, "proxy-idle", argv, dir, false, stderr)
	if err != nil {
		return res, err
	}
	defer t.Close()
	k := newCaller(t.child.conn, startupTimeout)
	deadline := time.Now().Add(idleListDeadline)
	for {
		count, err := countTools(ctx, k)
		if err != nil {
			return res, fmt.Errorf("proxy-idle tools/list: %w", err)
		}
		res.Tools = count
		if count >= n || !time.Now().Before(deadline) {
			break
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return res, err
		}
	}
	if res.Tools != n {
		res.Error = fmt.Sprintf("tools/list listed %d tools, want %d", res.Tools, n)
	}
	if err := sleepCtx(ctx, idleSettle); err != nil {
		return res, err
	}
	st, err := readStatus(t.child.pid())
	if err != nil {
		return res, fmt.Errorf("reading proxy-idle memory: %w", err)
	}
	res.RSSkB, res.RSSMiB = st.RSSkB, kBToMiB(st.RSSkB)
	res.AnonkB, res.FilekB, res.Threads = st.AnonkB, st.FilekB, st.Threads
	pid := t.child.pid()
	cpu0, err := readCPUTicks(pid)
	if err != nil {
		return res, fmt.Errorf("reading proxy-idle CPU: %w", err)
	}
	sw0 := readSwitches(pid)
	start := time.Now()
	if err := sleepCtx(ctx, idleWindow); err != nil {
		return res, err
	}
	cpu1, err := readCPUTicks(pid)
	if err != nil {
		return res, fmt.Errorf("reading proxy-idle CPU: %w", err)
	}
	secs := time.Since(start).Seconds()
	res.WakeupsPerSec = float64(max(readSwitches(pid)-sw0, 0)) / secs
	res.CPUmsPerSec = float64(ticksToDuration(cpu1-cpu0).Milliseconds()) / secs
	return res, t.Close()
}

// countTools lists all tools, following nextCursor, and returns how many there are.
func countTools(ctx context.Context, k *caller) (int, error) {
	var count int
	cursor := ""
	for range maxListPages {
		var params json.RawMessage
		if cursor != "" {
			b, err := json.Marshal(struct {
				Cursor string `json:"cursor"`
			}{cursor})
			if err != nil {
				return 0, err
			}
			params = b
		}
		m, err := k.call(ctx, "tools/list", params)
		if err != nil {
			return 0, err
		}
		if m.Error != nil {
			return 0, m.Error
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(m.Result, &page); err != nil {
			return 0, fmt.Errorf("decoding tools/list result: %w", err)
		}
		count += len(page.Tools)
		if page.NextCursor == "" {
			return count, nil
		}
		cursor = page.NextCursor
	}
	return 0, fmt.Errorf("tools/list: more than %d pages", maxListPages)
}
