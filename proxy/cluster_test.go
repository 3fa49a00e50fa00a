package proxy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/auth"
	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
	"github.com/mcp-proxy/mcp-proxy/proxy"
)

// TestClusterReplicas embeds two replicas of a cluster (Redis, a shared key, an auth
// block), each with the in-process upstream: a legacy session begun at one is served
// through the other, which forwards its requests, credentials included, to the replica
// that holds it.
func TestClusterReplicas(t *testing.T) {
	redis, err := topology.StartRedis(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer redis.Stop()
	const token = "cluster-token-0123456789abcdef"
	t.Setenv("TEST_CLUSTER_KEY", strings.Repeat("k", 40))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var urls []string
	var dones []chan error
	for i := range 2 {
		addr, err := topology.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "proxy.hcl")
		writeFile(t, path, fmt.Sprintf(`listen "http" {
  address = %q
  path    = "/mcp"
}
auth {
  api_key "ops" {
    sha256 = %q
  }
}
cluster {
  redis = %q
  key   = env("TEST_CLUSTER_KEY")
}
policy {
  default = "allow"
  rate_limit "calls" {
    rate  = "1000/s"
    burst = 1000
  }
}
upstream "spare" {
  command  = ["/bin/true"]
  disabled = true
}
`, addr, auth.HashToken(token), redis.URL()))
		cfg, err := proxy.Load(path, os.Stderr)
		if err != nil {
			t.Fatal(err)
		}
		logs := newLogLines()
		p, err := proxy.New(ctx, cfg, proxy.WithLogger(logs.logger()), proxy.WithUpstream("greeter", dialGreeter))
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		done := make(chan error, 1)
		go func() { done <- p.ListenAndServe(ctx) }()
		logs.waitFor(t, 0, "mcp-proxy serving on HTTP", nil)
		urls, dones = append(urls, "http://"+addr+"/mcp"), append(dones, done)
	}

	c := &mcpClient{t: t, url: urls[0], token: token}
	if code, m := c.post(initialize); code != 200 || m["result"] == nil {
		t.Fatalf("initialize at the first replica: %d %s", code, m["error"])
	}
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.url = urls[1] // the same session, through the other replica
	if _, m := c.post(greetCall(2, "Ada")); !strings.Contains(string(m["result"]), "Hello, Ada!") {
		t.Fatalf("tools/call through the other replica: %s %s", m["result"], m["error"])
	}

	cancel()
	for i, done := range dones {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
		case <-time.After(wait):
			t.Fatalf("replica %d did not stop", i)
		}
	}
}
