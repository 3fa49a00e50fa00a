package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/mcp-proxy/mcp-proxy/internal/topology"
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
//
// Their CPU figure is the replicas', HAProxy's and redis-server's together (not the
// upstreams'), so that what the cluster costs per call can be read against proxy's.

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

// startClusterTarget starts a topology of n replicas in front of the upstream and opens a
// first session through it.
func startClusterTarget(ctx context.Context, o *options, tmp string, n int, stderr io.Writer) (*target, error) {
	name := clusterTargetName(n)
	dir := filepath.Join(tmp, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ups := []upstreamBlock{{Label: "bench", Command: o.upstream, Cwd: o.dir, Namespace: ""}}
	base := proxyConfig(ups) + clusterLimit
	topo, err := topology.Start(topology.Options{ProxyBin: o.proxyPath, Replicas: n, Base: base, Dir: dir, LogLevel: "warn",
		ListenAttrs: fmt.Sprintf("max_sessions = %d", proxyMaxSessions(o))})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t := &target{name: name, topo: topo, http: newHTTPClient(topo.URL(), idleConns(o))}
	for _, r := range topo.Replicas {
		t.pids = append(t.pids, r.Cmd.Process.Pid)
	}
	t.pids = append(t.pids, topo.HAProxy.Cmd.Process.Pid, topo.Redis.PID())
	if _, err := t.callers(ctx, 1, o.timeout); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	return t, nil
}

// clusterCost compares, in one phase, cluster-1 with proxy (what HAProxy and the shared
// state add) and cluster-N with cluster-1 (what more replicas change on this machine),
// from the medians over rounds.
type clusterCost struct {
	Kind        string  `json:"kind"`
	Concurrency int     `json:"concurrency"`
	Replicas    int     `json:"replicas"`
	Proxy       figures `json:"proxy"`
	One         figures `json:"cluster_1"`
	Many        figures `json:"cluster_n"`
	// One against proxy, and many against one.
	OneP50AddedUS      float64 `json:"one_p50_added_us"`
	OneCPUAddedUS      float64 `json:"one_cpu_added_us"`
	OneThroughputRatio float64 `json:"one_throughput_ratio"`
	ManyP50Ratio       float64 `json:"many_p50_ratio"`
	ManyCPURatio       float64 `json:"many_cpu_ratio"`
	ManyThroughput     float64 `json:"many_throughput_ratio"`
}

func summarizeCluster(kind string, conc, n int, proxy, one, many *figures) clusterCost {
	return clusterCost{Kind: kind, Concurrency: conc, Replicas: n, Proxy: *proxy, One: *one, Many: *many,
		OneP50AddedUS: one.P50US - proxy.P50US, OneCPUAddedUS: one.CPUPerCallUS - proxy.CPUPerCallUS,
		OneThroughputRatio: ratio(one.CallsPerSec, proxy.CallsPerSec),
		ManyP50Ratio:       ratio(many.P50US, one.P50US), ManyCPURatio: ratio(many.CPUPerCallUS, one.CPUPerCallUS),
		ManyThroughput: ratio(many.CallsPerSec, one.CallsPerSec)}
}

// writeClusterCosts writes the summary lines of the cluster targets (tab-separated for
// the summary's tabwriter).
func writeClusterCosts(w io.Writer, costs []clusterCost) {
	for _, c := range costs {
		fmt.Fprintf(w, "  cluster, %s c=%d:\t1 replica vs proxy: p50 %+.1f µs, CPU %+.1f µs/call, throughput %s;  %d replicas vs 1: p50 %s, CPU/call %s, throughput %s\n",
			c.Kind, c.Concurrency, c.OneP50AddedUS, c.OneCPUAddedUS, fmtRatio(c.OneThroughputRatio),
			c.Replicas, fmtRatio(c.ManyP50Ratio), fmtRatio(c.ManyCPURatio), fmtRatio(c.ManyThroughput))
	}
}
