package topology

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// haproxyConfig balances HTTP requests round-robin across servers with no stickiness:
// each request goes to the next server, whatever connection or session it belongs to
// (no cookie, no prefer-last-server, no hashing). A server that refuses connections is
// skipped (redispatch), and health checks take a dead one out. Each response says which
// replica served it in X-Served-By, for the tests. When a replica dies before answering
// a request HAProxy had sent it (502), or none is up (503), or one does not answer in
// time (504), the client gets a JSON-RPC error naming mcp-proxy rather than HAProxy's
// HTML page: the files errorFiles writes into dir.
func haproxyConfig(dir, front string, servers []string) string {
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
%s
frontend mcp
  bind %s
  monitor-uri `+haproxyProbe+`
  default_backend replicas

backend replicas
  balance roundrobin
  http-response set-header X-Served-By %%[srv_name]
`, errorfileLines(dir), front)
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
	for status, body := range errorFiles() {
		if _, err := writeFile(dir, fmt.Sprintf("haproxy-%d.http", status), body); err != nil {
			return nil, err
		}
	}
	path, err := writeFile(dir, "haproxy.cfg", haproxyConfig(dir, front, servers))
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
	// Something listens: make sure it is this HAProxy (its monitor URI answers 200), not
	// a process that took the port first (this one then fails to bind and exits).
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + front + haproxyProbe)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
	}
	if err != nil {
		p.Stop(time.Second)
		return nil, fmt.Errorf("haproxy does not serve %s (another process has the port?): %v\n%s", front, err, p.Output)
	}
	return p, nil
}

// haproxyProbe is the URI HAProxy answers itself (monitor-uri), to tell it from another
// process at its address.
const haproxyProbe = "/.topology-haproxy-probe"

// errorStatuses are the statuses HAProxy answers itself that errorFiles rewrites.
var errorStatuses = []int{502, 503, 504}

// errorFiles are HAProxy's answers (errorfile: a whole HTTP response) for a request no
// replica answered, by status: a JSON-RPC error with id null (HAProxy does not know the
// request's), code -32603 and data.origin "mcp-proxy", as the proxy's own errors.
func errorFiles() map[int]string {
	why := map[int]string{
		502: "the proxy replica that had this request stopped before answering it (if it was a call, it may have run); the session goes on through the other replicas",
		503: "no proxy replica is available; try again",
		504: "the proxy replica that had this request did not answer in time",
	}
	out := map[int]string{}
	for _, status := range errorStatuses {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"mcp-proxy: %s","data":{"origin":"mcp-proxy","status":%d}}}`,
			why[status], status)
		out[status] = fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nCache-Control: no-cache\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
			status, http.StatusText(status), len(body), body)
	}
	return out
}

func errorfileLines(dir string) string {
	var b strings.Builder
	for _, status := range errorStatuses {
		fmt.Fprintf(&b, "  errorfile %d %s\n", status, filepath.Join(dir, fmt.Sprintf("haproxy-%d.http", status)))
	}
	return b.String()
}
