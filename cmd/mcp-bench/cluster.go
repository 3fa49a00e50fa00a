package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// -cluster N (-mode http): two more targets, each the cluster topology of make cluster
// on loopback: redis-server, replicas of mcp-proxy with a cluster block (the upstream over
// stdio in each, and a rate limit per principal that every call takes a token from, high
// enough never to refuse), and HAProxy round-robin without stickiness in front.
//
//	cluster-1  one replica: what HAProxy and the shared state (one Redis round trip per
//	           call for the limit) add to proxy
//	cluster-N  N replicas: the same, with two calls in three (for N = 3) landing on a
//	           replica that does not hold the worker's session and forwarding it there
//	haproxy-1  one replica behind HAProxy without a cluster block (its limit in memory):
//	           cluster-1 against it is the shared-state path alone (Redis, the limit's
//	           round trip, the registry)
//
// Their CPU figure is the replicas', HAProxy's and redis-server's together (not the
// upstreams'), so that what the cluster costs per call can be read against proxy's; the
// replicas' alone is in phaseResult.Cluster, with Redis's work per call read from its
// INFO before and after the measured part.

// clusterLimit is the limit of the cluster targets: taken by every call, never refusing.
const clusterLimit = `
policy {
  default = "allow"
  rate_limit "bench" {
    rate  = "100000000/s"
    burst = 1000000000
    per   = ["principal"]
  }
}
`

func clusterTargetName(n int) string { return "cluster-" + strconv.Itoa(n) }

// targetHAProxy1 is the baseline of the shared-state path: cluster-1 without the cluster.
const targetHAProxy1 = "haproxy-1"

