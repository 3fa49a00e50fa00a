// Command mcp-bench measures tools/call round trips through mcp-proxy against the same
// upstream called directly, in one run, and prints a comparison.
//
// For each round it spawns the upstream ("direct") and the proxy in front of a copy of it
// ("proxy"), and with -plugin the same proxy with one plugin on the measured tool
// ("proxy+plugin") or with -extra-hcl the same proxy with more config appended
// ("proxy+extra"), runs a latency phase at concurrency 1 and a throughput phase per
// concurrency level against each, interleaved so machine noise hits all alike, samples
// the proxy's memory and CPU (and its plugin's CPU) from /proc, and finally measures the
// idle memory of a proxy holding many upstreams. It only talks to the child processes it
// starts, and stops them all on exit.
//
// -mode stdio (the default) speaks to both over stdin/stdout. -mode http speaks
// Streamable HTTP to both: the upstream serves HTTP itself (testserver -http), the proxy
// serves its HTTP front end with the upstream over stdio, and (-http-upstream) a second
// proxy with the upstream over HTTP. It also counts the TCP connections opened per call,
// and -sessions N measures a proxy holding N concurrent sessions with open GET streams.
//
// main is thin: it calls run and turns an error into a non-zero exit status.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
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
	proxyPath       string   // absolute
	upstream        []string // program (absolute) and arguments
	tool            string
	args            string
	duration        time.Duration
	latencyCalls    int
	warmup          int
	concurrency     []int
	idleUpstreams   int
	rounds          int
	mode            string        // modeStdio or modeHTTP
	httpUpstream    bool          // -mode http: also measure the proxy with an HTTP upstream
	stdioHTTPUp     bool          // -mode http: also measure the proxy over stdio with an HTTP upstream
	floor           bool          // -mode http: also measure the floor forwarder of each path
	useTLS          bool          // -mode http: the upstreams serve HTTPS
	tls             *tlsFiles     // -tls: the run's certificate, made once the temporary directory exists
	self            string        // this program (the floor forwarder is "mcp-bench floor")
	sessions        int           // -mode http: sessions of the many-sessions phase (0 skips it)
	cluster         int           // -mode http: replicas of the cluster-N target (0: no cluster targets)
	sessionCalls    int           // tools/call per session in that phase
	idleSessions    int           // -mode http: idle sessions held open on every target during the phases
	plugin          []string      // -plugin: program (absolute) and arguments; nil: no proxy+plugin target
	pluginHops      int           // plugin process crossings per call, to divide the added figures by
	extraHCL        string        // -extra-hcl: file of HCL appended to the proxy+extra config; "": no such target
	reloadEvery     time.Duration // -reload-every: the reload-under-load mode (reload.go); 0: the comparison
	chaosEvery      time.Duration // -chaos-every: the chaos mode (chaos.go); 0: off
	clusterFault    string        // -cluster-fault: the cluster fault mode (clusterfault.go); "": off
	soak            time.Duration // -soak: the soak mode (chaos.go); 0: off
	timeout         time.Duration
	jsonPath        string
	startup         bool          // -startup: the start-up mode (startup.go)
	fanout          int           // -startup: upstreams of the fan-out and list phases
	initDelay       time.Duration // -startup: how long each fan-out upstream takes to initialize
	slowDelay       time.Duration // -startup: how long the slow upstream takes to initialize
	listTools       int           // -startup: tools per upstream of the list phase
	listCalls       int           // -startup: tools/list calls per target of the list phase
	startupSessions int           // -startup: idle HTTP sessions whose cost the idle phase measures; 0: none
	baselineProxy   string        // -startup: another mcp-proxy binary measured alongside (list and idle phases); "": none
	dir             string        // working directory of the children
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
	maxSessionCalls = 1000

	modeStdio = "stdio"
	modeHTTP  = "http"
)

