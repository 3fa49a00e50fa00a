package topology

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// haproxyConfig balances HTTP requests round-robin across servers with no stickiness:
// each request goes to the next server, whatever connection or session it belongs to
// (no cookie, no prefer-last-server, no hashing). A server that refuses connections is
// skipped (redispatch), and health checks take a dead one out. Each response says which
// replica served it in X-Served-By, for the tests.
func haproxyConfig(front string, servers []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
  maxconn 4096

defaults
  mode http
  timeout connect 2s
  timeout client 10m
  timeout server 10m
  timeout tunnel 10m
  timeout http-keep-alive 30s
  option redispatch
  retries 2

frontend mcp
  bind %s
  default_backend replicas

backend replicas
  balance roundrobin
  http-response set-header X-Served-By %%[srv_name]
`, front)
	for i, s := range servers {
		fmt.Fprintf(&b, "  server r%d %s check inter 500ms fall 2 rise 1\n", i, s)
	}
	return b.String()
}

// startHAProxy starts haproxy in the foreground (-db) with cfg written into dir.
func startHAProxy(dir, front string, servers []string, tee *os.File) (*Process, error) {
	bin, err := Need("haproxy")
	if err != nil {
		return nil, err
	}
	path, err := writeFile(dir, "haproxy.cfg", haproxyConfig(front, servers))
	if err != nil {
		return nil, err
	}
	check, err := exec.Command(bin, "-c", "-f", path).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("haproxy refuses its configuration: %v\n%s", err, check)
	}
	p, err := start("haproxy", exec.Command(bin, "-db", "-f", path), nil, tee)
	if err != nil {
		return nil, err
	}
	if err := WaitListening(front, 20*time.Second); err != nil {
		p.Stop(time.Second)
		return nil, fmt.Errorf("%v\n%s", err, p.Output)
	}
	return p, nil
}
