package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	modeServer = "server"
	modeClient = "client"
)

// suite is one way of invoking the conformance package.
type suite struct {
	name     string   // 0.1.16, 2025-11-25, 2026-07-28
	pkg      string   // key of environment.suites
	args     []string // after "server --url URL" or "client --command CMD"
	revision string   // the --requirements revision, "" for 0.1.16 (everything it runs is scored)
}

var (
	suite01      = suite{name: "0.1.16", pkg: "0.1"}
	suite202511  = suite{name: "2025-11-25", pkg: "alpha", args: []string{"--requirements", "2025-11-25"}, revision: "2025-11-25"}
	suite202607  = suite{name: "2026-07-28", pkg: "alpha", args: []string{"--requirements", "2026-07-28"}, revision: "2026-07-28"}
	clientSuite1 = suite{name: "0.1.16", pkg: "0.1", args: []string{"--suite", "core"}}
)

// Fixture variants: how the proxy reaches the Go SDK everything-server.
const (
	variantStdio     = "stdio"          // a child process of the proxy
	variantStateful  = "http-stateful"  // Streamable HTTP, legacy sessions (-stateless=false)
	variantStateless = "http-stateless" // Streamable HTTP, stateless, modern 2026-07-28
)

// run is one invocation of the suite.
type run struct {
	id      string
	mode    string
	suite   suite
	variant string // server mode: the fixture variant
	direct  bool   // no proxy: the suite talks to the fixture (server mode) or the client to the mock (client mode)
	res     *result

	// Long-lived runs: the runs of one group share one proxy (and fixture), which warm-up
	// clients of both eras and several capability sets have used first; step orders them
	// (runs of the same step run at once, interleaved). baseline names the baseline file
	// when it is another run's: a long-lived run expects exactly what a fresh proxy's run
	// of the same suite and variant does.
	group     string
	step      int
	baseline  string
	sharedURL string // set by the group before the run
}

// matrix is every run the harness knows, in table order.
func matrix() []*run {
	var rs []*run
	for _, s := range []suite{suite01, suite202511, suite202607} {
		for _, v := range []string{variantStdio, variantStateful, variantStateless} {
			rs = append(rs, &run{id: "server-" + s.name + "-" + v, mode: modeServer, suite: s, variant: v})
		}
	}
	// One proxy per variant for all three suites, one after another and then two at once.
	for _, v := range []string{variantStdio, variantStateful, variantStateless} {
		g := "long-" + v
		for i, s := range []suite{suite01, suite202511, suite202607} {
			rs = append(rs, &run{id: g + "-" + s.name, mode: modeServer, suite: s, variant: v, group: g, step: i,
				baseline: "server-" + s.name + "-" + v})
		}
		for _, s := range []suite{suite202511, suite202607} {
			rs = append(rs, &run{id: g + "-interleaved-" + s.name, mode: modeServer, suite: s, variant: v, group: g, step: 3,
				baseline: "server-" + s.name + "-" + v})
		}
	}
	rs = append(rs,
		&run{id: "client-0.1.16-core", mode: modeClient, suite: clientSuite1},
		&run{id: "client-2026-07-28", mode: modeClient, suite: suite202607},
		// Development checks: the same suites without the proxy.
		&run{id: "direct-server-0.1.16", mode: modeServer, suite: suite01, variant: variantStateful, direct: true},
		&run{id: "direct-server-2025-11-25", mode: modeServer, suite: suite202511, variant: variantStateful, direct: true},
		&run{id: "direct-server-2026-07-28", mode: modeServer, suite: suite202607, variant: variantStateless, direct: true},
		&run{id: "direct-client-0.1.16-core", mode: modeClient, suite: clientSuite1, direct: true},
		&run{id: "direct-client-2026-07-28", mode: modeClient, suite: suite202607, direct: true},
	)
	return rs
}

// suiteArgs are the arguments that select what r runs: its suite's, or one scenario
// (at the revision's wire version for --requirements suites).
func (e *environment) suiteArgs(r *run) []string {
	if e.opts.scenario == "" {
		return r.suite.args
	}
	args := []string{"--scenario", e.opts.scenario}
	if r.suite.revision != "" {
		args = append(args, "--spec-version", r.suite.revision)
	}
	return args
}