// startClusterTarget starts a topology of n replicas in front of the upstream and opens a
// first session through it; shared false gives the replicas no cluster block
// (haproxy-1).
func startClusterTarget(ctx context.Context, o *options, tmp string, n int, shared bool, stderr io.Writer) (*target, error) {
	name := clusterTargetName(n)
	if !shared {
		name = targetHAProxy1
	}
	dir := filepath.Join(tmp, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ups := []upstreamBlock{{Label: "bench", Command: o.upstream, Cwd: o.dir, Namespace: ""}}
	base := proxyConfig(ups) + clusterLimit
	topo, err := topology.Start(topology.Options{ProxyBin: o.proxyPath, Replicas: n, Base: base, Dir: dir, LogLevel: "warn",
		ListenAttrs: fmt.Sprintf("max_sessions = %d", proxyMaxSessions(o)), NoCluster: !shared})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t := &target{name: name, topo: topo, http: newHTTPClient(topo.URL(), idleConns(o))}
	for _, r := range topo.Replicas {
		t.pids = append(t.pids, r.Cmd.Process.Pid)
		t.replicas = append(t.replicas, r.Cmd.Process.Pid)
	}
	t.pids = append(t.pids, topo.HAProxy.Cmd.Process.Pid, topo.Redis.PID())
	if _, err := t.callers(ctx, 1, o.timeout); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	return t, nil
}

// clusterStats are a cluster target's own figures in one phase.
type clusterStats struct {
	// ReplicasCPUPerCallUS is the replicas' CPU time alone (not HAProxy's, not Redis's).
	ReplicasCPUPerCallUS float64 `json:"replicas_cpu_per_call_us"`
	// RedisCPUPerCallUS is redis-server's (its INFO used_cpu_user + used_cpu_sys).
	RedisCPUPerCallUS float64 `json:"redis_cpu_per_call_us"`
	// RedisCommandsPerCall counts every command Redis ran (INFO total_commands_processed),
	// those a script runs inside included; RedisTripsPerCall only those the replicas
	// sent: each run of the limit script (cmdstat_time counts them: the script alone
	// calls TIME) runs three commands inside for the bench's one limit (TIME, GET, SET),
	// which are not round trips, and the probe's own INFO is not the replicas'.
	RedisCommandsPerCall float64 `json:"redis_commands_per_call"`
	RedisTripsPerCall    float64 `json:"redis_round_trips_per_call"`
	ScriptsPerCall       float64 `json:"redis_scripts_per_call"`
}

// clusterProbe measures a cluster target's own figures over a phase's measured part.
type clusterProbe struct {
	addr   string
	cpu    *cpuMeter
	before redisCounters
}

type redisCounters struct {
	commands, scripts int64
	cpuSec            float64
}

// startClusterProbe starts measuring t (nil, and nothing to stop, unless t is a
// cluster target).
func startClusterProbe(t *target) (*clusterProbe, error) {
	if t.topo == nil {
		return nil, nil
	}
	c, err := readRedisCounters(t.topo.Redis.Addr)
	if err != nil {
		return nil, fmt.Errorf("%s: reading redis INFO: %w", t.name, err)
	}
	return &clusterProbe{addr: t.topo.Redis.Addr, cpu: startCPU(t.replicas), before: c}, nil
}

// stop ends the measurement of calls calls (nil for a nil probe).
func (p *clusterProbe) stop(calls int) (*clusterStats, error) {
	if p == nil {
		return nil, nil
	}
	use, err := p.cpu.stop()
	if err != nil {
		return nil, fmt.Errorf("reading the replicas' CPU time: %w", err)
	}
	after, err := readRedisCounters(p.addr)
	if err != nil {
		return nil, fmt.Errorf("reading redis INFO: %w", err)
	}
	if calls == 0 {
		return &clusterStats{}, nil
	}
	n := float64(calls)
	commands := float64(after.commands - p.before.commands - 1) // the first INFO is counted
	scripts := float64(after.scripts - p.before.scripts)
	return &clusterStats{ReplicasCPUPerCallUS: us(use.target) / n,
		RedisCPUPerCallUS:    (after.cpuSec - p.before.cpuSec) * 1e6 / n,
		RedisCommandsPerCall: commands / n, RedisTripsPerCall: (commands - 3*scripts) / n, ScriptsPerCall: scripts / n}, nil
}

// readRedisCounters reads INFO all of the Redis at addr.
func readRedisCounters(addr string) (redisCounters, error) {
	var c redisCounters
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return c, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("INFO all\r\n")); err != nil {
		return c, err
	}
	br := bufio.NewReader(conn)
	head, err := br.ReadString('\n')
	if err != nil {
		return c, err
	}
	size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if err != nil || !strings.HasPrefix(head, "$") {
		return c, fmt.Errorf("INFO answered %q", strings.TrimSpace(head))
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(br, body); err != nil {
		return c, err
	}
	var user, sys float64
	for _, line := range strings.Split(string(body), "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "total_commands_processed":
			c.commands, _ = strconv.ParseInt(v, 10, 64)
		case "used_cpu_user":
			user, _ = strconv.ParseFloat(v, 64)
		case "used_cpu_sys":
			sys, _ = strconv.ParseFloat(v, 64)
		case "cmdstat_time":
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			c.scripts, _ = strconv.ParseInt(calls, 10, 64)
		}
	}
	c.cpuSec = user + sys
	return c, nil
}

// clusterCost compares, in one phase, cluster-1 with proxy (what HAProxy and the shared
// state add), cluster-1 with haproxy-1 (what the shared state alone adds) and cluster-N
// with cluster-1 (what more replicas change on this machine), from the medians over
// rounds.
type clusterCost struct {
	Kind        string  `json:"kind"`
	Concurrency int     `json:"concurrency"`
	Replicas    int     `json:"replicas"`
	Proxy       figures `json:"proxy"`
	One         figures `json:"cluster_1"`
	Many        figures `json:"cluster_n"`
	Base        figures `json:"haproxy_1"`
	// One against proxy, one against base (the shared-state path), and many against one.
	OneP50AddedUS      float64 `json:"one_p50_added_us"`
	OneCPUAddedUS      float64 `json:"one_cpu_added_us"`
	OneThroughputRatio float64 `json:"one_throughput_ratio"`
	SharedP50AddedUS   float64 `json:"shared_p50_added_us"`
	SharedCPUAddedUS   float64 `json:"shared_cpu_added_us"`
	ManyP50Ratio       float64 `json:"many_p50_ratio"`
	ManyCPURatio       float64 `json:"many_cpu_ratio"`
	ManyThroughput     float64 `json:"many_throughput_ratio"`
	// Medians over rounds of the cluster targets' own figures.
	OneStats, ManyStats clusterStats
}

