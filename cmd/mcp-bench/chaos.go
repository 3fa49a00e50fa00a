package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// The -chaos-every and -soak modes share one harness: a proxy serving HTTP in front of
// five upstreams (three child processes, two HTTP servers reached through relays), and
// -concurrency sessions each keeping one tools/call in flight. Every call carries a
// unique token that the upstream's answer must carry back ("from NAME: ..." with the
// token), so an answer that reaches the wrong request or the wrong client is seen.
//
// -chaos-every D: every D (jittered between D/2 and 3D/2) one upstream at random is hit:
// a child process is killed with SIGKILL, or every connection from the proxy to an HTTP
// upstream is reset. It reports the calls, their answers, misroutes, each fault and when
// the upstream served again, and the proxy's goroutines, descriptors and child processes
// before and after (leaks).
//
// -soak D: no faults, for D; the proxy's RSS, goroutines, descriptors and processes at
// the start and the end (and every minute on stderr).

const (
	chaosChildren = 3
	chaosHTTP     = 2
	// chaosTool is the tool every upstream serves (testserver -dup): it answers its
	// arguments prefixed with "from <server name>: ".
	chaosTool = "who"
	// settleTimeout bounds the wait, after the load, for upstreams to serve again and for
	// the proxy's goroutines and descriptors to come back down.
	settleTimeout = 30 * time.Second
	maxSoak       = 24 * time.Hour
)

// chaosUpstream is one of the harness's upstreams.
type chaosUpstream struct {
	name  string // namespace and -name of the server
	child bool   // a child process of the proxy; else an HTTP server behind relay
	relay *relay
	srv   *child // the HTTP server process

	mu      sync.Mutex // guards faultAt, waiting, event
	faultAt time.Time
	waiting bool // a fault has not been followed by a served call yet
	event   int  // index in the report's faults of the fault being waited on
}

// faultEvent is one fault the chaos mode caused.
type faultEvent struct {
	Upstream string  `json:"upstream"`
	Kind     string  `json:"kind"` // "kill -9" or "reset"
	AtSec    float64 `json:"at_s"`
	PID      int     `json:"pid,omitempty"`   // the killed process
	Conns    int     `json:"conns,omitempty"` // the connections reset
	// ServedAfterMs is how long after the fault the upstream answered a call sent after
	// it; -1 when it did not before the next fault on it or the end.
	ServedAfterMs float64 `json:"served_after_ms"`
}

// chaosReport is what the chaos and soak modes print and write to -json.
type chaosReport struct {
	Mode        string   `json:"mode"` // "chaos" or "soak"
	DurationSec float64  `json:"duration_s"`
	Concurrency int      `json:"concurrency"`
	Upstreams   []string `json:"upstreams"`

	Calls          int64 `json:"calls"`
	Answers        int64 `json:"answers"` // results + proxy errors + unknown tool + upstream errors + misroutes
	Results        int64 `json:"results"` // with the call's own token, from the right upstream
	ProxyErrors    int64 `json:"proxy_errors"`
	UpstreamErrors int64 `json:"upstream_errors"`
	// UnknownTool counts the proxy's -32602 "Unknown tool" answers: a restarting upstream's
	// tools are out of the catalogue, and this error carries no data.origin.
	UnknownTool   int64  `json:"unknown_tool"`
	NoAnswer      int64  `json:"no_answer"` // transport failure or timeout: no JSON-RPC answer
	Misroutes     int64  `json:"misroutes"` // a result with another call's token or from another upstream
	FirstNoAnswer string `json:"first_no_answer,omitempty"`
	FirstMisroute string `json:"first_misroute,omitempty"`
	FirstProxyErr string `json:"first_proxy_error,omitempty"`
	FirstUpErr    string `json:"first_upstream_error,omitempty"`

	Faults         []faultEvent `json:"faults,omitempty"`
	Kills          int          `json:"kills"`
	Resets         int          `json:"resets"`
	Unrecovered    int          `json:"unrecovered"` // faults not followed by a served call
	ServedAfterP50 float64      `json:"served_after_p50_ms"`
	ServedAfterMax float64      `json:"served_after_max_ms"`

	Start      procSnapshot `json:"start"`
	End        procSnapshot `json:"end"`
	ProcsStart int          `json:"processes_start"` // the proxy's live descendants
	ProcsEnd   int          `json:"processes_end"`
	Zombies    int          `json:"zombies_end"`
	// Leaks are End minus Start where positive (goroutines need the debug listener).
	GoroutineLeak int `json:"goroutine_leak"`
	FDLeak        int `json:"fd_leak"`
	// UpstreamConnsStart and UpstreamConnsEnd are the proxy's connections to the HTTP
	// upstreams (through the relays), pooled idle ones included. They are left out of the
	// descriptor comparison: the idle pool holds as many as the load needed at once,
	// which differs between the warm-up and the run without being a leak. That they are
	// bounded is checked apart: never more than the calls in flight.
	UpstreamConnsStart int `json:"upstream_conns_start"`
	UpstreamConnsEnd   int `json:"upstream_conns_end"`
	ProcLeak           int `json:"process_leak"`
}

