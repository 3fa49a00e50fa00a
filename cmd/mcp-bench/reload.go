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
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// -reload-every D (with -mode http): the proxy's configuration is reloaded every D while
// -concurrency[0] sessions call the measured tool for -duration. The file alternates
// between two versions:
//
//	A: upstreams "bench" (the measured one, names unprefixed) and "other"; rule "flip"
//	   denies other__echo
//	B: the same plus upstream "extra"; rule "flip" denies nothing that exists
//
// and halfway through one broken version is written, which must be refused. After each
// reload answers, probes check that the version now running is in effect on the next
// call: other__echo and extra__echo are refused under A (denied; not there) and answered
// under B. It reports the calls, every failure of a call to
// the unaffected upstream, sessions lost, the reloads' outcomes and durations, and the
// probes that saw the wrong rule. Any failure, lost session, wrong probe or unexpected
// outcome makes it exit non-zero.

// reloadReport is what the mode prints, and writes with -json.
type reloadReport struct {
	DurationSec   float64          `json:"duration_sec"`
	Concurrency   int              `json:"concurrency"`
	Calls         int64            `json:"calls"`
	CallsPerSec   float64          `json:"calls_per_sec"`
	Failures      int64            `json:"failures"`
	FirstFailure  string           `json:"first_failure,omitempty"`
	SessionsLost  int64            `json:"sessions_lost"`
	P50US         float64          `json:"p50_us"`
	P99US         float64          `json:"p99_us"`
	MaxUS         float64          `json:"max_us"`
	Reloads       map[string]int   `json:"reloads"` // by outcome
	ReloadP50Ms   float64          `json:"reload_p50_ms"`
	ReloadMaxMs   float64          `json:"reload_max_ms"`
	Probes        int              `json:"probes"`
	WrongProbes   int              `json:"wrong_probes"`
	ProbeFailures []string         `json:"probe_failures,omitempty"`
	Outcomes      []map[string]any `json:"outcomes,omitempty"`
}

// reloadVersion renders one version of the configuration.
func reloadVersion(o *options, addr, adminAddr string, b, broken bool) string {
	up := func(label, ns string) string {
		return fmt.Sprintf("upstream %s {\n  command   = %s\n  cwd       = %s\n  namespace = %s\n}\n",
			hclString(label), hclList(o.upstream), hclString(o.dir), hclString(ns))
	}
	var s strings.Builder
	fmt.Fprintf(&s, "listen \"http\" {\n  address      = %s\n  max_sessions = %d\n}\n", hclString(addr), proxyMinSessions)
	fmt.Fprintf(&s, "admin {\n  address = %s\n}\n", hclString(adminAddr))
	s.WriteString(up("bench", ""))
	s.WriteString(up("other", "other"))
	denied := "other__echo"
	if b {
		s.WriteString(up("extra", "extra"))
		denied = "nothing__here"
	}
	fmt.Fprintf(&s, "policy {\n  default = \"allow\"\n  rule \"flip\" {\n    effect = \"deny\"\n    tools  = [%s]\n  }\n}\n", hclString(denied))
	if broken {
		s.WriteString("upstream \"broken\" {\n  command = \n}\n")
	}
	return s.String()
}