func summarizeCluster(kind string, conc, n int, proxy, one, many, base *figures, oneStats, manyStats clusterStats) clusterCost {
	return clusterCost{Kind: kind, Concurrency: conc, Replicas: n, Proxy: *proxy, One: *one, Many: *many, Base: *base,
		OneP50AddedUS: one.P50US - proxy.P50US, OneCPUAddedUS: one.CPUPerCallUS - proxy.CPUPerCallUS,
		OneThroughputRatio: ratio(one.CallsPerSec, proxy.CallsPerSec),
		SharedP50AddedUS:   one.P50US - base.P50US, SharedCPUAddedUS: one.CPUPerCallUS - base.CPUPerCallUS,
		ManyP50Ratio: ratio(many.P50US, one.P50US), ManyCPURatio: ratio(many.CPUPerCallUS, one.CPUPerCallUS),
		ManyThroughput: ratio(many.CallsPerSec, one.CallsPerSec), OneStats: oneStats, ManyStats: manyStats}
}

// medianClusterStats is the median, field by field, of the phases' cluster figures.
func medianClusterStats(ps []phaseResult) clusterStats {
	col := func(get func(*clusterStats) float64) float64 {
		var v []float64
		for i := range ps {
			if c := ps[i].Cluster; c != nil {
				v = append(v, get(c))
			}
		}
		if len(v) == 0 {
			return 0
		}
		return median(v)
	}
	return clusterStats{ReplicasCPUPerCallUS: col(func(c *clusterStats) float64 { return c.ReplicasCPUPerCallUS }),
		RedisCPUPerCallUS:    col(func(c *clusterStats) float64 { return c.RedisCPUPerCallUS }),
		RedisCommandsPerCall: col(func(c *clusterStats) float64 { return c.RedisCommandsPerCall }),
		RedisTripsPerCall:    col(func(c *clusterStats) float64 { return c.RedisTripsPerCall }),
		ScriptsPerCall:       col(func(c *clusterStats) float64 { return c.ScriptsPerCall })}
}

// writeClusterCosts writes the summary lines of the cluster targets (tab-separated for
// the summary's tabwriter).
func writeClusterCosts(w io.Writer, costs []clusterCost) {
	for _, c := range costs {
		fmt.Fprintf(w, "  cluster, %s c=%d:\t1 replica vs proxy: p50 %+.1f µs, CPU %+.1f µs/call, throughput %s;  shared state (vs haproxy-1): p50 %+.1f µs, CPU %+.1f µs/call;  %d replicas vs 1: p50 %s, CPU/call %s, throughput %s\n",
			c.Kind, c.Concurrency, c.OneP50AddedUS, c.OneCPUAddedUS, fmtRatio(c.OneThroughputRatio),
			c.SharedP50AddedUS, c.SharedCPUAddedUS,
			c.Replicas, fmtRatio(c.ManyP50Ratio), fmtRatio(c.ManyCPURatio), fmtRatio(c.ManyThroughput))
		for _, x := range []struct {
			name string
			s    clusterStats
		}{{"1 replica", c.OneStats}, {fmt.Sprintf("%d replicas", c.Replicas), c.ManyStats}} {
			fmt.Fprintf(w, "    %s:\treplicas' CPU %.1f µs/call, redis CPU %.1f µs/call, redis round trips %.3f/call (scripts %.3f, commands incl. inside scripts %.3f)\n",
				x.name, x.s.ReplicasCPUPerCallUS, x.s.RedisCPUPerCallUS, x.s.RedisTripsPerCall, x.s.ScriptsPerCall, x.s.RedisCommandsPerCall)
		}
	}
}
