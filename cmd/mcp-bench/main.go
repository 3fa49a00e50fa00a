// Command mcp-bench measures tools/call round trips through mcp-proxy against the same
// upstream called directly, in one run, and prints a comparison.
//
// For each round it spawns the upstream ("direct") and the proxy in front of a copy of it
// ("proxy"), runs a latency phase at concurrency 1 and a throughput phase per concurrency
// level against both, interleaved so machine noise hits both alike, samples the proxy's
// memory and CPU from /proc, and finally measures the idle memory of a proxy holding many
// upstreams. It only talks to the child processes it starts, and stops them all on exit.
//
// main is thin: it calls run and turns an error into a non-zero exit status.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		code := 1
		var ue usageError
		if errors.As(err, &ue) {
			code = 2
		}
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "mcp-bench:", err)
		} else {
			code = 0
		}
		os.Exit(code)
	}
}

// usageError is a problem with the command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// options are the parsed flags.
type options struct {
	proxyPath     string   // absolute
	upstream      []string // program (absolute) and arguments
	tool          string
	args          string
	duration      time.Duration
	latencyCalls  int
	warmup        int
	concurrency   []int
	idleUpstreams int
	rounds        int
	timeout       time.Duration
	jsonPath      string
	dir           string // working directory of the children
}

// Flag limits, so that every loop stays bounded.
const (
	maxConcurrency  = 4096
	maxCalls        = 10_000_000
	maxDuration     = 10 * time.Minute
	maxIdle         = 500
	maxRounds       = 100
	maxCallTimeout  = 5 * time.Minute
	defaultProxy    = "./bin/mcp-proxy"
	defaultUpstream = "./bin/testserver -fast"
)

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("mcp-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: mcp-bench [flags]\n\nMeasures tools/call through mcp-proxy against the upstream called directly.\n\n")
		fs.PrintDefaults()
	}
	var upstream, conc string
	fs.StringVar(&o.proxyPath, "proxy", defaultProxy, "mcp-proxy binary")
	fs.StringVar(&upstream, "upstream", defaultUpstream, "upstream command and arguments, split on spaces")
	fs.StringVar(&o.tool, "tool", "echo", "tool to call")
	fs.StringVar(&o.args, "args", `{"text":"hello"}`, "tool arguments (JSON object)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "duration of each throughput phase")
	fs.IntVar(&o.latencyCalls, "latency-calls", 5000, "sequential calls of the concurrency-1 latency phase")
	fs.IntVar(&o.warmup, "warmup", 500, "calls before the latency phase (not measured)")
	fs.StringVar(&conc, "concurrency", "16,64", "comma-separated concurrency levels of the throughput phases (empty for none)")
	fs.IntVar(&o.idleUpstreams, "idle-upstreams", 10, "upstream copies for the idle-RSS phase (0 skips it)")
	fs.IntVar(&o.rounds, "rounds", 1, "repeat everything this many times and report medians")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-call timeout (a timed-out call counts as an error)")
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Sprintf("unexpected arguments: %q", fs.Args())}
	}
	var errs []string
	check := func(ok bool, format string, a ...any) {
		if !ok {
			errs = append(errs, fmt.Sprintf(format, a...))
		}
	}
	check(o.duration > 0 && o.duration <= maxDuration, "-duration must be in (0, %v]", maxDuration)
	check(o.latencyCalls >= 1 && o.latencyCalls <= maxCalls, "-latency-calls must be in [1, %d]", maxCalls)
	check(o.warmup >= 0 && o.warmup <= maxCalls, "-warmup must be in [0, %d]", maxCalls)
	check(o.idleUpstreams >= 0 && o.idleUpstreams <= maxIdle, "-idle-upstreams must be in [0, %d]", maxIdle)
	check(o.rounds >= 1 && o.rounds <= maxRounds, "-rounds must be in [1, %d]", maxRounds)
	check(o.timeout > 0 && o.timeout <= maxCallTimeout, "-timeout must be in (0, %v]", maxCallTimeout)
	check(o.tool != "", "-tool must not be empty")
	levels, err := parseConcurrency(conc)
	check(err == nil, "%v", err)
	o.concurrency = levels
	o.upstream = strings.Fields(upstream)
	check(len(o.upstream) > 0, "-upstream must not be empty")
	if len(errs) > 0 {
		return nil, usageError{strings.Join(errs, "; ")}
	}
	return o, nil
}

// parseConcurrency parses "16,64" into levels; an empty string means none.
func parseConcurrency(s string) ([]int, error) {
	var levels []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > maxConcurrency {
			return nil, fmt.Errorf("-concurrency: %q is not an integer in [1, %d]", f, maxConcurrency)
		}
		levels = append(levels, n)
	}
	return levels, nil
}

// resolveProgram makes a program path absolute: paths with a slash against the working
// directory, bare names through PATH.
func resolveProgram(p string) (string, error) {
	if !strings.ContainsRune(p, '/') {
		lp, err := exec.LookPath(p)
		if err != nil {
			return "", err
		}
		p = lp
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", abs)
	}
	return abs, nil
}