const usageText = `Usage: mcp-bench [flags]

Measures tools/call through mcp-proxy against the upstream called directly, in one run:
a latency phase at concurrency 1 and a throughput phase per -concurrency level, against
each target in turn, rounds alternating who goes first. The proxy's CPU per call and
memory come from /proc.

-mode stdio (default): both targets are spoken to over stdin/stdout. With -plugin
"CMD ARGS" a third target, proxy+plugin, is the same proxy and upstream with a plugin
"bench" block running CMD ARGS on the measured tool (failure "closed", timeout 5s, an
empty config block); its CPU figure is the proxy's plus its plugin processes', and the
summary reports what the plugin adds to proxy, in all and per hop (-plugin-hops). With
-extra-hcl FILE (not with -plugin) a third target, proxy+extra, is the same proxy and
upstream with FILE's HCL appended to the config (say an admin block on 127.0.0.1:0 and a
telemetry block with sampling = 0); its CPU figure is the proxy process's alone, and the
summary reports what the extra config adds to proxy's p50 and CPU per call.

-mode http: both are spoken to over Streamable HTTP, one MCP session per worker over a
keep-alive connection pool (idle connections kept for every worker), with the same client
code; the TCP connections it dials during each measured phase are counted:
  direct        the upstream serving HTTP itself: -upstream plus
                "-http 127.0.0.1:0 -http-addr-file FILE" (testserver -http supports it)
  proxy         mcp-proxy run with a listen "http" block on a free loopback port and
                the upstream over stdio
  proxy-httpup  (-http-upstream) mcp-proxy with the upstream over HTTP (url upstream);
                the upstream's GET /stats tells how many TCP connections the proxy
                opened to it per call
  -idle-sessions N  holds N idle sessions with open GET streams on every target while
                the phases run (a proxy with many connected clients)
  -cluster N    three more targets, cluster-1 and cluster-N: redis-server, 1 (N) replicas
                of mcp-proxy with a cluster block and a rate limit every call takes a
                token from (never refusing), and HAProxy round-robin in front; haproxy-1:
                the same with 1 replica and no cluster block (the limit in memory); their
                CPU is the replicas', HAProxy's and redis-server's together (the replicas'
                alone, Redis's CPU and its round trips per call, from INFO, are reported
                too); the summary compares cluster-1 with proxy and with haproxy-1 (the
                shared-state path) and cluster-N with cluster-1
  -sessions N   then opens N sessions at once to a fresh proxy, each with its GET
                stream open and -session-calls tools/call, and reports the proxy's RSS per
                idle session, and its threads, descriptors (and goroutines, if it serves
                net/http/pprof on MCP_PROXY_DEBUG_ADDR) before, during and after DELETE.

Each throughput worker makes 10 unmeasured calls first; the measurement starts when all
have (over HTTP, each then has its session and its connection).

Flags:
`

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("mcp-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	var upstream, conc, plugin string
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
	fs.StringVar(&plugin, "plugin", "", "-mode stdio: plugin command and arguments, split on spaces; adds the target proxy+plugin")
	fs.StringVar(&o.extraHCL, "extra-hcl", "", "-mode stdio: file of HCL appended verbatim to the proxy's config (e.g. admin and telemetry blocks; an admin address may use port 0); adds the target proxy+extra; not with -plugin")
	fs.IntVar(&o.pluginHops, "plugin-hops", 2, "plugin process crossings per call (2 for a plugin with before and after hooks), to report the added figures per hop")
	fs.DurationVar(&o.reloadEvery, "reload-every", 0, "-mode http: instead of the comparison, reload the proxy's configuration this often for -duration while the first -concurrency level of sessions calls the tool (reload.go)")
	fs.DurationVar(&o.chaosEvery, "chaos-every", 0, "instead of the comparison, the chaos mode (chaos.go): five upstreams (-upstream must be the testserver), -concurrency sessions calling them for -duration, and every ~D one upstream killed (kill -9) or its connections reset")
	fs.DurationVar(&o.soak, "soak", 0, "instead of the comparison, the soak mode (chaos.go): the chaos mode's load without faults for this long; the proxy's RSS, goroutines and fds at start and end")
	fs.BoolVar(&o.startup, "startup", false, "instead of the comparison, the start-up mode (startup.go; -upstream must be the testserver): fan-out of -fanout upstreams "+
		"taking -init-delay to initialize against one, initialize with an upstream taking -slow-delay, tools/list over 1 and -fanout upstreams of -list-tools tools, "+
		"idle memory with -idle-upstreams")
	fs.IntVar(&o.fanout, "fanout", 20, "-startup: upstreams of the fan-out and list phases")
	fs.DurationVar(&o.initDelay, "init-delay", time.Second, "-startup: how long each fan-out upstream takes to answer initialize")
	fs.DurationVar(&o.slowDelay, "slow-delay", 5*time.Second, "-startup: how long the slow upstream takes to answer initialize")
	fs.IntVar(&o.listTools, "list-tools", 50, "-startup: tools per upstream of the list phase")
	fs.IntVar(&o.listCalls, "list-calls", 3000, "-startup: tools/list calls per target of the list phase (a tenth as many walks)")
	fs.IntVar(&o.startupSessions, "startup-sessions", 0, "-startup: open this many idle legacy HTTP sessions on a proxy with -idle-upstreams and report RssAnon and Go heap per session")
	fs.StringVar(&o.baselineProxy, "baseline-proxy", "", "-startup: another mcp-proxy binary (say the previous version) measured alongside in the list and idle phases")
	fs.StringVar(&o.mode, "mode", modeStdio, "transport to the targets: stdio or http")
	fs.BoolVar(&o.httpUpstream, "http-upstream", true, "-mode http: also measure the proxy with the upstream over HTTP (target proxy-httpup)")
	fs.BoolVar(&o.stdioHTTPUp, "stdio-httpup", false, "-mode http: also measure the proxy spoken to over stdio with the upstream over HTTP (target stdio-httpup)")
	fs.BoolVar(&o.useTLS, "tls", false, "-mode http: every upstream serving HTTP (direct, and the proxies' and floors' HTTP upstreams) serves HTTPS with a self-signed loopback certificate made for the run, HTTP/2 offered; the proxies' front ends stay plain HTTP")
	fs.BoolVar(&o.floor, "floor", false, "-mode http: also measure the floor forwarder (the proxy's parts, no logic) of each path: floor, floor-httpup, floor-stdio-httpup")
	fs.IntVar(&o.sessions, "sessions", 0, "-mode http: open this many concurrent sessions with GET streams to a fresh proxy per round (0 skips)")
	fs.IntVar(&o.sessionCalls, "session-calls", 3, "-mode http: tools/call made by each session of the -sessions phase")
	fs.IntVar(&o.idleSessions, "idle-sessions", 0, "-mode http: hold this many extra idle sessions, each with its GET stream open, on every target during the phases")
	fs.StringVar(&o.clusterFault, "cluster-fault", "", "-mode http -cluster N: instead of the comparison, -concurrency[0] sessions call through the cluster topology for -duration while a fault hits it: rolling (each replica in turn SIGTERMed and restarted on its address) or redis (redis-server restarted empty) (clusterfault.go)")
	fs.IntVar(&o.cluster, "cluster", 0, "-mode http: also measure the cluster topology (redis-server, HAProxy round-robin) with 1 replica and with this many (targets cluster-1 and cluster-N; needs redis-server and haproxy)")
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
	check(o.mode == modeStdio || o.mode == modeHTTP, "-mode must be stdio or http")
	check(o.sessions >= 0 && o.sessions <= maxSessions, "-sessions must be in [0, %d]", maxSessions)
	check(o.sessions == 0 || o.mode == modeHTTP, "-sessions needs -mode http")
	check(o.sessionCalls >= 0 && o.sessionCalls <= maxSessionCalls, "-session-calls must be in [0, %d]", maxSessionCalls)
	check(o.startupSessions >= 0 && o.startupSessions <= maxSessions, "-startup-sessions must be in [0, %d]", maxSessions)
	check(o.startupSessions == 0 || o.startup, "-startup-sessions needs -startup")
	check(o.idleSessions >= 0 && o.idleSessions <= maxSessions, "-idle-sessions must be in [0, %d]", maxSessions)
	check(o.idleSessions == 0 || o.mode == modeHTTP, "-idle-sessions needs -mode http")
	check(!o.floor || o.mode == modeHTTP, "-floor needs -mode http")
	check(!o.useTLS || o.mode == modeHTTP, "-tls needs -mode http")
	check(!o.stdioHTTPUp || o.mode == modeHTTP, "-stdio-httpup needs -mode http")
	check(o.cluster == 0 || (o.cluster >= 2 && o.cluster <= 16), "-cluster must be 0 or in [2, 16]")
	check(o.cluster == 0 || o.mode == modeHTTP, "-cluster needs -mode http")
	check(o.clusterFault == "" || slices.Contains(clusterFaultKinds, o.clusterFault), "-cluster-fault must be one of %v", clusterFaultKinds)
	check(o.clusterFault == "" || o.cluster >= 2, "-cluster-fault needs -cluster N (N >= 2) and -mode http")
	levels, err := parseConcurrency(conc)
	check(err == nil, "%v", err)
	o.concurrency = levels
	o.upstream = strings.Fields(upstream)
	check(len(o.upstream) > 0, "-upstream must not be empty")
	o.plugin = strings.Fields(plugin)
	check(len(o.plugin) == 0 || o.mode == modeStdio, "-plugin needs -mode stdio (the proxy+plugin target is measured over stdio only)")
	check(o.extraHCL == "" || o.mode == modeStdio, "-extra-hcl needs -mode stdio (the proxy+extra target is measured over stdio only)")
	check(o.extraHCL == "" || len(o.plugin) == 0, "-extra-hcl and -plugin cannot be combined: run them separately")
	check(o.pluginHops >= 1 && o.pluginHops <= maxPluginHops, "-plugin-hops must be in [1, %d]", maxPluginHops)
	check(o.reloadEvery == 0 || o.mode == modeHTTP, "-reload-every needs -mode http")
	check(o.reloadEvery == 0 || (o.reloadEvery >= 100*time.Millisecond && o.reloadEvery < o.duration), "-reload-every must be in [100ms, -duration)")
	check(o.chaosEvery == 0 || o.chaosEvery >= 100*time.Millisecond, "-chaos-every must be at least 100ms")
	check(o.soak >= 0 && o.soak <= maxSoak, "-soak must be in [0, %v]", maxSoak)
	check(o.soak == 0 || o.chaosEvery == 0, "-soak and -chaos-every cannot be combined")
	check(o.fanout >= 1 && o.fanout <= maxIdle, "-fanout must be in [1, %d]", maxIdle)
	check(o.initDelay >= 0 && o.initDelay <= maxDuration, "-init-delay must be in [0, %v]", maxDuration)
	check(o.slowDelay > 0 && o.slowDelay <= maxDuration, "-slow-delay must be in (0, %v]", maxDuration)
	check(o.listTools >= testserverBaseTools && o.listTools <= 10000, "-list-tools must be in [%d, 10000]", testserverBaseTools)
	check(o.listCalls >= 10 && o.listCalls <= maxCalls, "-list-calls must be in [10, %d]", maxCalls)
	check(!o.startup || o.mode == modeStdio, "-startup needs -mode stdio")
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
	if len(args) > 0 && args[0] == "floor" {
		return runFloor(ctx, args[1:], stdin, stdout, stderr)
	}
	errw := &lockedWriter{w: stderr} // the benchmark reads nothing from its own stdin
	o, err := parseOptions(args, errw)
	if err != nil {
		return err
	}
	if o.self, err = os.Executable(); err != nil {
		return fmt.Errorf("finding mcp-bench itself (for the floor forwarder): %w", err)
	}
	if o.proxyPath, err = resolveProgram(o.proxyPath); err != nil {
		return fmt.Errorf("finding the proxy (build it: go build -o bin/mcp-proxy ./cmd/mcp-proxy): %w", err)
	}
	if o.upstream[0], err = resolveProgram(o.upstream[0]); err != nil {
		return fmt.Errorf("finding the upstream (for the default: go build -o bin/testserver ./internal/testing/testserver): %w", err)
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
	if o.reloadEvery > 0 {
		return runReloadMode(ctx, o, params, tmp, stdout, errw)
	}
	if o.clusterFault != "" {
		return runClusterFaultMode(ctx, o, params, tmp, stdout, errw)
	}
	if o.chaosEvery > 0 || o.soak > 0 {
		return runChaosMode(ctx, o, tmp, stdout, errw)
	}
	if o.startup {
		if o.baselineProxy != "" {
			if o.baselineProxy, err = resolveProgram(o.baselineProxy); err != nil {
				return fmt.Errorf("finding the baseline proxy: %w", err)
			}
		}
		return runStartupMode(ctx, o, tmp, stdout, errw)
	}
	if o.useTLS {
		if o.tls, err = makeLoopbackCert(tmp); err != nil {
			return err
		}
	}
	env := &roundEnv{o: o, params: params, tmp: tmp, errw: errw}
	env.mainCfg = filepath.Join(tmp, "bench.hcl")
	ups := []upstreamBlock{{Label: "bench", Command: o.upstream, Cwd: o.dir, Namespace: ""}}
	if err := os.WriteFile(env.mainCfg, []byte(proxyConfig(ups)), 0o600); err != nil {
		return fmt.Errorf("writing the proxy config: %w", err)
	}
	if len(o.plugin) > 0 {
		if o.plugin[0], err = resolveProgram(o.plugin[0]); err != nil {
			return fmt.Errorf("finding the plugin (for the test plugin: go build -o bin/testplugin ./internal/testing/testplugin): %w", err)
		}
		env.pluginCfg = filepath.Join(tmp, "plugin.hcl")
		if err := os.WriteFile(env.pluginCfg, []byte(proxyConfigPlugins(ups, []pluginBlock{benchPlugin(o)})), 0o600); err != nil {
			return fmt.Errorf("writing the proxy+plugin config: %w", err)
		}
	}
	if o.extraHCL != "" {
		extra, err := os.ReadFile(o.extraHCL)
		if err != nil {
			return fmt.Errorf("reading -extra-hcl: %w", err)
		}
		env.extraCfg = filepath.Join(tmp, "extra.hcl")
		if err := os.WriteFile(env.extraCfg, []byte(proxyConfigExtra(ups, o.extraHCL, extra)), 0o600); err != nil {
			return fmt.Errorf("writing the proxy+extra config: %w", err)
		}
	}
	env.idleCfg = filepath.Join(tmp, "idle.hcl")
	if o.idleUpstreams > 0 {
		cfg := proxyConfig(idleUpstreams(o.idleUpstreams, o.upstream, o.dir))
		if err := os.WriteFile(env.idleCfg, []byte(cfg), 0o600); err != nil {
			return fmt.Errorf("writing the idle proxy config: %w", err)
		}
	}

	rep := newReport(o)
	for r := range o.rounds {
		rr, err := runRound(ctx, r, env)
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

// roundEnv is what every round shares.
type roundEnv struct {
	o                *options
	params           json.RawMessage
	tmp              string // temporary directory for configs and address files
	mainCfg, idleCfg string // stdio configs
	pluginCfg        string // -plugin: the stdio config of proxy+plugin
	extraCfg         string // -extra-hcl: the stdio config of proxy+extra
	errw             io.Writer
}

// startTargets starts the targets of one round, in their canonical order.
func startTargets(ctx context.Context, round int, env *roundEnv) ([]*target, error) {
	o := env.o
	if o.mode == modeHTTP {
		return startHTTPTargets(ctx, o, env.tmp, round, env.errw)
	}
	direct, err := startTarget(ctx, targetDirect, o.upstream, o.dir, false, env.errw)
	if err != nil {
		return nil, err
	}
	proxy, err := startTarget(ctx, targetProxy, proxyArgv(o, env.mainCfg), o.dir, true, env.errw)
	if err != nil {
		return nil, errors.Join(err, direct.Close())
	}
	if env.extraCfg != "" {
		extra, err := startTarget(ctx, targetProxyExtra, proxyArgv(o, env.extraCfg), o.dir, true, env.errw)
		if err != nil {
			return nil, errors.Join(err, proxy.Close(), direct.Close())
		}
		return []*target{direct, proxy, extra}, nil
	}
	if env.pluginCfg == "" {
		return []*target{direct, proxy}, nil
	}
	withPlugin, err := startPluginTarget(ctx, env)
	if err != nil {
		return nil, errors.Join(err, proxy.Close(), direct.Close())
	}
	return []*target{direct, proxy, withPlugin}, nil
}

// rotate returns ts rotated left by k, so that each round another target goes first.
func rotate[T any](ts []T, k int) []T {
	if len(ts) == 0 {
		return ts
	}
	k %= len(ts)
	return append(append([]T(nil), ts[k:]...), ts[:k]...)
}

// runRound runs every phase once against every target, then the idle phase and (-mode
// http) the sessions phase.
func runRound(ctx context.Context, round int, env *roundEnv) (roundResult, error) {
	o, errw := env.o, env.errw
	rr := roundResult{Round: round + 1}
	targets, err := startTargets(ctx, round, env)
	if err != nil {
		return rr, err
	}
	defer func() {
		for _, t := range targets {
			t.Close()
		}
	}()

	specs := []phaseSpec{{kindLatency, 1}}
	for _, c := range o.concurrency {
		specs = append(specs, phaseSpec{kindThroughput, c})
	}
	// Alternate who goes first, so that none always runs on a warmer machine.
	order := rotate(targets, round)
	for _, spec := range specs {
		for _, t := range order {
			res, err := runPhase(ctx, t, spec, o, env.params)
			if err != nil {
				return rr, err
			}
			conns := ""
			if h := res.HTTP; h != nil {
				conns = fmt.Sprintf("  new conns %d", h.NewConns)
				if h.UpstreamNewConns != nil {
					conns += fmt.Sprintf(", to upstream %d", *h.UpstreamNewConns)
				}
				if h.UpstreamHTTP2Pct != nil && o.tls != nil {
					conns += fmt.Sprintf(" (%.0f%% of its POSTs over HTTP/2)", *h.UpstreamHTTP2Pct)
				}
			}
			split := ""
			if s := res.CPUSplit; s != nil {
				split = fmt.Sprintf("  (proxy %.1fµs + plugin %.1fµs, plugin pids %v)", s.ProxyCPUPerCallUS, s.PluginCPUPerCallUS, s.PluginPIDs)
			}
			fmt.Fprintf(errw, "round %d/%d %-18s %-14s %9.0f calls/s  p50 %7.1fµs  p99 %7.1fµs  CPU %6.1fµs/call  errors %d%s%s\n",
				round+1, o.rounds, spec, t.name, res.CallsPerSec, res.P50US, res.P99US, res.CPUPerCallUS, res.Errors, conns, split)
			rr.Phases = append(rr.Phases, res)
		}
	}
	var closeErrs []error
	for _, t := range targets {
		if t.sampler != nil {
			t.sampler.stop()
			switch t.name {
			case targetProxy:
				rr.ProxyPeakRSSkB = t.sampler.peakkB()
				rr.ProxyPeakRSSMiB = kBToMiB(rr.ProxyPeakRSSkB)
			case targetProxyHTTPUp:
				rr.ProxyHTTPUpPeakRSSkB = t.sampler.peakkB()
			case targetProxyPlugin:
				rr.ProxyPluginPeakRSSkB = t.sampler.peakkB()
			case targetProxyExtra:
				rr.ProxyExtraPeakRSSkB = t.sampler.peakkB()
			}
		}
		closeErrs = append(closeErrs, t.Close())
	}
	if err := errors.Join(closeErrs...); err != nil {
		return rr, err
	}

	if o.idleUpstreams > 0 {
		idle, err := measureIdle(ctx, proxyArgv(o, env.idleCfg), o.dir, o.idleUpstreams, errw)
		if err != nil {
			return rr, err
		}
		fmt.Fprintf(errw, "round %d/%d idle proxy with %d upstreams: %d tools, VmRSS %.1f MiB\n",
			round+1, o.rounds, idle.Upstreams, idle.Tools, idle.RSSMiB)
		rr.Idle = &idle
	}
	if o.sessions > 0 {
		sr, err := measureSessions(ctx, o, env.tmp, env.params, errw)
		if err != nil {
			return rr, fmt.Errorf("sessions phase: %w", err)
		}
		fmt.Fprintf(errw, "round %d/%d %d sessions: opened %d in %.1fs, errors %d, RSS %.1f -> %.1f MiB (%.1f KB/session), after DELETE %.1f MiB; fds %d -> %d -> %d; threads %d -> %d -> %d\n",
			round+1, o.rounds, sr.Sessions, sr.Opened, sr.OpenSec, sr.Errors, kBToMiB(sr.Baseline.RSSkB), kBToMiB(sr.Open.RSSkB),
			sr.PerSessionKB, kBToMiB(sr.After.RSSkB), sr.Baseline.FDs, sr.Open.FDs, sr.After.FDs,
			sr.Baseline.Threads, sr.Open.Threads, sr.After.Threads)
		rr.Sessions = &sr
	}
	return rr, nil
}
