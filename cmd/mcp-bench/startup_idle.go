package main

// The idle-memory targets of the -startup mode (issue 27): the private memory (RssAnon)
// of an idle proxy with -idle-upstreams child upstreams, what each further upstream adds,
// and what each idle HTTP session adds. RssAnon, not VmRSS: VmRSS also counts the
// binary's file-backed pages (RssFile), which the kernel may reclaim and which every
// linked subsystem adds to; VmRSS is still reported, as the resident total.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// The targets the figures are printed against.
const (
	targetIdleAnonMiB        = 6.0  // RssAnon, -idle-upstreams (10) child upstreams
	targetPerUpstreamKiB     = 150  // RssAnon per further upstream
	targetPerIdleSessionKB   = 30.0 // RssAnon per idle legacy HTTP session (kB = KiB, as /proc says)
	idleSessionsWarm         = 16   // sessions opened and left before the baseline
	idleSessionsDebugTimeout = 5 * time.Second
)

// idleSessionsResult is what -startup-sessions idle HTTP sessions cost a proxy.
type idleSessionsResult struct {
	Sessions     int     `json:"sessions"`
	BaseAnonkB   int64   `json:"base_rss_anon_kb"`
	OpenAnonkB   int64   `json:"open_rss_anon_kb"`
	BaseHeapkB   int64   `json:"base_go_kb"` // Go heap + stacks in use after GC; -1 unknown
	OpenHeapkB   int64   `json:"open_go_kb"`
	PerSessionKB float64 `json:"per_session_anon_kb"` // (OpenAnon - BaseAnon) / Sessions
	PerSessionGo float64 `json:"per_session_go_kb"`   // the same for the Go heap and stacks
}

// measureIdleSessions starts the proxy serving HTTP with the idle phase's upstreams and
// its net/http/pprof listener, opens idleSessionsWarm sessions, reads its RssAnon and Go
// heap, opens n more legacy (Mcp-Session-Id) sessions with initialize and
// notifications/initialized, lets them idle with no connection open, and reads again.
func measureIdleSessions(ctx context.Context, o *options, tmp string, n int, errw io.Writer) (idleSessionsResult, error) {
	res := idleSessionsResult{Sessions: n}
	debugAddr, err := freeLoopbackAddr()
	if err != nil {
		return res, err
	}
	t, err := startProxyHTTP(ctx, o, tmp, proxyHTTPSpec{
		name: "proxy-idle-sessions", ups: idleUpstreams(o.idleUpstreams, o.upstream, o.dir),
		maxSessions: max(proxyMinSessions, n+idleSessionsWarm+16),
		env:         []string{debugEnv + "=" + debugAddr},
	}, errw)
	if err != nil {
		return res, err
	}
	defer t.Close()
	pid := t.child.pid()
	client := newHTTPClient(t.http.url, sessionsParallel)
	defer client.close()
	open := func(count int) error {
		var tally errorTally
		forEach(count, sessionsParallel, func(int) {
			if _, err := client.openSession(ctx, o.timeout); err != nil {
				tally.add(err)
			}
		})
		client.close() // the sessions idle with no connection of theirs open
		if k, first := tally.get(); k > 0 {
			return fmt.Errorf("opening %d sessions: %d failed, first: %s", count, k, first)
		}
		return nil
	}
	read := func() (anon, goKB int64, err error) {
		if err := sleepCtx(ctx, idleSettle); err != nil {
			return 0, 0, err
		}
		heap, stack := goMemory(ctx, debugAddr)
		st, err := readStatus(pid)
		if err != nil {
			return 0, 0, err
		}
		if heap < 0 || stack < 0 {
			return st.AnonkB, -1, nil
		}
		return st.AnonkB, heap + stack, nil
	}
	if err := open(idleSessionsWarm); err != nil {
		return res, err
	}
	if res.BaseAnonkB, res.BaseHeapkB, err = read(); err != nil {
		return res, err
	}
	if err := open(n); err != nil {
		return res, err
	}
	if res.OpenAnonkB, res.OpenHeapkB, err = read(); err != nil {
		return res, err
	}
	if res.BaseHeapkB < 0 || res.OpenHeapkB < 0 {
		return res, errors.New("the proxy serves no heap profile on " + debugEnv)
	}
	if n > 0 {
		res.PerSessionKB = float64(res.OpenAnonkB-res.BaseAnonkB) / float64(n)
		res.PerSessionGo = float64(res.OpenHeapkB-res.BaseHeapkB) / float64(n)
	}
	return res, t.Close()
}

// perUpstreamKiB is what each upstream beyond the first reading's adds to RssAnon.
func perUpstreamKiB(small, large *idleResult) float64 {
	if small == nil || large == nil || large.Upstreams <= small.Upstreams {
		return 0
	}
	return float64(large.AnonkB-small.AnonkB) / float64(large.Upstreams-small.Upstreams)
}

// verdict says whether v is within the target.
func verdict(v, target float64) string {
	if v <= target {
		return "within"
	}
	return "MISSES"
}
