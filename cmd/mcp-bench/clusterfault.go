package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// -cluster-fault KIND (with -mode http -cluster N): the cluster topology of make cluster
// (redis-server, N replicas with a cluster key and on_redis_failure = "local", a rate
// limit every call takes a token from, HAProxy round-robin without stickiness) while
// -concurrency[0] legacy sessions call the measured tool one call after another for
// -duration, and a fault under them:
//
//	rolling  a rolling restart: each replica in turn stopped (SIGTERM: it drains) and a
//	         new process started on its address, one every -duration/(N+1)
//	redis    redis-server stopped and started again without persistence (it comes back
//	         empty: no registry, no session hashes, no buckets) a third of the way in
//
// It reports the calls, their answers (results; the proxy's JSON-RPC errors, by message;
// failures with no JSON-RPC answer), the sessions answered 404 (lost), and for redis how
// long after Redis answered again each replica shared the rate limits again (the time of
// its "reachable again" log line; "throughout" when no call of it found Redis down). A
// session lost or a call with no answer makes it exit non-zero.

// clusterFaultKinds are -cluster-fault's values.
var clusterFaultKinds = []string{"rolling", "redis"}

// clusterFaultKey is the cluster key the replicas seal sessions with (so that any can
// adopt a session).
const clusterFaultKey = `key = "mcp-bench-cluster-fault-key-0123456789abcdef"`

type clusterFaultReport struct {
	Fault        string         `json:"fault"`
	Replicas     int            `json:"replicas"`
	Sessions     int            `json:"sessions"`
	DurationSec  float64        `json:"duration_sec"`
	Calls        int64          `json:"calls"`
	Results      int64          `json:"results"`
	ProxyErrors  map[string]int `json:"proxy_errors,omitempty"` // JSON-RPC errors, by message
	NoAnswer     int64          `json:"no_answer"`              // failures without a JSON-RPC answer
	FirstNoAns   string         `json:"first_no_answer,omitempty"`
	NoAnswerAt   []string       `json:"no_answer_at,omitempty"` // the first 20: when (s into the run), what
	SessionsLost int64          `json:"sessions_lost"`          // answered 404
	Events       []faultStep    `json:"events"`
	// SharedAgainMs is, per replica (redis), how long after Redis answered PING again
	// the replica took a call's tokens from Redis again; -1: it never left Redis (no call
	// of it found Redis down).
	SharedAgainMs map[string]float64 `json:"shared_again_ms,omitempty"`
}

type faultStep struct {
	AtSec  float64 `json:"at_sec"`
	What   string  `json:"what"`
	TookMs float64 `json:"took_ms"`
}

