package config

import (
	"slices"
	"strings"
	"testing"
)

func TestSandboxBlock(t *testing.T) {
	cfg := mustParse(t, `
upstream "fs" {
  command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]
  sandbox {
    read    = ["/srv/docs", "data"]
    write   = ["/srv/out"]
    network = "loopback"
  }
}
upstream "web" {
  command = ["fetcher"]
  sandbox {
    network = ["*:443", "*:80"]
  }
}
upstream "default" {
  command = ["x"]
  sandbox {}
}
upstream "free" {
  command = ["y"]
}
`, Options{})
	s := cfg.Upstreams[0].Sandbox
	if s == nil || !slices.Equal(s.Read, []string{"/srv/docs", "/base/data"}) || !slices.Equal(s.Write, []string{"/srv/out"}) ||
		s.Network != SandboxNetworkLoopback || s.Ports != nil {
		t.Errorf("fs sandbox %+v", s)
	}
	if s := cfg.Upstreams[1].Sandbox; s == nil || s.Network != SandboxNetworkPorts || !slices.Equal(s.Ports, []uint16{443, 80}) {
		t.Errorf("web sandbox %+v", s)
	}
	if s := cfg.Upstreams[2].Sandbox; s == nil || s.Network != SandboxNetworkNone || s.Read != nil || s.Write != nil {
		t.Errorf("empty sandbox block %+v", s)
	}
	if cfg.Upstreams[3].Sandbox != nil {
		t.Errorf("no block: %+v", cfg.Upstreams[3].Sandbox)
	}
}

func TestSandboxBlockErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`upstream "a" {
  url = "https://x.example/mcp"
  sandbox {}
}`, `p.hcl:3:3: error: Unexpected block; A "sandbox" block applies to upstreams with a "command"`},
		{`upstream "a" {
  command = ["x"]
  sandbox {
    network = ["api.example.com:443"]
  }
}`, `p.hcl:4:15: error: Invalid sandbox network; "api.example.com:443" names the host "api.example.com", which cannot be enforced: Landlock restricts TCP by port only`},
		{`upstream "a" {
  command = ["x"]
  sandbox { network = "lan" }
}`, `p.hcl:3:23: error: Invalid sandbox network; "network" must be "none", "loopback", "any" or a list of "*:port", got "lan".`},
		{`upstream "a" {
  command = ["x"]
  sandbox { network = ["*:http"] }
}`, `the port must be a number from 1 to 65535`},
		{`upstream "a" {
  command = ["x"]
  sandbox { network = [] }
}`, `An empty list allows no port`},
		{`upstream "a" {
  command = ["x"]
  sandbox { read = "/srv" }
}`, `p.hcl:3:20: error: Invalid value; "read" must be a list of strings, not a string.`},
		{`upstream "a" {
  command = ["x"]
  sandbox {}
  sandbox {}
}`, `p.hcl:4:3: error: Duplicate sandbox block`},
		{`upstream "a" {
  command = ["x"]
  sandbox { exec = ["/opt"] }
}`, `Unsupported argument`},
	} {
		got := mustFail(t, tc.src, Options{})
		if !strings.Contains(got, tc.want) {
			t.Errorf("for\n%s\ngot\n%s\nwant %q", tc.src, got, tc.want)
		}
	}
}
