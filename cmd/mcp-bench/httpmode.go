package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// -mode http: the targets are spoken to over Streamable HTTP.
//
//	direct        the upstream itself serving HTTP (testserver -http)
//	proxy         mcp-proxy's HTTP front end, with the upstream over stdio
//	proxy-httpup  mcp-proxy's HTTP front end, with the upstream over HTTP (-http-upstream)
//	stdio-httpup  mcp-proxy over stdio, with the upstream over HTTP (-stdio-httpup)
//	floor, floor-httpup, floor-stdio-httpup
//	              the floor forwarder of proxy, proxy-httpup and stdio-httpup (-floor)

const (
	targetProxyHTTPUp = "proxy-httpup"
	// targetStdioHTTPUp is mcp-proxy spoken to over stdio, with the upstream over HTTP
	// (the remote-server use).
	targetStdioHTTPUp = "stdio-httpup"
	// The floor forwarders (-floor): the no-logic forwarder of each path.
	targetFloor            = "floor"              // HTTP front end, upstream over its pipes
	targetFloorHTTPUp      = "floor-httpup"       // HTTP front end, upstream over HTTP
	targetFloorStdioHTTPUp = "floor-stdio-httpup" // stdio front end, upstream over HTTP

	mcpPath = "/mcp"
	// proxyMinSessions is the proxy's default cap on HTTP sessions; generated configs
	// raise it when a phase needs more.
	proxyMinSessions = 1000
	// listenAttempts bounds the retries when the free port picked for the proxy was taken
	// before the proxy could bind it.
	listenAttempts = 3
)

// httpServerArgv is the upstream command serving HTTP on a free loopback port, writing
// the bound address to addrFile.
func httpServerArgv(o *options, addrFile string) []string {
	argv := append(slices.Clone(o.upstream), "-http", "127.0.0.1:0", "-http-addr-file", addrFile)
	if o.tls != nil {
		argv = append(argv, "-tls-cert", o.tls.certFile, "-tls-key", o.tls.keyFile)
	}
	return argv
}

// upstreamScheme is how the upstream serving HTTP is reached: https:// with -tls.
func upstreamScheme(o *options) string {
	if o.tls != nil {
		return "https://"
	}
	return "http://"
}

// childEnv is what the proxies and floor forwarders add to their environment: with -tls,
// the run's certificate as their only trusted root (Go reads SSL_CERT_FILE).
func childEnv(o *options) []string {
	if o.tls != nil {
		return []string{"SSL_CERT_FILE=" + o.tls.certFile}
	}
	return nil
}

// freeLoopbackAddr returns a loopback host:port that was free a moment ago
// (topology.FreeAddr: below the kernel's ephemeral range, never the same twice).
func freeLoopbackAddr() (string, error) { return topology.FreeAddr() }

// waitAddrFile waits for a server child to write its address file.
func waitAddrFile(ctx context.Context, path string, c *child) (string, error) {
	deadline := time.Now().Add(startupTimeout)
	for {
		b, err := os.ReadFile(path)
		if err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b)), nil
		}
		if c.exited() {
			return "", fmt.Errorf("%s exited before listening: %v", c.name, c.waitErr)
		}
		if !time.Now().Before(deadline) {
			return "", fmt.Errorf("%s did not write %s within %v", c.name, path, startupTimeout)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return "", err
		}
	}
}