// run is the whole program behind main.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	_ = stdin // the benchmark reads nothing from its own stdin
	errw := &lockedWriter{w: stderr}
	o, err := parseOptions(args, errw)
	if err != nil {
		return err
	}
	if o.proxyPath, err = resolveProgram(o.proxyPath); err != nil {
		return fmt.Errorf("finding the proxy (build it: go build -o bin/mcp-proxy ./cmd/mcp-proxy): %w", err)
	}
	if o.upstream[0], err = resolveProgram(o.upstream[0]); err != nil {
		return fmt.Errorf("finding the upstream (for the default: go build -o bin/testserver ./internal/testserver): %w", err)
	}
	if o.dir, err = os.Getwd(); err != nil {
		return fmt.Errorf("getting the working directory: %w", err)
	}
	params, err := toolParams(o.tool, []byte(o.args))
	if err != nil {
		return usageError{err.Error()}
	}

	tmp, err := os.MkdirTemp("", "mcp-bench-")
	if err != nil {
		return fmt.Errorf("creating a temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	mainCfg := filepath.Join(tmp, "bench.hcl")
	ups := []upstreamBlock{{Label: "bench", Command: o.upstream, Cwd: o.dir, Namespace: ""}}
	if err := os.WriteFile(mainCfg, []byte(proxyConfig(ups)), 0o600); err != nil {
		return fmt.Errorf("writing the proxy config: %w", err)
	}
	idleCfg := filepath.Join(tmp, "idle.hcl")
	if o.idleUpstreams > 0 {
		cfg := proxyConfig(idleUpstreams(o.idleUpstreams, o.upstream, o.dir))
		if err := os.WriteFile(idleCfg, []byte(cfg), 0o600); err != nil {
			return fmt.Errorf("writing the idle proxy config: %w", err)
		}
	}

	rep := newReport(o)
	for r := range o.rounds {
		rr, err := runRound(ctx, r, o, params, mainCfg, idleCfg, errw)
		if err != nil {
			return fmt.Errorf("round %d: %w", r+1, err)
		}
		rep.Rounds = append(rep.Rounds, rr)
	}
	rep.summarize()
	if err := rep.writeText(stdout); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if o.jsonPath != "" {
		if err := rep.writeJSON(o.jsonPath); err != nil {
			return err
		}
	}
	if n := rep.Summary.Errors; n > 0 {
		return fmt.Errorf("%d calls failed or timed out (first: %s)", n, rep.firstError())
	}
	return nil
}

// proxyArgv is the command line of the proxy serving config cfg.
func proxyArgv(o *options, cfg string) []string {
	return []string{o.proxyPath, "run", "--config", cfg, "--log-level", "warn"}
}

// runRound runs every phase once against both targets, then the idle phase.
func runRound(ctx context.Context, round int, o *options, params []byte, mainCfg, idleCfg string, errw io.Writer) (roundResult, error) {
	rr := roundResult{Round: round + 1}
	direct, err := startTarget(ctx, targetDirect, o.upstream, o.dir, false, errw)
	if err != nil {
		return rr, err
	}
	defer direct.Close()
	proxy, err := startTarget(ctx, targetProxy, proxyArgv(o, mainCfg), o.dir, true, errw)
	if err != nil {
		return rr, err
	}
	defer proxy.Close()

	specs := []phaseSpec{{kindLatency, 1}}
	for _, c := range o.concurrency {
		specs = append(specs, phaseSpec{kindThroughput, c})
	}
	order := []*target{direct, proxy}
	if round%2 == 1 { // alternate who goes first, so neither always runs on a warmer machine
		order = []*target{proxy, direct}
	}
	for _, spec := range specs {
		for _, t := range order {
			res, err := runPhase(ctx, t, spec, o, params)
			if err != nil {
				return rr, err
			}
			fmt.Fprintf(errw, "round %d/%d %-18s %-6s %9.0f calls/s  p50 %7.1fµs  p99 %7.1fµs  errors %d\n",
				round+1, o.rounds, spec, t.name, res.CallsPerSec, res.P50US, res.P99US, res.Errors)
			rr.Phases = append(rr.Phases, res)
		}
	}
	proxy.sampler.stop()
	rr.ProxyPeakRSSkB = proxy.sampler.peakkB()
	rr.ProxyPeakRSSMiB = kBToMiB(rr.ProxyPeakRSSkB)
	if err := errors.Join(direct.Close(), proxy.Close()); err != nil {
		return rr, err
	}

	if o.idleUpstreams > 0 {
		idle, err := measureIdle(ctx, proxyArgv(o, idleCfg), o.dir, o.idleUpstreams, errw)
		if err != nil {
			return rr, err
		}
		fmt.Fprintf(errw, "round %d/%d idle proxy with %d upstreams: %d tools, VmRSS %.1f MiB\n",
			round+1, o.rounds, idle.Upstreams, idle.Tools, idle.RSSMiB)
		rr.Idle = &idle
	}
	return rr, nil
}
