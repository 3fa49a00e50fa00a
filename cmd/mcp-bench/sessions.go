package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The -sessions phase: many concurrent HTTP sessions on one proxy, each with its GET
// stream open, and the proxy's memory, threads, file descriptors (and goroutines, when
// the proxy serves net/http/pprof on MCP_PROXY_DEBUG_ADDR) before, during and after.

const (
	targetProxySessions = "proxy-sessions"

	// sessionsParallel bounds the sessions being opened or closed at once.
	sessionsParallel = 64
	// sessionsWarm is the number of sessions opened and closed before the baseline, so
	// that the baseline includes what the proxy allocates once (pools, first upstream use).
	sessionsWarm = 64
	// drainTimeout bounds the wait for GET streams to end and descriptors to return.
	drainTimeout = 15 * time.Second
	// maxSessions bounds -sessions.
	maxSessions = 20000
	// debugEnv names the proxy's optional net/http/pprof listener.
	debugEnv = "MCP_PROXY_DEBUG_ADDR"
)

// procSnapshot is what /proc (and the debug listener, when there is one) says about the
// proxy at one moment.
type procSnapshot struct {
	RSSkB   int64 `json:"rss_kb"`
	Threads int64 `json:"threads"`
	FDs     int   `json:"fds"`
	// Goroutines is -1 when the proxy serves no goroutine profile on MCP_PROXY_DEBUG_ADDR.
	Goroutines int `json:"goroutines"`
	// HeapKB and StackKB are the Go heap in use (after a forced GC) and the goroutine
	// stacks in use, from the same listener's heap profile; -1 without it.
	HeapKB  int64 `json:"heap_kb"`
	StackKB int64 `json:"stack_kb"`
}

// sessionsResult is the outcome of the -sessions phase.
type sessionsResult struct {
	Sessions        int     `json:"sessions"`
	CallsPerSession int     `json:"calls_per_session"`
	Opened          int     `json:"opened"` // handshake, GET stream and calls all succeeded
	Calls           int64   `json:"calls"`
	Errors          int     `json:"errors"`
	FirstError      string  `json:"first_error,omitempty"`
	OpenSec         float64 `json:"open_sec"` // wall time to open all sessions
	// Baseline is after sessionsWarm sessions were opened and closed; Open with all
	// sessions open and idle (after idleSettle); After once every session was deleted,
	// its GET stream ended and the client closed its idle connections.
	Baseline procSnapshot `json:"baseline"`
	Open     procSnapshot `json:"open"`
	After    procSnapshot `json:"after"`
	// PerSessionKB is (Open.RSS - Baseline.RSS) / Sessions; PerSessionGoKB the same for
	// the Go heap and stacks in use (0 without a debug listener).
	PerSessionKB   float64 `json:"per_session_kb"`
	PerSessionGoKB float64 `json:"per_session_go_kb,omitempty"`
	// StreamsEnded counts the GET streams that ended after their session's DELETE.
	StreamsEnded  int   `json:"streams_ended"`
	DeleteErrors  int   `json:"delete_errors"`
	ProxyNofile   int64 `json:"proxy_nofile"` // soft RLIMIT_NOFILE of the proxy (-1 unlimited)
	ProxyNofileHi int64 `json:"proxy_nofile_hard"`
	BenchNofile   int64 `json:"bench_nofile"` // soft RLIMIT_NOFILE of mcp-bench, after raising it
}

// raiseNofile raises mcp-bench's soft RLIMIT_NOFILE to at least need (up to the hard
// limit) and returns the soft limit in force.
func raiseNofile(need uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur >= need {
		return lim.Cur, nil
	}
	lim.Cur = min(max(need, lim.Cur), lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < need {
		return lim.Cur, fmt.Errorf("RLIMIT_NOFILE hard limit %d is below the %d descriptors -sessions needs", lim.Max, need)
	}
	return lim.Cur, nil
}

// debugClient reads the proxy's debug listener without keeping a connection open, which
// would count as one of the proxy's descriptors.
var debugClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// goroutineCount reads the goroutine total from the proxy's net/http/pprof listener; -1
// when there is none.
func goroutineCount(ctx context.Context, debugAddr string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+debugAddr+"/debug/pprof/goroutine?debug=1", nil)
	if err != nil {
		return -1
	}
	resp, err := debugClient.Do(req)
	if err != nil {
		return -1
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	n, ok := parseGoroutineTotal(line)
	if !ok {
		return -1
	}
	return n
}

// goMemory reads the Go heap in use and the stacks in use, in kB, from the proxy's heap
// profile; -1, -1 when there is no debug listener. The profile is read twice, each time
// after a GC, so that what net/http keeps in sync.Pools (freed only by the second GC
// after its last use) is not counted as live.
func goMemory(ctx context.Context, debugAddr string) (heapKB, stackKB int64) {
	heapKB, stackKB = -1, -1
	for range 2 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+debugAddr+"/debug/pprof/heap?debug=1&gc=1", nil)
		if err != nil {
			return -1, -1
		}
		resp, err := debugClient.Do(req)
		if err != nil {
			return -1, -1
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseSize))
		drainClose(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return -1, -1
		}
		heapKB, stackKB = parseGoMemory(string(b))
	}
	return heapKB, stackKB
}

