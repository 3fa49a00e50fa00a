package topology

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Redis is a redis-server on a loopback port, without persistence.
type Redis struct {
	Addr string // host:port
	dir  string
	tee  *os.File
	proc *Process
}

// URL is the redis:// URL of database 0.
func (r *Redis) URL() string { return "redis://" + r.Addr + "/0" }

// Output is the server's log so far (of its current run).
func (r *Redis) Output() string {
	if r.proc == nil {
		return ""
	}
	return r.proc.Output.String()
}

// StartRedis starts redis-server on a free loopback port with its working files in dir,
// and waits until it answers PING. tee, when not nil, gets a copy of its log.
func StartRedis(dir string, tee *os.File) (*Redis, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	r := &Redis{Addr: addr, dir: dir, tee: tee}
	return r, r.Start()
}

// Start starts the server (again) on its address; it has no data then.
func (r *Redis) Start() error {
	bin, err := Need("redis-server")
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(r.Addr)
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", r.dir, "--protected-mode", "yes", "--loglevel", "warning")
	if r.proc, err = start("redis-server", cmd, nil, r.tee); err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := ping(r.Addr); err == nil {
			return nil
		} else if r.proc.Exited() || time.Now().After(deadline) {
			r.proc.Stop(time.Second)
			return fmt.Errorf("redis-server at %s does not answer: %v\n%s", r.Addr, err, r.proc.Output)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PID is the server's process id (0 when it is not running).
func (r *Redis) PID() int {
	if r.proc == nil || r.proc.Exited() {
		return 0
	}
	return r.proc.Cmd.Process.Pid
}

// Stop stops the server (SIGTERM; with no persistence its data is gone).
func (r *Redis) Stop() error { return r.proc.Stop(10 * time.Second) }

// Command sends one command (words without spaces) with the inline protocol and returns
// the first line of the answer; for tests (FLUSHALL, DBSIZE).
func (r *Redis) Command(words ...string) (string, error) {
	c, err := net.DialTimeout("tcp", r.Addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\r\n", strings.Join(words, " ")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}
