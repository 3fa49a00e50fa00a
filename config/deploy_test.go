package config

import (
	"testing"
)

// TestDeployConfigsLoad: the configurations the container image ships
// (deploy/proxy.hcl, its /etc/mcp-proxy/proxy.hcl) and the Compose example mounts
// (deploy/cluster.hcl) load, with the environment they document.
func TestDeployConfigsLoad(t *testing.T) {
	t.Setenv("MCP_PROXY_REDIS_URL", "redis://redis:6379/0")
	t.Setenv("MCP_PROXY_ADVERTISE", "proxy1:8080")
	t.Setenv("MCP_PROXY_CLUSTER_KEY", "0123456789abcdef0123456789abcdef")
	for _, tc := range []struct {
		path, listen string
		cluster      bool
	}{
		{"../deploy/proxy.hcl", "0.0.0.0:8080", false},
		{"../deploy/cluster.hcl", "0.0.0.0:8080", true},
	} {
		c, diags := Load(tc.path)
		if diags.HasErrors() {
			t.Errorf("%s: %s", tc.path, diags.Error())
			continue
		}
		if len(c.Upstreams) != 1 {
			t.Errorf("%s: %d upstreams, want 1", tc.path, len(c.Upstreams))
		}
		if len(c.Listen) != 1 || c.Listen[0].Address != tc.listen {
			t.Errorf("%s: listen %+v, want %s", tc.path, c.Listen, tc.listen)
		}
		if (c.Cluster != nil) != tc.cluster {
			t.Errorf("%s: cluster %+v, want present=%v", tc.path, c.Cluster, tc.cluster)
		}
		if tc.cluster && (c.Cluster.Advertise != "proxy1:8080" || c.Cluster.Key == "") {
			t.Errorf("%s: cluster %+v", tc.path, c.Cluster)
		}
	}
}