// waitListening waits until addr accepts TCP connections (these probes do not count as
// client connections: they use their own dialer).
func waitListening(ctx context.Context, addr string, c *child) error {
	deadline := time.Now().Add(startupTimeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		if c.exited() {
			return fmt.Errorf("%s exited before listening on %s: %v", c.name, addr, c.waitErr)
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%s is not listening on %s after %v: %w", c.name, addr, startupTimeout, err)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// idleConns is the size of the client's idle-connection pool: enough for every worker.
func idleConns(o *options) int {
	n := 1
	for _, c := range o.concurrency {
		n = max(n, c)
	}
	return n + 16
}

// startDirectHTTP spawns the upstream serving HTTP and opens a first session.
func startDirectHTTP(ctx context.Context, o *options, tmp string, round int, stderr io.Writer) (*target, error) {
	addrFile := filepath.Join(tmp, fmt.Sprintf("direct-%d.addr", round))
	c, err := startServerChild(targetDirect, httpServerArgv(o, addrFile), o.dir, nil, stderr)
	if err != nil {
		return nil, err
	}
	addr, err := waitAddrFile(ctx, addrFile, c)
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	t := &target{name: targetDirect, child: c, http: newHTTPClientTLS(upstreamScheme(o)+addr+mcpPath, idleConns(o), o.tls.pool())}
	if _, err := t.callers(ctx, 1, o.timeout); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	return t, nil
}

// proxyHTTPSpec describes one proxy serving HTTP.
type proxyHTTPSpec struct {
	name        string
	ups         []upstreamBlock
	maxSessions int
	env         []string // added to the proxy's environment
	sample      bool     // sample its memory
}

// startProxyHTTP writes a config with a listen block on a free loopback port, spawns the
// proxy, waits until it listens and opens a first session (which starts its upstreams).
func startProxyHTTP(ctx context.Context, o *options, tmp string, spec proxyHTTPSpec, stderr io.Writer) (*target, error) {
	for attempt := 1; ; attempt++ {
		addr, err := freeLoopbackAddr()
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		cfg := proxyConfigListen(&listenBlock{Address: addr, Path: mcpPath, MaxSessions: spec.maxSessions}, spec.ups)
		path := filepath.Join(tmp, spec.name+".hcl")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			return nil, fmt.Errorf("writing the proxy config: %w", err)
		}
		c, err := startServerChild(spec.name, proxyArgv(o, path), o.dir, spec.env, stderr)
		if err != nil {
			return nil, err
		}
		if err := waitListening(ctx, addr, c); err != nil {
			cerr := c.Close()
			if c.exited() && attempt < listenAttempts && ctx.Err() == nil {
				continue // most likely the port was taken in between: try another
			}
			return nil, errors.Join(err, cerr)
		}
		t := &target{name: spec.name, child: c, http: newHTTPClient("http://"+addr+mcpPath, idleConns(o))}
		if spec.sample {
			t.sampler = startSampler(c.pid(), 50*time.Millisecond)
		}
		if _, err := t.callers(ctx, 1, o.timeout); err != nil {
			return nil, errors.Join(err, t.Close())
		}
		return t, nil
	}
}

// proxyMaxSessions is the max_sessions of the main proxies: a session per worker, and
// never below the proxy's default.
func proxyMaxSessions(o *options) int {
	return max(proxyMinSessions, idleConns(o)+16+o.idleSessions)
}

// startProxyStdioUpstream starts the proxy serving HTTP with the upstream over stdio.
func startProxyStdioUpstream(ctx context.Context, o *options, tmp string, stderr io.Writer) (*target, error) {
	ups := []upstreamBlock{{Label: "bench", Command: o.upstream, Cwd: o.dir, Namespace: ""}}
	return startProxyHTTP(ctx, o, tmp, proxyHTTPSpec{name: targetProxy, ups: ups, maxSessions: proxyMaxSessions(o), sample: true}, stderr)
}

// startProxyHTTPUpstream starts the upstream serving HTTP, then the proxy serving HTTP
// with that upstream as a url upstream.
func startProxyHTTPUpstream(ctx context.Context, o *options, tmp string, round int, stderr io.Writer) (*target, error) {
	addrFile := filepath.Join(tmp, fmt.Sprintf("httpup-%d.addr", round))
	up, err := startServerChild("httpup", httpServerArgv(o, addrFile), o.dir, nil, stderr)
	if err != nil {
		return nil, err
	}
	addr, err := waitAddrFile(ctx, addrFile, up)
	if err != nil {
		return nil, errors.Join(err, up.Close())
	}
	ups := []upstreamBlock{{Label: "bench", URL: upstreamScheme(o) + addr + mcpPath, Namespace: ""}}
	t, err := startProxyHTTP(ctx, o, tmp, proxyHTTPSpec{name: targetProxyHTTPUp, ups: ups, maxSessions: proxyMaxSessions(o), sample: true, env: childEnv(o)}, stderr)
	if err != nil {
		return nil, errors.Join(err, up.Close())
	}
	t.upstream, t.upstreamBase, t.statsHC = up, upstreamScheme(o)+addr, o.tls.statsClient()
	return t, nil
}

// startHTTPTargets starts every target of one -mode http round, each holding
// -idle-sessions idle sessions.
func startHTTPTargets(ctx context.Context, o *options, tmp string, round int, stderr io.Writer) ([]*target, error) {
	ts, err := startHTTPTargetsBare(ctx, o, tmp, round, stderr)
	if err != nil || o.idleSessions == 0 {
		return ts, err
	}
	if _, err := raiseNofile(uint64(len(ts)*o.idleSessions + 512)); err != nil {
		return nil, errors.Join(err, closeTargets(ts))
	}
	for _, t := range ts {
		if t.idle, err = openIdleSessions(ctx, t.http.url, o.idleSessions, o.timeout); err != nil {
			return nil, errors.Join(fmt.Errorf("%s: %w", t.name, err), closeTargets(ts))
		}
	}
	return ts, nil
}

func closeTargets(ts []*target) error {
	var errs []error
	for _, t := range ts {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}

func startHTTPTargetsBare(ctx context.Context, o *options, tmp string, round int, stderr io.Writer) ([]*target, error) {
	var ts []*target
	fail := func(err error) ([]*target, error) {
		for _, t := range ts {
			err = errors.Join(err, t.Close())
		}
		return nil, err
	}
	direct, err := startDirectHTTP(ctx, o, tmp, round, stderr)
	if err != nil {
		return fail(err)
	}
	ts = append(ts, direct)
	proxy, err := startProxyStdioUpstream(ctx, o, tmp, stderr)
	if err != nil {
		return fail(err)
	}
	ts = append(ts, proxy)
	if o.httpUpstream {
		p, err := startProxyHTTPUpstream(ctx, o, tmp, round, stderr)
		if err != nil {
			return fail(err)
		}
		ts = append(ts, p)
	}
	if o.stdioHTTPUp {
		p, err := startStdioHTTPUpstream(ctx, o, tmp, round, targetStdioHTTPUp, stderr)
		if err != nil {
			return fail(err)
		}
		ts = append(ts, p)
	}
	if o.floor {
		f, err := startFloorHTTP(ctx, o, tmp, round, false, stderr)
		if err != nil {
			return fail(err)
		}
		ts = append(ts, f)
		if o.httpUpstream {
			f, err := startFloorHTTP(ctx, o, tmp, round, true, stderr)
			if err != nil {
				return fail(err)
			}
			ts = append(ts, f)
		}
		if o.stdioHTTPUp {
			f, err := startStdioHTTPUpstream(ctx, o, tmp, round, targetFloorStdioHTTPUp, stderr)
			if err != nil {
				return fail(err)
			}
			ts = append(ts, f)
		}
	}
	if o.cluster > 0 {
		for _, n := range []int{1, o.cluster, 0} { // 0: haproxy-1
			c, err := startClusterTarget(ctx, o, filepath.Join(tmp, fmt.Sprintf("round-%d", round)), max(n, 1), n > 0, stderr)
			if err != nil {
				return fail(err)
			}
			ts = append(ts, c)
		}
	}
	return ts, nil
}

// startUpstreamHTTP spawns a copy of the upstream serving HTTP; base is http://ADDR.
func startUpstreamHTTP(ctx context.Context, o *options, tmp, name string, round int, stderr io.Writer) (up *child, base string, err error) {
	addrFile := filepath.Join(tmp, fmt.Sprintf("%s-up-%d.addr", name, round))
	up, err = startServerChild(name+"-upstream", httpServerArgv(o, addrFile), o.dir, nil, stderr)
	if err != nil {
		return nil, "", err
	}
	addr, err := waitAddrFile(ctx, addrFile, up)
	if err != nil {
		return nil, "", errors.Join(err, up.Close())
	}
	return up, upstreamScheme(o) + addr, nil
}

// startStdioHTTPUpstream starts a copy of the upstream serving HTTP, then, spoken to
// over stdin/stdout, the proxy with it as a url upstream (stdio-httpup) or the floor
// forwarder with it (floor-stdio-httpup).
func startStdioHTTPUpstream(ctx context.Context, o *options, tmp string, round int, name string, stderr io.Writer) (*target, error) {
	up, base, err := startUpstreamHTTP(ctx, o, tmp, name, round, stderr)
	if err != nil {
		return nil, err
	}
	var argv []string
	if name == targetFloorStdioHTTPUp {
		argv = []string{o.self, "floor", "-upstream-url", base + mcpPath}
	} else {
		path := filepath.Join(tmp, fmt.Sprintf("%s-%d.hcl", name, round))
		cfg := proxyConfig([]upstreamBlock{{Label: "bench", URL: base + mcpPath, Namespace: ""}})
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			return nil, errors.Join(fmt.Errorf("writing the proxy config: %w", err), up.Close())
		}
		argv = proxyArgv(o, path)
	}
	t, err := startTargetEnv(ctx, name, argv, o.dir, childEnv(o), true, stderr)
	if err != nil {
		return nil, errors.Join(err, up.Close())
	}
	t.upstream, t.upstreamBase, t.statsHC = up, base, o.tls.statsClient()
	return t, nil
}

// startFloorHTTP starts the floor forwarder serving HTTP, in front of the upstream over
// its pipes (floor) or over HTTP (floor-httpup, a copy of the upstream serving HTTP).
func startFloorHTTP(ctx context.Context, o *options, tmp string, round int, httpUp bool, stderr io.Writer) (*target, error) {
	name := targetFloor
	argv := []string{o.self, "floor", "-listen", "127.0.0.1:0", "-addr-file", ""}
	var up *child
	base := ""
	if httpUp {
		name = targetFloorHTTPUp
		var err error
		if up, base, err = startUpstreamHTTP(ctx, o, tmp, name, round, stderr); err != nil {
			return nil, err
		}
	}
	addrFile := filepath.Join(tmp, fmt.Sprintf("%s-%d.addr", name, round))
	argv[5] = addrFile
	if httpUp {
		argv = append(argv, "-upstream-url", base+mcpPath)
	} else {
		argv = append(argv, o.upstream...)
	}
	closeUp := func(err error) (*target, error) {
		if up != nil {
			err = errors.Join(err, up.Close())
		}
		return nil, err
	}
	c, err := startServerChild(name, argv, o.dir, childEnv(o), stderr)
	if err != nil {
		return closeUp(err)
	}
	addr, err := waitAddrFile(ctx, addrFile, c)
	if err != nil {
		return closeUp(errors.Join(err, c.Close()))
	}
	t := &target{name: name, child: c, http: newHTTPClient("http://"+addr+mcpPath, idleConns(o)), upstream: up, upstreamBase: base, statsHC: o.tls.statsClient()}
	t.sampler = startSampler(c.pid(), 50*time.Millisecond)
	if _, err := t.callers(ctx, 1, o.timeout); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	return t, nil
}

// upstreamStats is the part of the test server's GET /stats that mcp-bench reads.
type upstreamStats struct {
	MCPConnections int64 `json:"mcp_connections"`
	ToolCalls      int64 `json:"tool_calls"`
	Posts          int64 `json:"posts"`
	HTTP2Posts     int64 `json:"http2_posts"`
}

// statsClient reads /stats; it is not the measured client, so its connections are not
// counted (and the server counts only connections that carried /mcp requests).
var statsClient = &http.Client{Timeout: 5 * time.Second}

func fetchStats(ctx context.Context, hc *http.Client, base string) (upstreamStats, error) {
	var st upstreamStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/stats", nil)
	if err != nil {
		return st, err
	}
	if hc == nil {
		hc = statsClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return st, fmt.Errorf("reading the upstream's /stats: %w", err)
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("reading the upstream's /stats: HTTP %d (does the upstream support -http?)", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&st); err != nil {
		return st, fmt.Errorf("decoding the upstream's /stats: %w", err)
	}
	return st, nil
}

// connCount measures the TCP connections opened during a phase: by mcp-bench to the
// target, and (proxy-httpup) by the proxy to its upstream. It is nil for stdio targets.
type connCount struct {
	t     *target
	dials int64
	up    upstreamStats
}

func startConnCount(ctx context.Context, t *target) (*connCount, error) {
	if t.http == nil && t.upstreamBase == "" {
		return nil, nil
	}
	c := &connCount{t: t, dials: t.dials()}
	if t.upstreamBase != "" {
		var err error
		if c.up, err = fetchStats(ctx, t.statsHC, t.upstreamBase); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// stop returns the counts since start; calls is the number of measured calls.
func (c *connCount) stop(ctx context.Context, calls int) (*httpPhaseStats, error) {
	if c == nil {
		return nil, nil
	}
	st := &httpPhaseStats{NewConns: c.t.dials() - c.dials}
	if calls > 0 {
		st.NewConnsPerCall = float64(st.NewConns) / float64(calls)
	}
	if c.t.upstreamBase != "" {
		up, err := fetchStats(ctx, c.t.statsHC, c.t.upstreamBase)
		if err != nil {
			return nil, err
		}
		conns, n := up.MCPConnections-c.up.MCPConnections, up.ToolCalls-c.up.ToolCalls
		var pct float64
		if n > 0 {
			pct = 100 * float64(conns) / float64(n)
		}
		st.UpstreamNewConns, st.UpstreamToolCalls, st.UpstreamNewConnPct = &conns, &n, &pct
		if posts := up.Posts - c.up.Posts; posts > 0 {
			h2 := 100 * float64(up.HTTP2Posts-c.up.HTTP2Posts) / float64(posts)
			st.UpstreamHTTP2Pct = &h2
		}
	}
	return st, nil
}