func runClusterFaultMode(ctx context.Context, o *options, params json.RawMessage, tmp string, stdout, errw io.Writer) error {
	dir := filepath.Join(tmp, "cluster-fault")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ups := []upstreamBlock{{Label: "bench", Command: o.upstream, Cwd: o.dir, Namespace: ""}}
	topo, err := topology.Start(topology.Options{ProxyBin: o.proxyPath, Replicas: o.cluster, Base: proxyConfig(ups) + clusterLimit,
		ClusterAttrs: clusterFaultKey + "\n  on_redis_failure = \"local\"", Dir: dir, LogLevel: "warn",
		ListenAttrs: fmt.Sprintf("max_sessions = %d", proxyMaxSessions(o))})
	if err != nil {
		return err
	}
	defer topo.Close()
	conc := 16
	if len(o.concurrency) > 0 {
		conc = o.concurrency[0]
	}
	client := newHTTPClient(topo.URL(), conc+4)
	defer client.close()
	sessions := make([]*httpSession, conc)
	for i := range sessions {
		if sessions[i], err = client.openSession(ctx, o.timeout); err != nil {
			return fmt.Errorf("opening session %d: %w", i, err)
		}
	}

	rep := clusterFaultReport{Fault: o.clusterFault, Replicas: o.cluster, Sessions: conc, ProxyErrors: map[string]int{}}
	var (
		calls, results, noAnswer, lost atomic.Int64
		firstNoAnswer                  atomic.Value
		errMu                          sync.Mutex
		wg                             sync.WaitGroup
	)
	// The load goes on for -duration, and for a second at least after the last fault
	// step (a restart takes longer than planned on a loaded machine).
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	start := time.Now()
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				m, err := s.call(ctx, "tools/call", params)
				calls.Add(1)
				switch {
				case err != nil:
					if strings.Contains(err.Error(), "HTTP 404") {
						lost.Add(1)
						return
					}
					noAnswer.Add(1)
					firstNoAnswer.CompareAndSwap(nil, err.Error())
					errMu.Lock()
					if len(rep.NoAnswerAt) < 20 {
						rep.NoAnswerAt = append(rep.NoAnswerAt, fmt.Sprintf("%.3fs %v", time.Since(start).Seconds(), err))
					}
					errMu.Unlock()
				case m.Error != nil:
					if m.Error.Code == jsonrpc.CodeInvalidRequest && strings.Contains(m.Error.Message, "Session not found") {
						lost.Add(1)
						return
					}
					errMu.Lock()
					rep.ProxyErrors[m.Error.Message]++
					errMu.Unlock()
				default:
					results.Add(1)
				}
			}
		}()
	}
	step := func(what string, f func() error) error {
		at := time.Since(start)
		t0 := time.Now()
		err := f()
		rep.Events = append(rep.Events, faultStep{AtSec: at.Seconds(), What: what, TookMs: msOf(time.Since(t0))})
		fmt.Fprintf(errw, "%5.1fs %s: %.0f ms\n", at.Seconds(), what, msOf(time.Since(t0)))
		return err
	}
	pause := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	var faultErr error
	switch o.clusterFault {
	case "rolling":
		every := o.duration / time.Duration(o.cluster+1)
		for i, r := range topo.Replicas {
			pause(every)
			if faultErr = step("SIGTERM "+r.Name, func() error { return r.Stop(30 * time.Second) }); faultErr != nil {
				break
			}
			if faultErr = step("restart "+r.Name+" on "+r.Addr, func() error { _, err := topo.StartReplica(i); return err }); faultErr != nil {
				break
			}
		}
	case "redis":
		pause(o.duration / 3)
		marks := make([]int, len(topo.Replicas))
		for i, r := range topo.Replicas {
			marks[i] = len(r.Output.String())
		}
		faultErr = step("redis-server stopped", topo.Redis.Stop)
		var back time.Time
		if faultErr == nil {
			faultErr = step("redis-server started again, empty, answering PING", topo.Redis.Start)
			back = time.Now()
		}
		if faultErr == nil {
			rep.SharedAgainMs = map[string]float64{}
			deadline := time.Now().Add(10 * time.Second)
			for i, r := range topo.Replicas {
				for {
					ms, ok := sharedAgain(r.Output.String()[marks[i]:], back)
					if ok || time.Now().After(deadline) {
						if !ok {
							ms = -2 // not shared again within 10 s
						}
						rep.SharedAgainMs[r.Name] = ms
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}
	}
	pause(max(o.duration-time.Since(start), time.Second))
	stop()
	wg.Wait()
	elapsed := time.Since(start)
	for _, s := range sessions {
		s.close(ctx)
	}
	rep.DurationSec = elapsed.Seconds()
	rep.Calls, rep.Results, rep.NoAnswer, rep.SessionsLost = calls.Load(), results.Load(), noAnswer.Load(), lost.Load()
	if v, ok := firstNoAnswer.Load().(string); ok {
		rep.FirstNoAns = v
	}
	printClusterFault(stdout, &rep)
	if o.jsonPath != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonPath, b, 0o644); err != nil {
			return err
		}
	}
	if faultErr != nil {
		return fmt.Errorf("cluster fault %s: %w\n%s", o.clusterFault, faultErr, topo.Logs())
	}
	if rep.SessionsLost > 0 || rep.NoAnswer > 0 {
		return fmt.Errorf("cluster fault %s: %d sessions lost, %d calls without an answer (first: %s)",
			o.clusterFault, rep.SessionsLost, rep.NoAnswer, rep.FirstNoAns)
	}
	return nil
}

// sharedAgain reads a replica's log since the fault: -1 when it never found Redis down
// (no "unreachable" line), the time in ms from back to its "reachable again" line, or
// false when it found Redis down and has not shared the limits again yet.
func sharedAgain(log string, back time.Time) (float64, bool) {
	if !strings.Contains(log, "redis is unreachable: rate limits") {
		return -1, true
	}
	for line := range strings.SplitSeq(log, "\n") {
		if !strings.Contains(line, "redis is reachable again") {
			continue
		}
		var l struct {
			Time time.Time `json:"time"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			continue
		}
		return max(msOf(l.Time.Sub(back)), 0), true
	}
	return 0, false
}

func printClusterFault(w io.Writer, r *clusterFaultReport) {
	what := map[string]string{"rolling": "a rolling restart of every replica (SIGTERM, a new process on its address)",
		"redis": "redis-server restarted empty (no persistence)"}[r.Fault]
	fmt.Fprintf(w, "cluster fault: %s; %d replicas behind HAProxy round-robin, %d sessions calling for %.0fs\n",
		what, r.Replicas, r.Sessions, r.DurationSec)
	errs := 0
	for _, n := range r.ProxyErrors {
		errs += n
	}
	fmt.Fprintf(w, "  calls %d: results %d, the proxy's errors %d, no answer %d; sessions lost (404) %d\n",
		r.Calls, r.Results, errs, r.NoAnswer, r.SessionsLost)
	msgs := make([]string, 0, len(r.ProxyErrors))
	for m := range r.ProxyErrors {
		msgs = append(msgs, m)
	}
	slices.Sort(msgs)
	for _, m := range msgs {
		fmt.Fprintf(w, "    %d× %q\n", r.ProxyErrors[m], m)
	}
	for _, a := range r.NoAnswerAt {
		fmt.Fprintf(w, "    no answer at %s\n", a)
	}
	for _, e := range r.Events {
		fmt.Fprintf(w, "  at %5.1fs %s (%.0f ms)\n", e.AtSec, e.What, e.TookMs)
	}
	names := make([]string, 0, len(r.SharedAgainMs))
	for n := range r.SharedAgainMs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		switch ms := r.SharedAgainMs[n]; {
		case ms == -1:
			fmt.Fprintf(w, "  %s: rate limits shared throughout (no call found redis down)\n", n)
		case ms < -1:
			fmt.Fprintf(w, "  %s: rate limits NOT shared again within 10 s\n", n)
		default:
			fmt.Fprintf(w, "  %s: rate limits shared again %.0f ms after redis answered again\n", n, ms)
		}
	}
}
