package topology

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Options describe a topology.
type Options struct {
	// ProxyBin is the mcp-proxy binary the replicas run.
	ProxyBin string
	// Replicas is how many; default 3.
	Replicas int
	// Base is the replicas' configuration without its listen and cluster blocks (the
	// upstreams, auth, policy): each replica gets it with a listen block on its own port
	// (path /mcp) and a cluster block pointing at the topology's Redis.
	Base string
	// ClusterAttrs are more attributes for the cluster block, such as
	// `on_redis_failure = "local"`.
	ClusterAttrs string
	// FrontAddr is where HAProxy listens; "" picks a free loopback port. (A Base with an
	// auth block needs it beforehand, for its resource URL.)
	FrontAddr string
	// Dir holds the configuration files and Redis's working directory.
	Dir string
	// LogDir, when set, gets each process's output in NAME.log too (make cluster).
	LogDir string
	// LogLevel of the replicas; default "info".
	LogLevel string
	// ListenAttrs are more attributes for the replicas' listen block, such as
	// `max_sessions = 2000`.
	ListenAttrs string
	// NoCluster gives the replicas no cluster block: each is a proxy of its own behind
	// HAProxy (Redis runs, unused), a baseline for what the shared state costs.
	NoCluster bool
	// Admin gives each replica an admin listener of its own on a loopback port
	// (Replica.AdminAddr), with AdminAttrs more attributes for its block.
	Admin      bool
	AdminAttrs string
}

// Topology is a started cluster: Redis, the replicas and HAProxy in front.
type Topology struct {
	Redis     *Redis
	Replicas  []*Replica
	HAProxy   *Process
	FrontAddr string
	opts      Options
	files     []*os.File
}

// Replica is one mcp-proxy of the topology.
type Replica struct {
	Name      string // r0, r1, …: HAProxy's server name, as X-Served-By says
	Addr      string
	AdminAddr string // its admin listener, with Options.Admin
	Config    string // path of its configuration file
	*Process
}

// URL is the MCP endpoint through HAProxy.
func (t *Topology) URL() string { return "http://" + t.FrontAddr + "/mcp" }

// Start starts Redis, the replicas (waiting until each listens) and HAProxy. On an
// error everything started so far is stopped.
func Start(opts Options) (_ *Topology, err error) {
	if opts.Replicas <= 0 {
		opts.Replicas = 3
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	if opts.FrontAddr == "" {
		if opts.FrontAddr, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	for _, name := range []string{"redis-server", "haproxy"} {
		if _, err := Need(name); err != nil {
			return nil, err
		}
	}
	t := &Topology{FrontAddr: opts.FrontAddr, opts: opts}
	defer func() {
		if err != nil {
			err = errors.Join(err, t.Close())
		}
	}()
	if t.Redis, err = StartRedis(opts.Dir, t.logFile("redis")); err != nil {
		return nil, err
	}
	var addrs []string
	for i := range opts.Replicas {
		if _, err := t.StartReplica(i); err != nil {
			return nil, err
		}
		addrs = append(addrs, t.Replicas[i].Addr)
	}
	if t.HAProxy, err = startHAProxy(opts.Dir, opts.FrontAddr, addrs, t.logFile("haproxy")); err != nil {
		return nil, err
	}
	return t, nil
}

// StartReplica starts replica i (again, on its address, after a Kill) and waits until it
// listens.
func (t *Topology) StartReplica(i int) (*Replica, error) {
	var r *Replica
	if i < len(t.Replicas) {
		r = t.Replicas[i]
		if r.Process != nil && !r.Exited() {
			return nil, fmt.Errorf("replica %s is running", r.Name)
		}
	} else {
		addr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		r = &Replica{Name: fmt.Sprintf("r%d", i), Addr: addr}
		block := fmt.Sprintf("cluster {\n  redis = %s\n  %s\n}\n", hclQuote(t.Redis.URL()), t.opts.ClusterAttrs)
		if t.opts.NoCluster {
			block = ""
		}
		if t.opts.Admin {
			if r.AdminAddr, err = FreeAddr(); err != nil {
				return nil, err
			}
			block += fmt.Sprintf("admin {\n  address = %s\n  %s\n}\n", hclQuote(r.AdminAddr), t.opts.AdminAttrs)
		}
		cfg := fmt.Sprintf("listen \"http\" {\n  address = %s\n  path    = \"/mcp\"\n  %s\n}\n%s%s",
			hclQuote(addr), t.opts.ListenAttrs, block, t.opts.Base)
		if r.Config, err = writeFile(t.opts.Dir, r.Name+".hcl", cfg); err != nil {
			return nil, err
		}
		t.Replicas = append(t.Replicas, r)
	}
	p, err := start(r.Name, exec.Command(t.opts.ProxyBin, "run", "--config", r.Config, "--log-level", t.opts.LogLevel),
		nil, t.logFile(r.Name))
	if err != nil {
		return nil, err
	}
	r.Process = p
	if err := WaitListening(r.Addr, 60*time.Second); err != nil {
		p.Stop(5 * time.Second)
		return nil, fmt.Errorf("replica %s: %v\n%s", r.Name, err, p.Output)
	}
	return r, nil
}

// logFile opens LogDir/name.log, or returns nil without a LogDir.
func (t *Topology) logFile(name string) *os.File {
	if t.opts.LogDir == "" {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(t.opts.LogDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil
	}
	t.files = append(t.files, f)
	return f
}

// Logs is every process's output so far, each under its name, for a test's failure.
func (t *Topology) Logs() string {
	var b strings.Builder
	for _, r := range t.Replicas {
		if r.Process != nil {
			fmt.Fprintf(&b, "--- %s (%s)\n%s", r.Name, r.Addr, r.Output)
		}
	}
	if t.HAProxy != nil {
		fmt.Fprintf(&b, "--- haproxy\n%s", t.HAProxy.Output)
	}
	if t.Redis != nil {
		fmt.Fprintf(&b, "--- redis\n%s", t.Redis.Output())
	}
	return b.String()
}

// Close stops HAProxy, the replicas (SIGTERM: they drain) and Redis, and returns what
// went wrong. It is safe to call twice.
func (t *Topology) Close() error {
	var errs []error
	if t.HAProxy != nil {
		errs = append(errs, t.HAProxy.Stop(10*time.Second))
	}
	for _, r := range t.Replicas {
		if r.Process != nil {
			errs = append(errs, r.Stop(20*time.Second))
		}
	}
	if t.Redis != nil && t.Redis.proc != nil {
		errs = append(errs, t.Redis.Stop())
	}
	for _, f := range t.files {
		f.Close()
	}
	t.files = nil
	return errors.Join(errs...)
}