func runReloadMode(ctx context.Context, o *options, params json.RawMessage, tmp string, stdout, errw io.Writer) error {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	adminAddr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	cfg := filepath.Join(tmp, "reload.hcl")
	write := func(b, broken bool) error {
		next := cfg + ".next"
		if err := os.WriteFile(next, []byte(reloadVersion(o, addr, adminAddr, b, broken)), 0o600); err != nil {
			return err
		}
		return os.Rename(next, cfg)
	}
	if err := write(false, false); err != nil {
		return err
	}
	proxy, err := startServerChild(targetProxy, proxyArgv(o, cfg), o.dir, nil, errw)
	if err != nil {
		return err
	}
	defer proxy.Close()
	if err := waitListening(ctx, addr, proxy); err != nil {
		return err
	}
	if err := waitListening(ctx, adminAddr, proxy); err != nil {
		return err
	}
	conc := 16
	if len(o.concurrency) > 0 {
		conc = o.concurrency[0]
	}
	client := newHTTPClient("http://"+addr+mcpPath, conc+4)
	defer client.close()
	sessions := make([]*httpSession, conc)
	for i := range sessions {
		if sessions[i], err = client.openSession(ctx, o.timeout); err != nil {
			return fmt.Errorf("opening session %d: %w", i, err)
		}
	}
	probe, err := client.openSession(ctx, o.timeout)
	if err != nil {
		return fmt.Errorf("opening the probe session: %w", err)
	}

	rep := reloadReport{Concurrency: conc, Reloads: map[string]int{}}
	var (
		calls, failures, lost atomic.Int64
		firstFailure          atomic.Value
		latMu                 sync.Mutex
		lats                  []time.Duration
		wg                    sync.WaitGroup
	)
	runCtx, stop := context.WithTimeout(ctx, o.duration)
	defer stop()
	start := time.Now()
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 1<<14)
			for runCtx.Err() == nil {
				t0 := time.Now()
				err := callTool(ctx, s, params)
				local = append(local, time.Since(t0))
				calls.Add(1)
				if err != nil {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
					if strings.Contains(err.Error(), "404") || strings.Contains(strings.ToLower(err.Error()), "session") {
						lost.Add(1)
						return // the session is gone: nothing more to measure on it
					}
				}
			}
			latMu.Lock()
			lats = append(lats, local...)
			latMu.Unlock()
		}()
	}

	// The reloads, and the probes after each.
	var reloadTimes []time.Duration
	b := false
	brokenAt := o.duration / 2
	brokenDone := false
	tick := time.NewTicker(o.reloadEvery)
	defer tick.Stop()
	hc := &http.Client{Timeout: 5 * time.Minute}
	for {
		select {
		case <-runCtx.Done():
		case <-tick.C:
		}
		if runCtx.Err() != nil {
			break
		}
		broken := !brokenDone && time.Since(start) >= brokenAt
		if !broken {
			b = !b
		}
		if err := write(b, broken); err != nil {
			return err
		}
		t0 := time.Now()
		out, err := postReload(ctx, hc, "http://"+adminAddr)
		took := time.Since(t0)
		if err != nil {
			return err
		}
		rep.Outcomes = append(rep.Outcomes, out)
		outcome, _ := out["outcome"].(string)
		rep.Reloads[outcome]++
		want := "applied"
		if broken {
			want, brokenDone = "rejected", true
		}
		if outcome != want {
			rep.ProbeFailures = append(rep.ProbeFailures, fmt.Sprintf("reload %d: outcome %q, want %q: %v", len(rep.Outcomes), outcome, want, out["errors"]))
			rep.WrongProbes++
		}
		if !broken {
			reloadTimes = append(reloadTimes, took)
		}
		// The rule of the running version (b) is in effect on the very next call.
		checks := []struct {
			tool    string
			allowed bool
		}{{"other__echo", b}, {"extra__echo", b}}
		for _, c := range checks {
			rep.Probes++
			perr := callTool(ctx, probe, mustParams(c.tool))
			var rpcErr *jsonrpc.Error
			denied := errors.As(perr, &rpcErr)
			if perr != nil && !denied {
				return fmt.Errorf("probe %s: %w", c.tool, perr)
			}
			if denied == c.allowed {
				rep.WrongProbes++
				rep.ProbeFailures = append(rep.ProbeFailures, fmt.Sprintf("after reload %d (version %s): %s allowed=%v, want %v",
					len(rep.Outcomes), versionName(b), c.tool, !denied, c.allowed))
			}
		}
		fmt.Fprintf(errw, "reload %2d at %5.1fs: %-8s in %6.1f ms (version %s)\n", len(rep.Outcomes), time.Since(start).Seconds(),
			outcome, float64(took.Microseconds())/1000, versionName(b))
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, s := range sessions {
		s.close(ctx)
	}
	probe.close(ctx)

	slices.Sort(lats)
	slices.Sort(reloadTimes)
	rep.DurationSec = elapsed.Seconds()
	rep.Calls, rep.Failures, rep.SessionsLost = calls.Load(), failures.Load(), lost.Load()
	rep.CallsPerSec = float64(rep.Calls) / elapsed.Seconds()
	if v, ok := firstFailure.Load().(string); ok {
		rep.FirstFailure = v
	}
	if len(lats) > 0 {
		rep.P50US, rep.P99US = usOf(percentile(lats, 50)), usOf(percentile(lats, 99))
		rep.MaxUS = usOf(lats[len(lats)-1])
	}
	if len(reloadTimes) > 0 {
		rep.ReloadP50Ms = float64(percentile(reloadTimes, 50).Microseconds()) / 1000
		rep.ReloadMaxMs = float64(reloadTimes[len(reloadTimes)-1].Microseconds()) / 1000
	}
	fmt.Fprintf(stdout, "reload under load: %.0fs, %d sessions over HTTP, a reload every %v (versions A/B alternating, one broken file)\n",
		rep.DurationSec, conc, o.reloadEvery)
	fmt.Fprintf(stdout, "  calls to the unaffected upstream: %d (%.0f/s), failed %d, sessions lost %d; p50 %.0fµs p99 %.0fµs max %.1fms\n",
		rep.Calls, rep.CallsPerSec, rep.Failures, rep.SessionsLost, rep.P50US, rep.P99US, rep.MaxUS/1000)
	fmt.Fprintf(stdout, "  reloads: applied %d, rejected %d, other %d; applied in p50 %.1f ms, max %.1f ms\n",
		rep.Reloads["applied"], rep.Reloads["rejected"], len(rep.Outcomes)-rep.Reloads["applied"]-rep.Reloads["rejected"],
		rep.ReloadP50Ms, rep.ReloadMaxMs)
	fmt.Fprintf(stdout, "  rule probes right after each reload: %d, wrong %d\n", rep.Probes, rep.WrongProbes)
	for _, f := range rep.ProbeFailures {
		fmt.Fprintf(stdout, "    %s\n", f)
	}
	if o.jsonPath != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonPath, b, 0o644); err != nil {
			return err
		}
	}
	if rep.Failures > 0 || rep.SessionsLost > 0 || rep.WrongProbes > 0 {
		return fmt.Errorf("reload under load: %d failed calls (first: %s), %d sessions lost, %d wrong probes or outcomes",
			rep.Failures, rep.FirstFailure, rep.SessionsLost, rep.WrongProbes)
	}
	return nil
}

func versionName(b bool) string {
	if b {
		return "B"
	}
	return "A"
}

func mustParams(tool string) json.RawMessage {
	p, _ := toolParams(tool, []byte(`{}`))
	return p
}

func usOf(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// postReload asks the admin listener to reload and returns its JSON answer.
func postReload(ctx context.Context, hc *http.Client, base string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/reload", bytes.NewReader(nil))
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST /reload: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("POST /reload answered %s: %q", resp.Status, body)
	}
	return out, nil
}
