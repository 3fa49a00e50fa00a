package topology

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Sentinel is a redis-server in Sentinel mode on a loopback port, monitoring one master
// under a name, with a quorum of 1 and short timeouts (a failover within seconds).
type Sentinel struct {
	Addr string // host:port
	proc *Process
}

// StartSentinel starts a sentinel monitoring the master at masterAddr as name, with its
// configuration file (which a sentinel rewrites) in dir, and waits until it answers
// PING.
func StartSentinel(dir, masterAddr, name string) (*Sentinel, error) {
	bin, err := Need("redis-server")
	if err != nil {
		return nil, err
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	mhost, mport, err := net.SplitHostPort(masterAddr)
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "sentinel-"+port+".conf")
	body := fmt.Sprintf("port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %s 1\n"+
		"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
		port, dir, name, mhost, mport, name, name, name)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		return nil, err
	}
	s := &Sentinel{Addr: addr}
	if s.proc, err = start("redis-sentinel", exec.Command(bin, conf, "--sentinel", "--loglevel", "warning"), nil, nil); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := ping(addr); err == nil {
			return s, nil
		} else if s.proc.Exited() || time.Now().After(deadline) {
			s.proc.Stop(time.Second)
			return nil, fmt.Errorf("redis sentinel at %s does not answer: %v\n%s", addr, err, s.proc.Output)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Output is the sentinel's log so far.
func (s *Sentinel) Output() string { return s.proc.Output.String() }

// Stop stops the sentinel.
func (s *Sentinel) Stop() error { return s.proc.Stop(10 * time.Second) }