// parseGoMemory reads "# HeapAlloc = N" and "# Stack = INUSE / SYS" from the text of a
// debug=1 heap profile, in kB; -1 for what is missing.
func parseGoMemory(s string) (heapKB, stackKB int64) {
	heapKB, stackKB = -1, -1
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				heapKB = n / 1024
			}
		}
		if v, ok := strings.CutPrefix(line, "# Stack = "); ok {
			inuse, _, _ := strings.Cut(v, " ")
			if n, err := strconv.ParseInt(inuse, 10, 64); err == nil {
				stackKB = n / 1024
			}
		}
	}
	return heapKB, stackKB
}

// parseGoroutineTotal parses "goroutine profile: total N".
func parseGoroutineTotal(line string) (int, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "goroutine profile: total ")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

func snapshot(ctx context.Context, pid int, debugAddr string) (procSnapshot, error) {
	st, err := readStatus(pid)
	if err != nil {
		return procSnapshot{}, err
	}
	fds, err := countFDs(pid)
	if err != nil {
		return procSnapshot{}, err
	}
	snap := procSnapshot{RSSkB: st.RSSkB, Threads: st.Threads, FDs: fds, Goroutines: goroutineCount(ctx, debugAddr)}
	snap.HeapKB, snap.StackKB = goMemory(ctx, debugAddr)
	return snap, nil
}

// openSession is one session of the phase with its GET stream.
type openSession struct {
	s      *httpSession
	stream *http.Response
	ended  chan struct{} // closed when the stream's body reached EOF or failed
}

// readStream reads a GET stream to its end.
func (ss *openSession) readStream() {
	defer close(ss.ended)
	_, _ = io.Copy(io.Discard, ss.stream.Body)
	ss.stream.Body.Close()
}