// execute performs one run and evaluates its results.
func (e *environment) execute(ctx context.Context, r *run) *result {
	dir := filepath.Join(e.out, r.id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &result{status: "ERROR", note: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.runTimeout)
	defer cancel()

	baseID := r.id
	if r.baseline != "" {
		baseID = r.baseline
	}
	base, err := loadBaseline(filepath.Join(e.baselineDir, baseID+".yml"))
	if err != nil {
		return &result{status: "ERROR", note: err.Error()}
	}
	if r.suite.pkg == "0.1" {
		for _, en := range append(base.entries(r.mode), base.entries("flaky")...) {
			if en.check != "" {
				return &result{status: "ERROR", note: fmt.Sprintf("baseline %s.yml: the 0.1.16 suite takes whole scenarios only, not %q", r.id, en)}
			}
		}
	}
	scored, err := e.scoredScenarios(ctx, r)
	if err != nil {
		return &result{status: "ERROR", note: err.Error()}
	}
	// The suite reads a copy, so that the run directory records what it was given.
	efPath := filepath.Join(dir, "expected-failures.yml")
	if err := os.WriteFile(efPath, base.render(r.mode), 0o644); err != nil {
		return &result{status: "ERROR", note: err.Error()}
	}

	var res *result
	if r.mode == modeServer {
		res = e.serverRun(ctx, r, dir, efPath)
	} else {
		res = e.clientRun(ctx, r, dir, efPath)
	}
	if res.status != "" { // ERROR or SKIP before the suite ran
		return res
	}
	evaluate(res, filepath.Join(dir, "results"), r.mode, base, scored, e.opts.scenario != "")
	if ctx.Err() == context.DeadlineExceeded {
		res.status, res.note = "ERROR", fmt.Sprintf("run timed out after %s; ", e.opts.runTimeout)+res.note
	}
	return res
}

// serverRun: fixture (HTTP variants), proxy, catalogue check, suite; or, for a run of a
// long-lived group, the suite against the group's proxy.
func (e *environment) serverRun(ctx context.Context, r *run, dir, efPath string) *result {
	if r.sharedURL != "" {
		res := &result{}
		args := append([]string{e.suites[r.suite.pkg], "server", "--url", r.sharedURL, "-o", filepath.Join(dir, "results"),
			"--expected-failures", efPath}, e.suiteArgs(r)...)
		res.exitCode, res.suiteErr = e.runSuite(ctx, dir, exec.Command(e.node, args...))
		return res
	}
	url, stop, err := e.startServerTarget(ctx, r, dir)
	if err != nil {
		return &result{status: "ERROR", note: err.Error()}
	}
	defer stop()
	res := &result{}
	// The catalogue check doubles as the wait for every upstream to be ready.
	cat := checkCatalogue(ctx, url, !r.direct, r.suite.revision == "2026-07-28", 60*time.Second)
	res.catalogue = cat
	_ = os.WriteFile(filepath.Join(dir, "catalogue.txt"), []byte(cat.String()+"\n"), 0o644)

	args := append([]string{e.suites[r.suite.pkg], "server", "--url", url, "-o", filepath.Join(dir, "results"),
		"--expected-failures", efPath}, e.suiteArgs(r)...)
	res.exitCode, res.suiteErr = e.runSuite(ctx, dir, exec.Command(e.node, args...))
	return res
}

// startServerTarget starts what the suite of a server-mode run talks to: the fixture
// (HTTP variants) and the proxy in front of it (not for a direct run), with their logs
// in dir. stop ends both.
func (e *environment) startServerTarget(ctx context.Context, r *run, dir string) (url string, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	upstreamURL := ""
	if r.variant != variantStdio {
		stateless := strconv.FormatBool(r.variant == variantStateless)
		fixture, addr, err := startListening(ctx, "everything-server", filepath.Join(dir, "fixture.log"), func(addr string) (*exec.Cmd, error) {
			c := exec.Command(e.fixture, "-http="+addr, "-stateless="+stateless)
			c.Env = e.env()
			return c, nil
		})
		if err != nil {
			return "", stop, err
		}
		stops = append(stops, func() { fixture.stop(5 * time.Second) })
		upstreamURL = "http://" + addr + "/mcp" // the fixture's handler serves every path
	}

	url = upstreamURL
	if !r.direct {
		cfgPath := filepath.Join(dir, "proxy.hcl")
		proxy, addr, err := startListening(ctx, "mcp-proxy", filepath.Join(dir, "proxy.log"), func(addr string) (*exec.Cmd, error) {
			if err := os.WriteFile(cfgPath, []byte(e.serverConfig(addr, upstreamURL)), 0o644); err != nil {
				return nil, err
			}
			c := exec.Command(e.proxy, "run", "--config", cfgPath, "--log-level", e.opts.proxyLogLevel)
			c.Env = e.env()
			return c, nil
		})
		if err != nil {
			stop()
			return "", func() {}, err
		}
		stops = append(stops, func() { proxy.stop(10 * time.Second) })
		url = "http://" + addr + "/mcp"
	}
	return url, stop, nil
}

// clientRun: the suite in a private network namespace, running this program's drive
// command for every scenario.
func (e *environment) clientRun(ctx context.Context, r *run, dir, efPath string) *result {
	if err := e.unshareWorks(); err != nil {
		return &result{status: "SKIP", note: "client mode needs a private network namespace (unshare -n as root): " + err.Error()}
	}
	driveDir := filepath.Join(dir, "drive")
	if err := os.MkdirAll(driveDir, 0o755); err != nil {
		return &result{status: "ERROR", note: err.Error()}
	}
	// The suite runs the command through sh -c and kills sh on its timeout; exec makes
	// the driver that process, so that it gets the signal and stops the proxy.
	command := strings.Join([]string{"exec", e.self, "drive", "--proxy", e.proxy, "--client", e.client,
		"--logdir", driveDir, "--log-level", e.opts.proxyLogLevel}, " ")
	if r.direct {
		command += " --direct"
	}
	args := append([]string{"-n", "sh", "-c", `ip link set lo up && exec "$@"`, "sh",
		e.node, e.suites[r.suite.pkg], "client", "--command", command, "-o", filepath.Join(dir, "results"),
		"--expected-failures", efPath}, e.suiteArgs(r)...)
	res := &result{}
	res.exitCode, res.suiteErr = e.runSuite(ctx, dir, exec.Command("unshare", args...))
	return res
}

// runSuite runs the suite with its output in suite.log and returns its exit code.
func (e *environment) runSuite(ctx context.Context, dir string, cmd *exec.Cmd) (int, error) {
	cmd.Env = e.env()
	cmd.Dir = dir
	p, err := startProc("conformance", cmd, filepath.Join(dir, "suite.log"))
	if err != nil {
		return -1, err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.stop(2 * time.Second)
		return -1, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode(), nil
	}
	if p.err != nil {
		return -1, p.err
	}
	return 0, nil
}

// startListening starts the command build makes for a free loopback address and
// waits until it listens there; it retries with another port when the process exits
// first (another process took the port between our probe and its bind).
func startListening(ctx context.Context, name, logPath string, build func(addr string) (*exec.Cmd, error)) (*proc, string, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		cmd, err := build(addr)
		if err != nil {
			return nil, "", err
		}
		p, err := startProc(name, cmd, logPath)
		if err != nil {
			return nil, "", err
		}
		if err := waitListening(ctx, p, addr, 20*time.Second); err != nil {
			lastErr = err
			p.stop(2 * time.Second)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		return p, addr, nil
	}
	return nil, "", lastErr
}

// serverConfig is the proxy's config for a server-mode run: the fixture unprefixed
// (as a child process when upstreamURL is empty) and npm's server-everything prefixed.
func (e *environment) serverConfig(addr, upstreamURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Generated by conformance/runner for one server-mode run.\n")
	fmt.Fprintf(&b, "listen \"http\" {\n  address = %q\n  path    = \"/mcp\"\n}\n\n", addr)
	// The suite's scenarios list right after initialize and score what they find: the
	// proxy answers once every upstream is up, as a client that cannot follow
	// list_changed would need (the default grace, 1s, is about start-up, not conformance).
	b.WriteString("proxy {\n  ready_grace = \"60s\"\n}\n\n")
	b.WriteString("# The conformance fixture: its names must come out unchanged.\nupstream \"everything\" {\n")
	if upstreamURL == "" {
		fmt.Fprintf(&b, "  command   = [%q]\n", e.fixture)
	} else {
		fmt.Fprintf(&b, "  url       = %q\n", upstreamURL)
	}
	b.WriteString("  namespace = \"\"\n  startup_timeout = \"60s\"\n}\n\n")
	b.WriteString("# A second, prefixed upstream, so that every list is a merge.\nupstream \"npm\" {\n")
	fmt.Fprintf(&b, "  command   = [%q, %q, \"stdio\"]\n", e.node, e.npmEverything)
	b.WriteString("  namespace = \"npm\"\n  startup_timeout = \"60s\"\n}\n")
	return b.String()
}

// unshareWorks reports whether unshare -n can give client mode a private loopback.
func (e *environment) unshareWorks() error {
	e.unshareOnce.Do(func() {
		out, err := exec.Command("unshare", "-n", "sh", "-c", "ip link set lo up").CombinedOutput()
		if err != nil {
			e.unshareErr = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		}
	})
	return e.unshareErr
}

// scoredScenarios is the set of scenarios whose failures count for r: for a
// --requirements run, the revision's scored list (the suite ignores the others when it
// applies a baseline); nil means every scenario counts.
func (e *environment) scoredScenarios(ctx context.Context, r *run) (map[string]bool, error) {
	if r.suite.revision == "" {
		return nil, nil
	}
	key := r.suite.revision + "/" + r.mode
	e.scoredMu.Lock()
	defer e.scoredMu.Unlock()
	if s, ok := e.scored[key]; ok {
		return s, nil
	}
	cmd := exec.CommandContext(ctx, e.node, e.suites[r.suite.pkg], "list", "--requirements", r.suite.revision)
	cmd.Env = e.env()
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("conformance list --requirements %s: %v", r.suite.revision, err)
	}
	// "Server scenarios (...):" / "Client scenarios (...):" headers, "  - name" items, a
	// blank line after each list.
	want := "Server scenarios"
	if r.mode == modeClient {
		want = "Client scenarios"
	}
	set := map[string]bool{}
	in := false
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, want):
			in = true
		case in && strings.HasPrefix(line, "  - "):
			set[strings.TrimSpace(strings.TrimPrefix(line, "  - "))] = true
		case in:
			in = len(set) == 0 // the list has ended
		}
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("conformance list --requirements %s: no %s", r.suite.revision, strings.ToLower(want))
	}
	e.scored[key] = set
	return set, nil
}