// runChaosMode runs the chaos (o.chaosEvery > 0) or soak (o.soak > 0) mode.
func runChaosMode(ctx context.Context, o *options, tmp string, stdout, errw io.Writer) error {
	soak := o.soak > 0
	duration := o.duration
	if soak {
		duration = o.soak
	}
	rep := &chaosReport{Mode: "chaos", Concurrency: 64}
	if soak {
		rep.Mode = "soak"
	}
	if len(o.concurrency) > 0 {
		rep.Concurrency = o.concurrency[0]
	}
	server := o.upstream[0] // the testserver: -name and -dup are its flags

	var ups []*chaosUpstream
	var blocks []upstreamBlock
	defer func() {
		for _, u := range ups {
			if u.relay != nil {
				_ = u.relay.Close()
			}
			if u.srv != nil {
				_ = u.srv.Close()
			}
		}
	}()
	for i := range chaosChildren + chaosHTTP {
		u := &chaosUpstream{name: fmt.Sprintf("c%d", i), child: i < chaosChildren}
		argv := []string{server, "-name", u.name, "-dup", chaosTool}
		ups = append(ups, u)
		if u.child {
			blocks = append(blocks, upstreamBlock{Label: u.name, Command: argv, Cwd: o.dir, Namespace: u.name})
			continue
		}
		u.name = fmt.Sprintf("h%d", i-chaosChildren)
		argv[2] = u.name
		addrFile := filepath.Join(tmp, u.name+".addr")
		srv, err := startServerChild(u.name, append(argv, "-http", "127.0.0.1:0", "-http-addr-file", addrFile), o.dir, nil, errw)
		if err != nil {
			return err
		}
		u.srv = srv
		addr, err := waitAddrFile(ctx, addrFile, srv)
		if err != nil {
			return err
		}
		if u.relay, err = startRelay(addr); err != nil {
			return fmt.Errorf("starting the relay to %s: %w", u.name, err)
		}
		blocks = append(blocks, upstreamBlock{Label: u.name, URL: "http://" + u.relay.addr() + mcpPath, Namespace: u.name})
	}
	for _, u := range ups {
		rep.Upstreams = append(rep.Upstreams, u.name)
	}

	addr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	debugAddr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	cfg := filepath.Join(tmp, rep.Mode+".hcl")
	hcl := proxyConfigListen(&listenBlock{Address: addr, Path: mcpPath, MaxSessions: max(proxyMinSessions, 2*rep.Concurrency)}, blocks)
	if err := os.WriteFile(cfg, []byte(hcl), 0o600); err != nil {
		return fmt.Errorf("writing the proxy config: %w", err)
	}
	proxy, err := startServerChild(targetProxy, proxyArgv(o, cfg), o.dir, []string{debugEnv + "=" + debugAddr}, errw)
	if err != nil {
		return err
	}
	defer proxy.Close()
	if err := waitListening(ctx, addr, proxy); err != nil {
		return err
	}
	url := "http://" + addr + mcpPath

	// Warm-up: as many sessions as the run, each serving calls on its upstream, then
	// closed; the baseline is the proxy with one probe session open and pools warm.
	probeClient := newHTTPClient(url, 1)
	defer probeClient.close()
	probe, err := probeClient.openSession(ctx, o.timeout)
	if err != nil {
		return fmt.Errorf("opening the probe session: %w", err)
	}
	for _, u := range ups {
		if err := waitServed(ctx, probe, u, settleTimeout); err != nil {
			return err
		}
	}
	if err := chaosWarm(ctx, o, url, ups, rep.Concurrency); err != nil {
		return err
	}
	pooled := func() int {
		n := 0
		for _, u := range ups {
			if u.relay != nil {
				n += u.relay.open()
			}
		}
		return n
	}
	if rep.Start, rep.UpstreamConnsStart, rep.ProcsStart, _, err = settled(ctx, proxy.pid(), debugAddr, pooled, nil, 0); err != nil {
		return err
	}
	fmt.Fprintf(errw, "%s: start: RSS %.1f MiB, goroutines %d, fds %d, processes %d\n",
		rep.Mode, kBToMiB(rep.Start.RSSkB), rep.Start.Goroutines, rep.Start.FDs, rep.ProcsStart)

	client := newHTTPClient(url, rep.Concurrency)
	sessions := make([]*httpSession, rep.Concurrency)
	for i := range sessions {
		if sessions[i], err = client.openSession(ctx, o.timeout); err != nil {
			client.close()
			return fmt.Errorf("opening session %d: %w", i, err)
		}
	}

	var (
		calls, results, proxyErrs, upErrs, unknown, noAnswer, misroutes atomic.Int64
		firstNoAnswer, firstMisroute, firstProxyErr, firstUpErr         atomic.Value
		faultsMu                                                        sync.Mutex // guards rep.Faults while the load runs
		wg                                                              sync.WaitGroup
	)
	start := time.Now()
	runCtx, stop := context.WithTimeout(ctx, duration)
	defer stop()
	for w, s := range sessions {
		u := ups[w%len(ups)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; runCtx.Err() == nil; n++ {
				token := fmt.Sprintf("<w%d-%d>", w, n)
				sent := time.Now()
				m, err := s.call(ctx, "tools/call", chaosParams(u.name, token))
				calls.Add(1)
				switch {
				case err != nil:
					noAnswer.Add(1)
					firstNoAnswer.CompareAndSwap(nil, fmt.Sprintf("%s %s: %v", u.name, token, err))
				case m.Error != nil:
					if m.Error.Code == jsonrpc.CodeInvalidParams && m.Error.Message == "Unknown tool: "+u.name+"__"+chaosTool {
						unknown.Add(1)
					} else if bytes.Contains(m.Error.Data, []byte(`"origin":"mcp-proxy"`)) {
						proxyErrs.Add(1)
						firstProxyErr.CompareAndSwap(nil, fmt.Sprintf("%s: %s", u.name, m.Error.Message))
					} else {
						upErrs.Add(1)
						firstUpErr.CompareAndSwap(nil, fmt.Sprintf("%s: %d %s %s", u.name, m.Error.Code, m.Error.Message, m.Error.Data))
					}
				case bytes.Contains(m.Result, []byte("from "+u.name+": ")) && bytes.Contains(m.Result, []byte(token)):
					results.Add(1)
					if i, at := u.served(sent); i >= 0 {
						faultsMu.Lock()
						rep.Faults[i].ServedAfterMs = msOf(time.Since(at))
						faultsMu.Unlock()
					}
				default:
					misroutes.Add(1)
					firstMisroute.CompareAndSwap(nil, fmt.Sprintf("%s %s: %.300s", u.name, token, m.Result))
				}
			}
		}()
	}

	// The faults (chaos) or the minute marks (soak).
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 16))
	for runCtx.Err() == nil {
		if soak {
			if sleepCtx(runCtx, time.Minute) == nil {
				if snap, err := snapshot(ctx, proxy.pid(), debugAddr); err == nil {
					fmt.Fprintf(errw, "soak: %s: RSS %.1f MiB, goroutines %d, fds %d, calls %d\n",
						time.Since(start).Round(time.Second), kBToMiB(snap.RSSkB), snap.Goroutines, snap.FDs, calls.Load())
				}
			}
			continue
		}
		wait := time.Duration(float64(o.chaosEvery) * (0.5 + rng.Float64()))
		if sleepCtx(runCtx, wait) != nil {
			break
		}
		u := ups[rng.IntN(len(ups))]
		ev := faultEvent{Upstream: u.name, Kind: "reset", ServedAfterMs: -1}
		if u.child {
			if ev.PID = findServer(proxy.pid(), u.name); ev.PID == 0 {
				continue // between lives: another one next time
			}
			ev.Kind = "kill -9"
		}
		at := time.Now()
		ev.AtSec = at.Sub(start).Seconds()
		faultsMu.Lock()
		rep.Faults = append(rep.Faults, ev)
		i := len(rep.Faults) - 1
		faultsMu.Unlock()
		u.fault(at, i)
		if u.child {
			if err := syscall.Kill(ev.PID, syscall.SIGKILL); err != nil {
				fmt.Fprintf(errw, "chaos: kill -9 %d: %v\n", ev.PID, err)
			}
		} else {
			n := u.relay.resetAll()
			faultsMu.Lock()
			rep.Faults[i].Conns = n
			faultsMu.Unlock()
		}
		fmt.Fprintf(errw, "chaos: %5.1fs %-7s %s\n", ev.AtSec, ev.Kind, u.name)
	}
	wg.Wait()
	rep.DurationSec = time.Since(start).Seconds()
	for _, s := range sessions {
		_ = s.close(ctx)
	}
	client.close()

	// Every upstream serves again; then the proxy settles back to its baseline.
	var probeErrs []error
	for _, u := range ups {
		probeErrs = append(probeErrs, waitServed(ctx, probe, u, settleTimeout))
	}
	for _, u := range ups {
		u.mu.Lock()
		if u.waiting {
			u.waiting = false
			rep.Faults[u.event].ServedAfterMs = -1
		}
		u.mu.Unlock()
	}
	rep.End, rep.UpstreamConnsEnd, rep.ProcsEnd, rep.Zombies, err = settled(ctx, proxy.pid(), debugAddr, pooled, &rep.Start, rep.ProcsStart)
	if err != nil {
		return err
	}
	rep.Calls, rep.Results, rep.ProxyErrors, rep.UpstreamErrors = calls.Load(), results.Load(), proxyErrs.Load(), upErrs.Load()
	rep.NoAnswer, rep.Misroutes = noAnswer.Load(), misroutes.Load()
	rep.UnknownTool = unknown.Load()
	rep.Answers = rep.Results + rep.ProxyErrors + rep.UnknownTool + rep.UpstreamErrors + rep.Misroutes
	rep.FirstNoAnswer, _ = firstNoAnswer.Load().(string)
	rep.FirstMisroute, _ = firstMisroute.Load().(string)
	rep.FirstProxyErr, _ = firstProxyErr.Load().(string)
	rep.FirstUpErr, _ = firstUpErr.Load().(string)
	rep.summarize()
	rep.writeText(stdout)
	if o.jsonPath != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonPath, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("writing -json: %w", err)
		}
	}
	var problems []string
	if err := errors.Join(probeErrs...); err != nil {
		problems = append(problems, err.Error())
	}
	if rep.NoAnswer > 0 {
		problems = append(problems, fmt.Sprintf("%d calls got no answer (first: %s)", rep.NoAnswer, rep.FirstNoAnswer))
	}
	if rep.Misroutes > 0 {
		problems = append(problems, fmt.Sprintf("%d answers reached the wrong call (first: %s)", rep.Misroutes, rep.FirstMisroute))
	}
	if rep.GoroutineLeak > 0 || rep.FDLeak > 0 || rep.ProcLeak > 0 || rep.Zombies > 0 {
		problems = append(problems, fmt.Sprintf("leaks: %d goroutines, %d fds, %d processes, %d zombies", rep.GoroutineLeak, rep.FDLeak, rep.ProcLeak, rep.Zombies))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// chaosParams is a tools/call of the upstream's chaosTool carrying token.
func chaosParams(upstream, token string) json.RawMessage {
	return fmt.Appendf(nil, `{"name":%q,"arguments":{"token":%q}}`, upstream+"__"+chaosTool, token)
}

// fault records that u was hit now, as fault number i of the report.
func (u *chaosUpstream) fault(at time.Time, i int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.faultAt, u.waiting, u.event = at, true, i
}

// served notes a result for a call sent at sent; when it is the first served call sent
// after a fault, it returns that fault's index and time, else -1.
func (u *chaosUpstream) served(sent time.Time) (int, time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.waiting || !sent.After(u.faultAt) {
		return -1, time.Time{}
	}
	u.waiting = false
	return u.event, u.faultAt
}

// waitServed calls u's tool on the probe session until it answers with a result.
func waitServed(ctx context.Context, probe *httpSession, u *chaosUpstream, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for n := 0; ; n++ {
		token := fmt.Sprintf("<probe-%s-%d>", u.name, n)
		m, err := probe.call(ctx, "tools/call", chaosParams(u.name, token))
		switch {
		case err != nil:
			last = err.Error()
		case m.Error != nil:
			last = m.Error.Message
		case bytes.Contains(m.Result, []byte(token)):
			return nil
		default:
			last = fmt.Sprintf("unexpected result %.200s", m.Result)
		}
		if time.Now().After(deadline) || sleepCtx(ctx, 50*time.Millisecond) != nil {
			return fmt.Errorf("upstream %s does not serve (last: %s)", u.name, last)
		}
	}
}

// chaosWarm opens n sessions, has each call its upstream 20 times at once, and closes
// them, so that pools and first-use allocations are part of the baseline.
func chaosWarm(ctx context.Context, o *options, url string, ups []*chaosUpstream, n int) error {
	client := newHTTPClient(url, n)
	defer client.close()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := client.openSession(ctx, o.timeout)
			if err != nil {
				errs[i] = err
				return
			}
			defer s.close(ctx)
			u := ups[i%len(ups)]
			for k := range 20 {
				if _, err := s.call(ctx, "tools/call", chaosParams(u.name, fmt.Sprintf("<warm-%d-%d>", i, k))); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// findServer returns the pid of the proxy's descendant serving as name (its command
// line has "-name NAME"), or 0.
func findServer(proxyPID int, name string) int {
	parents, err := readParents()
	if err != nil {
		return 0
	}
	for _, pid := range descendants(parents, proxyPID) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(b, []byte("\x00-name\x00"+name+"\x00")) && !isZombie(pid) {
			return pid
		}
	}
	return 0
}

// isZombie reports whether pid has exited and awaits its parent's wait.
func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && len(b) > i+2 && b[i+2] == 'Z'
}

// processCount counts the proxy's live descendants and its zombies.
func processCount(proxyPID int) (live, zombies int, err error) {
	parents, err := readParents()
	if err != nil {
		return 0, 0, err
	}
	for _, pid := range descendants(parents, proxyPID) {
		if isZombie(pid) {
			zombies++
		} else {
			live++
		}
	}
	return live, zombies, nil
}

// settled snapshots the proxy. Without a baseline it polls until two snapshots 200 ms
// apart agree on goroutines and descriptors (what the warm-up's closing sessions still
// held is gone), so that the baseline is not inflated; with one, until the goroutines,
// descriptors and processes are back to it. Either way for at most settleTimeout.
//
// The snapshot's FDs leave out the conns() connections to the HTTP upstreams, which it
// returns apart (see chaosReport.UpstreamConnsStart).
func settled(ctx context.Context, pid int, debugAddr string, conns func() int, base *procSnapshot, baseProcs int) (procSnapshot, int, int, int, error) {
	deadline := time.Now().Add(settleTimeout)
	var prev *procSnapshot
	for {
		snap, err := snapshot(ctx, pid, debugAddr)
		if err != nil {
			return snap, 0, 0, 0, fmt.Errorf("reading the proxy's state: %w", err)
		}
		up := conns()
		snap.FDs -= up
		live, zombies, err := processCount(pid)
		if err != nil {
			return snap, 0, 0, 0, err
		}
		var ok bool
		if base == nil {
			ok = prev != nil && prev.Goroutines == snap.Goroutines && prev.FDs == snap.FDs
		} else {
			ok = snap.Goroutines <= base.Goroutines && snap.FDs <= base.FDs && live <= baseProcs && zombies == 0
		}
		if ok || time.Now().After(deadline) || sleepCtx(ctx, 200*time.Millisecond) != nil {
			return snap, up, live, zombies, nil
		}
		prev = &snap
	}
}

// summarize fills the fault totals, the served-again figures and the leaks.
func (r *chaosReport) summarize() {
	var served []float64
	for _, f := range r.Faults {
		if f.Kind == "reset" {
			r.Resets++
		} else {
			r.Kills++
		}
		if f.ServedAfterMs < 0 {
			r.Unrecovered++
		} else {
			served = append(served, f.ServedAfterMs)
		}
	}
	if len(served) > 0 {
		slices.Sort(served)
		r.ServedAfterP50 = served[len(served)/2]
		r.ServedAfterMax = served[len(served)-1]
	}
	if r.Start.Goroutines >= 0 && r.End.Goroutines >= 0 {
		r.GoroutineLeak = max(0, r.End.Goroutines-r.Start.Goroutines)
	}
	r.FDLeak = max(0, r.End.FDs-r.Start.FDs)
	if r.UpstreamConnsEnd > max(r.UpstreamConnsStart, r.Concurrency) {
		// More sockets to the upstreams than calls were ever in flight: not a pool.
		r.FDLeak += r.UpstreamConnsEnd - max(r.UpstreamConnsStart, r.Concurrency)
	}
	r.ProcLeak = max(0, r.ProcsEnd-r.ProcsStart)
}

// writeText prints the report.
func (r *chaosReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "%s: %.1fs, %d calls in flight over %d upstreams (%s; %d child processes, %d over HTTP)\n",
		r.Mode, r.DurationSec, r.Concurrency, len(r.Upstreams), strings.Join(r.Upstreams, " "), chaosChildren, chaosHTTP)
	fmt.Fprintf(w, "calls %d, answers %d (own results %d, proxy errors %d, \"Unknown tool\" while restarting %d, upstream errors %d), no answer %d, misroutes %d\n",
		r.Calls, r.Answers, r.Results, r.ProxyErrors, r.UnknownTool, r.UpstreamErrors, r.NoAnswer, r.Misroutes)
	if r.FirstProxyErr != "" {
		fmt.Fprintf(w, "first proxy error: %s\n", r.FirstProxyErr)
	}
	if r.FirstUpErr != "" {
		fmt.Fprintf(w, "first upstream error: %s\n", r.FirstUpErr)
	}
	if r.Mode == "chaos" {
		fmt.Fprintf(w, "faults %d: kill -9 %d, connection resets %d; served again after p50 %.0f ms, max %.0f ms; not served again before the next fault or the end: %d\n",
			len(r.Faults), r.Kills, r.Resets, r.ServedAfterP50, r.ServedAfterMax, r.Unrecovered)
		for _, f := range r.Faults {
			what := fmt.Sprintf("pid %d", f.PID)
			if f.Kind == "reset" {
				what = fmt.Sprintf("%d connections", f.Conns)
			}
			after := "not measured (another fault or the end came first)"
			if f.ServedAfterMs >= 0 {
				after = fmt.Sprintf("served again after %.0f ms", f.ServedAfterMs)
			}
			fmt.Fprintf(w, "  %6.1fs %-7s %-3s %-16s %s\n", f.AtSec, f.Kind, f.Upstream, what, after)
		}
	}
	fmt.Fprintf(w, "proxy start: RSS %.1f MiB, goroutines %d, fds %d, processes %d\n",
		kBToMiB(r.Start.RSSkB), r.Start.Goroutines, r.Start.FDs, r.ProcsStart)
	fmt.Fprintf(w, "proxy end:   RSS %.1f MiB, goroutines %d, fds %d, processes %d (zombies %d)\n",
		kBToMiB(r.End.RSSkB), r.End.Goroutines, r.End.FDs, r.ProcsEnd, r.Zombies)
	fmt.Fprintf(w, "connections to the HTTP upstreams (pooled, not in fds): start %d, end %d\n", r.UpstreamConnsStart, r.UpstreamConnsEnd)
	fmt.Fprintf(w, "leaks: goroutines %d, fds %d, processes %d\n", r.GoroutineLeak, r.FDLeak, r.ProcLeak)
}

// msOf is d in milliseconds.
func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
