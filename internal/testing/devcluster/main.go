// Command devcluster starts, for a developer, the topology the cluster tests run on:
// redis-server, N replicas of mcp-proxy sharing it, and HAProxy round-robin in front,
// all on loopback, in the foreground until Ctrl-C (make cluster). It is a development
// tool, not shipped.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		stop()
		os.Exit(1)
	}
}

// defaultBase is the replicas' configuration without -config: the test server, and a
// limit of 10 calls a minute per principal to watch being shared.
const defaultBase = `
policy {
  default = "allow"
  rate_limit "per-principal" {
    rate  = "10/m"
    burst = 10
    per   = ["principal"]
  }
}
upstream "t" {
  command = [%q]
}
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("devcluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	proxy := fs.String("proxy", "bin/mcp-proxy", "the mcp-proxy `BINARY` the replicas run")
	testserver := fs.String("testserver", "bin/testserver", "the test server `BINARY` of the default configuration")
	cfgFile := fs.String("config", "", "the replicas' configuration `FILE` without listen and cluster blocks (paths in it absolute); default: the test server with a 10/m limit per principal")
	replicas := fs.Int("replicas", 3, "how many replicas")
	listen := fs.String("listen", "127.0.0.1:8080", "where HAProxy listens (`HOST:PORT`)")
	onFailure := fs.String("on-redis-failure", "local", "the cluster block's on_redis_failure: local or deny")
	logLevel := fs.String("log-level", "info", "the replicas' log `LEVEL`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("takes no arguments (got %q)", fs.Args())
	}
	proxyBin, err := filepath.Abs(*proxy)
	if err != nil {
		return err
	}
	var base string
	if *cfgFile != "" {
		b, err := os.ReadFile(*cfgFile)
		if err != nil {
			return err
		}
		base = string(b)
	} else {
		ts, err := filepath.Abs(*testserver)
		if err != nil {
			return err
		}
		base = fmt.Sprintf(defaultBase, ts)
	}
	dir, err := os.MkdirTemp("", "mcp-proxy-cluster-")
	if err != nil {
		return err
	}
	topo, err := topology.Start(topology.Options{ProxyBin: proxyBin, Replicas: *replicas, Base: base,
		ClusterAttrs: fmt.Sprintf("on_redis_failure = %q", *onFailure), FrontAddr: *listen, Dir: dir, LogDir: dir,
		LogLevel: *logLevel})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "MCP endpoint (HAProxy, round-robin): %s\n", topo.URL())
	for _, r := range topo.Replicas {
		fmt.Fprintf(stdout, "replica %s: http://%s/mcp  (config %s)\n", r.Name, r.Addr, r.Config)
	}
	fmt.Fprintf(stdout, "redis: %s\nlogs: %s/*.log\nCtrl-C stops everything.\n", topo.Redis.URL(), dir)
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping…")
	return errors.Join(topo.Close(), os.RemoveAll(dir))
}
