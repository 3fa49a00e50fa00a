package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOAuthBlock(t *testing.T) {
	cfg := mustParse(t, `
upstream "remote" {
  url = "https://mcp.example.com/mcp"
  oauth {
    client_id             = "proxy"
    client_secret         = env("SECRET")
    issuer                = "https://auth.example.com"
    client_metadata_url   = "https://proxy.example.com/client.json"
    scopes                = ["mcp:read", "mcp:write"]
    redirect_port         = 8765
    grant                 = "client_credentials"
    authorization_timeout = "2m"
    token_file            = "state/remote.json"
    open_browser          = false
  }
}
upstream "plain" {
  url = "https://other.example.com/mcp"
  oauth {}
}
upstream "none" {
  url = "https://third.example.com/mcp"
}
`, fakeEnv(map[string]string{"SECRET": "s3cret"}))
	o := cfg.Upstreams[0].OAuth
	if o == nil || o.ClientID != "proxy" || o.ClientSecret != "s3cret" || o.Issuer != "https://auth.example.com" ||
		o.ClientMetadataURL != "https://proxy.example.com/client.json" || !slices.Equal(o.Scopes, []string{"mcp:read", "mcp:write"}) ||
		o.RedirectPort != 8765 || o.Grant != GrantClientCredentials || o.AuthorizationTimeout != 2*time.Minute ||
		o.TokenFile != "/base/state/remote.json" || o.OpenBrowser {
		t.Errorf("oauth %+v", o)
	}
	if o := cfg.Upstreams[1].OAuth; o == nil || o.Grant != GrantAuthorizationCode || o.AuthorizationTimeout != DefaultAuthorizationTimeout || o.Scopes != nil ||
		o.TokenFile != "" || !o.OpenBrowser {
		t.Errorf("empty oauth block %+v", o)
	}
	if cfg.Upstreams[2].OAuth != nil {
		t.Errorf("no block: %+v", cfg.Upstreams[2].OAuth)
	}
}

func TestOAuthBlockErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`upstream "a" {
  command = ["x"]
  oauth {}
}`, `p.hcl:3:3: error: Unexpected block; An "oauth" block applies to upstreams with a "url".`},
		{`upstream "a" {
  url = "https://x.example/mcp"
  oauth { grant = "password" }
}`, `p.hcl:3:19: error: Invalid grant`},
		{`upstream "a" {
  url = "https://x.example/mcp"
  oauth { client_metadata_url = "http://x.example/c.json" }
}`, `p.hcl:3:33: error: Invalid client_metadata_url`},
		{`upstream "a" {
  url = "https://x.example/mcp"
  oauth { redirect_port = 70000 }
}`, `p.hcl:3:27: error: Invalid redirect_port`},
		{`upstream "a" {
  url = "https://x.example/mcp"
  oauth { client_secret = "s" }
}`, `Missing client_id`},
		{`upstream "a" {
  url = "https://x.example/mcp"
  oauth { grant = "client_credentials" }
}`, `Missing client_id`},
		{`upstream "a" {
  url = "https://x.example/mcp"
  oauth {}
  oauth {}
}`, `p.hcl:4:3: error: Duplicate oauth block`},
		{`upstream "a" {
  url = "https://x.example/mcp"
  oauth { client = "x" }
}`, `Unsupported argument`},
	} {
		got := mustFail(t, tc.src, Options{})
		if !strings.Contains(got, tc.want) {
			t.Errorf("for\n%s\ngot\n%s\nwant %q", tc.src, got, tc.want)
		}
	}
}