// forEach runs f(i) for i in [0, n) on at most par goroutines.
func forEach(n, par int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, par) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// measureSessions runs the -sessions phase against a fresh proxy.
func measureSessions(ctx context.Context, o *options, tmp string, params json.RawMessage, stderr io.Writer) (sessionsResult, error) {
	n := o.sessions
	res := sessionsResult{Sessions: n, CallsPerSession: o.sessionCalls}
	// Each session holds a GET connection; the POSTs share a pool of sessionsParallel.
	soft, err := raiseNofile(uint64(2*n + 2*sessionsParallel + 256))
	res.BenchNofile = int64(soft)
	if err != nil {
		return res, err
	}
	debugAddr, err := freeLoopbackAddr()
	if err != nil {
		return res, err
	}
	ups := []upstreamBlock{{Label: "bench", Command: o.upstream, Cwd: o.dir, Namespace: ""}}
	t, err := startProxyHTTP(ctx, o, tmp, proxyHTTPSpec{
		name: targetProxySessions, ups: ups, maxSessions: max(proxyMinSessions, n+sessionsWarm+16),
		env: []string{debugEnv + "=" + debugAddr},
	}, stderr)
	if err != nil {
		return res, err
	}
	defer t.Close()
	pid := t.child.pid()
	res.ProxyNofile, res.ProxyNofileHi, _ = readNofile(pid)
	client := newHTTPClient(t.http.url, sessionsParallel)
	defer client.close()

	var tally errorTally
	var calls atomic.Int64
	open := func(i int, keep []*openSession) {
		s, err := client.openSession(ctx, o.timeout)
		if err != nil {
			tally.add(fmt.Errorf("session %d: %w", i, err))
			return
		}
		ss := &openSession{s: s, ended: make(chan struct{})}
		keep[i] = ss
		if ss.stream, err = s.openGET(ctx); err != nil {
			tally.add(fmt.Errorf("session %d: %w", i, err))
			close(ss.ended)
		} else {
			go ss.readStream()
		}
		for range o.sessionCalls {
			if err := callTool(ctx, s, params); err != nil {
				tally.add(fmt.Errorf("session %d tools/call: %w", i, err))
			} else {
				calls.Add(1)
			}
		}
	}
	var deleteErrors atomic.Int64
	closeAll := func(all []*openSession) int {
		forEach(len(all), sessionsParallel, func(i int) {
			if all[i] == nil {
				return
			}
			if err := all[i].s.close(ctx); err != nil {
				deleteErrors.Add(1)
				tally.add(fmt.Errorf("session %d DELETE: %w", i, err))
			}
		})
		ended := 0
		deadline := time.NewTimer(drainTimeout)
		defer deadline.Stop()
		for _, ss := range all {
			if ss == nil || ss.stream == nil {
				continue
			}
			select {
			case <-ss.ended:
				ended++
			case <-deadline.C:
				deadline.Reset(0) // count the rest without waiting again
				select {
				case <-ss.ended:
					ended++
				default:
				}
			}
		}
		return ended
	}

	// Warm up, then take the baseline.
	_ = t.sessions[0].close(ctx) // the first session, opened at start
	t.sessions = nil
	warm := make([]*openSession, sessionsWarm)
	forEach(sessionsWarm, sessionsParallel, func(i int) { open(i, warm) })
	closeAll(warm)
	if n, first := tally.get(); n > 0 {
		return res, fmt.Errorf("%s warm-up: %s", t.name, first)
	}
	client.close()
	if err := sleepCtx(ctx, idleSettle); err != nil {
		return res, err
	}
	if res.Baseline, err = snapshot(ctx, pid, debugAddr); err != nil {
		return res, err
	}

	// N sessions at once.
	all := make([]*openSession, n)
	start := time.Now()
	forEach(n, sessionsParallel, func(i int) { open(i, all) })
	res.OpenSec = time.Since(start).Seconds()
	for _, ss := range all {
		if ss != nil && ss.stream != nil {
			res.Opened++
		}
	}
	if err := sleepCtx(ctx, idleSettle); err != nil {
		return res, err
	}
	if res.Open, err = snapshot(ctx, pid, debugAddr); err != nil {
		return res, err
	}
	if n > 0 {
		res.PerSessionKB = float64(res.Open.RSSkB-res.Baseline.RSSkB) / float64(n)
		if b, o := res.Baseline, res.Open; b.HeapKB >= 0 && o.HeapKB >= 0 && b.StackKB >= 0 && o.StackKB >= 0 {
			res.PerSessionGoKB = float64(o.HeapKB+o.StackKB-b.HeapKB-b.StackKB) / float64(n)
		}
	}
	for _, ss := range all {
		if ss != nil && ss.stream != nil {
			select {
			case <-ss.ended:
				tally.add(errors.New("a GET stream ended while its session was open"))
			default:
			}
		}
	}

	// Close them all; the streams must end and the descriptors come back.
	res.StreamsEnded = closeAll(all)
	client.close()
	deadline := time.Now().Add(drainTimeout)
	for {
		fds, err := countFDs(pid)
		if err != nil || fds <= res.Baseline.FDs || !time.Now().Before(deadline) {
			break
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return res, err
		}
	}
	if err := sleepCtx(ctx, idleSettle); err != nil {
		return res, err
	}
	if res.After, err = snapshot(ctx, pid, debugAddr); err != nil {
		return res, err
	}
	res.DeleteErrors = int(deleteErrors.Load())
	res.Calls = calls.Load()
	res.Errors, res.FirstError = tally.get()
	if res.StreamsEnded != res.Opened {
		res.Errors++
		if res.FirstError == "" {
			res.FirstError = fmt.Sprintf("%d of %d GET streams still open %v after DELETE", res.Opened-res.StreamsEnded, res.Opened, drainTimeout)
		}
	}
	return res, t.Close()
}

// idleSessions are sessions held open (each with its GET stream) over their own client,
// so that their connections are not counted as the measured client's.
type idleSessions struct {
	client *httpClient
	all    []*openSession
}

// openIdleSessions opens n sessions with their GET streams; any failure is an error.
func openIdleSessions(ctx context.Context, url string, n int, timeout time.Duration) (*idleSessions, error) {
	is := &idleSessions{client: newHTTPClient(url, sessionsParallel), all: make([]*openSession, n)}
	var tally errorTally
	forEach(n, sessionsParallel, func(i int) {
		s, err := is.client.openSession(ctx, timeout)
		if err != nil {
			tally.add(err)
			return
		}
		ss := &openSession{s: s, ended: make(chan struct{})}
		if ss.stream, err = s.openGET(ctx); err != nil {
			tally.add(err)
			close(ss.ended)
		} else {
			go ss.readStream()
		}
		is.all[i] = ss
	})
	if n, first := tally.get(); n > 0 {
		is.close()
		return nil, fmt.Errorf("opening %d idle sessions: %d failed, first: %s", len(is.all), n, first)
	}
	return is, nil
}

// close deletes the sessions (best effort) and waits a little for their streams to end.
func (is *idleSessions) close() {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	forEach(len(is.all), sessionsParallel, func(i int) {
		if ss := is.all[i]; ss != nil {
			ss.s.timeout = stopGrace
			_ = ss.s.close(ctx)
		}
	})
	for _, ss := range is.all {
		if ss == nil || ss.stream == nil {
			continue
		}
		select {
		case <-ss.ended:
		case <-ctx.Done():
			ss.stream.Body.Close()
		}
	}
	is.client.close()
}
