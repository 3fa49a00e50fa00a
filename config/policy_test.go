package config

import (
	"strings"
	"testing"
	"time"
)

func TestParsePolicyBlocks(t *testing.T) {
	src := `
proxy {
  principal        = "dev-laptop"
  principal_groups = ["dev"]
}
listen "http" {
  address          = "0.0.0.0:8080"
  insecure_no_auth = true
}
auth {
  resource = "https://mcp.example.com/mcp"
  api_key "alice" {
    sha256 = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"
    groups = ["dev"]
  }
  api_key "ci" {
    token = env("CI_KEY")
  }
  jwt {
    issuer          = "https://idp.example.com"
    jwks_url        = "https://idp.example.com/jwks.json"
    groups_claim    = "roles"
    required_scopes = ["mcp"]
    leeway          = "30s"
  }
}
policy {
  default = "allow"
  rule "read-only-contractors" {
    effect      = "allow"
    groups      = ["contractors"]
    annotations = { readOnlyHint = true }
  }
  rule "no-etc" {
    effect    = "deny"
    tools     = ["fs__*"]
    condition = startswith(args.path, "/etc")
  }
  rate_limit "per-user" {
    rate  = "600/m"
    burst = 20
    per   = ["principal", "tool"]
  }
  rate_limit "ide-per-user" {
    rate      = "60/m"
    endpoints = ["ide", "default"]
    per       = ["endpoint", "principal"]
  }
}
audit {
  file      = "audit.jsonl"
  log       = true
  arguments = "full"
  redact    = ["password"]
}
upstream "fs" {
  command       = ["fs"]
  max_in_flight = 8
}
`
	cfg := mustParse(t, src, fakeEnv(map[string]string{"CI_KEY": "ci-key-0123456789abcdef"}))
	if cfg.Proxy.Principal != "dev-laptop" || len(cfg.Proxy.PrincipalGroups) != 1 {
		t.Errorf("proxy principal: %+v", cfg.Proxy)
	}
	if !cfg.Listen[0].InsecureNoAuth {
		t.Error("insecure_no_auth not read")
	}
	a := cfg.Auth
	if a == nil || len(a.APIKeys) != 2 || a.APIKeys[0].SHA256 != strings.ToLower("9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08") ||
		a.APIKeys[1].Token != "ci-key-0123456789abcdef" || a.JWT == nil || a.JWT.GroupsClaim != "roles" || a.JWT.Leeway != 30*time.Second ||
		a.JWT.PrincipalClaim != "sub" {
		t.Errorf("auth: %+v %+v", a, a.JWT)
	}
	p := cfg.Policy
	if p == nil || !p.DefaultAllow || len(p.Rules) != 2 || !p.Rules[1].Deny || p.Rules[1].Condition == nil ||
		!p.Rules[0].Annotations["readOnlyHint"] || p.Rules[0].Tools != nil || len(p.Rules[1].Tools) != 1 {
		t.Errorf("policy: %+v", p)
	}
	if rl := p.RateLimits[0]; rl.PerSecond != 10 || rl.Burst != 20 || len(rl.Per) != 2 || rl.Endpoints != nil {
		t.Errorf("rate limit: %+v", rl)
	}
	if rl := p.RateLimits[1]; strings.Join(rl.Endpoints, ",") != "ide,default" || strings.Join(rl.Per, ",") != "endpoint,principal" ||
		rl.Ranges["endpoints"].Start.Line != 46 {
		t.Errorf("rate limit by endpoint: %+v", rl)
	}
	if au := cfg.Audit; au == nil || au.File != "/base/audit.jsonl" || !au.Log || au.Arguments != "full" || au.Redact[0] != "password" {
		t.Errorf("audit: %+v", cfg.Audit)
	}
	if cfg.Upstreams[0].MaxInFlight != 8 {
		t.Errorf("max_in_flight: %d", cfg.Upstreams[0].MaxInFlight)
	}
}

func TestPolicyBlockErrors(t *testing.T) {
	const up = "upstream \"a\" { command = [\"a\"] }\n"
	for _, tc := range []struct {
		name, src, want string
	}{
		{"bad hash", "auth {\n  api_key \"x\" {\n    sha256 = \"abc\"\n  }\n}\n" + up, `p.hcl:3:14: error: Invalid sha256`},
		{"no secret", "auth {\n  api_key \"x\" {\n  }\n}\n" + up, `error: Missing api_key secret`},
		{"short token", "auth {\n  api_key \"x\" {\n    token = \"short\"\n  }\n}\n" + up, `p.hcl:3:13: error: Weak api_key token`},
		{"jwt without resource", "auth {\n  jwt {\n    issuer = \"https://i\"\n    jwks_url = \"https://i/j\"\n  }\n}\n" + up, `error: Missing resource`},
		{"empty auth", "auth {\n}\n" + up, `error: Empty auth block`},
		{"bad effect", "policy {\n  rule \"r\" {\n    effect = \"maybe\"\n  }\n}\n" + up, `p.hcl:3:14: error: Invalid effect`},
		{"missing effect", "policy {\n  rule \"r\" {\n  }\n}\n" + up, `error: Missing effect`},
		{"bad default", "policy {\n  default = \"perhaps\"\n}\n" + up, `p.hcl:2:13: error: Invalid default`},
		{"unknown annotation", "policy {\n  rule \"r\" {\n    effect = \"allow\"\n    annotations = { readonly = true }\n  }\n}\n" + up, `error: Unknown annotation`},
		{"bad rate", "policy {\n  rate_limit \"l\" {\n    rate = \"fast\"\n  }\n}\n" + up, `p.hcl:3:12: error: Invalid rate`},
		{"bad per", "policy {\n  rate_limit \"l\" {\n    rate = \"1/s\"\n    per = [\"session\"]\n  }\n}\n" + up, `p.hcl:4:11: error: Invalid per`},
		{"empty tools", "policy {\n  rule \"r\" {\n    effect = \"deny\"\n    tools = []\n  }\n}\n" + up, `p.hcl:4:13: error: Empty pattern list`},
		{"empty principals", "policy {\n  rate_limit \"l\" {\n    rate = \"1/s\"\n    principals = []\n  }\n}\n" + up, `p.hcl:4:18: error: Empty pattern list`},
		{"empty endpoints", "policy {\n  rate_limit \"l\" {\n    rate = \"1/s\"\n    endpoints = []\n  }\n}\n" + up, `p.hcl:4:17: error: Empty pattern list`},
		{"bad audit arguments", "audit {\n  log = true\n  arguments = \"all\"\n}\n" + up, `p.hcl:3:15: error: Invalid arguments`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := mustFail(t, tc.src, fakeEnv(nil))
			if !strings.Contains(out, tc.want) {
				t.Errorf("diagnostics:\n%s\nwant %q", out, tc.want)
			}
		})
	}
	for rate, want := range map[string]float64{"10/s": 10, "600/m": 10, "36/h": 0.01} {
		if got, err := parseRate(rate); err != nil || got != want {
			t.Errorf("parseRate(%q) = %v, %v", rate, got, err)
		}
	}
}

// TestEveryBlockChecked: a mistake that makes a block unusable (a duplicate, an unknown
// kind, conflicting secrets, a null) does not keep the other mistakes in or around it
// from being reported in the same run.
func TestEveryBlockChecked(t *testing.T) {
	src := `upstream "a" {
  command = ["a", null, null]
  env     = { A = null, B = null }
}
listen "htp" {
  address = "nowhere"
}
listen "http" {
  path = "mcp"
}
listen "http" {
  max_body_size = 1
}
auth {
  resource = "https://p/mcp"
  api_key "k" {
    sha256 = "abc"
    token  = "short"
  }
  jwt {
    issuer   = "https://i"
    jwks_url = "https://i/j"
  }
  jwt {
    jwks_url = "https://i/j"
  }
}
auth {
  api_key "k2" {
  }
}
policy {
  rule "r" {
    effect      = "allow"
    annotations = { readOnlyHint = null, zz = true, aa = true }
  }
}
policy {
  rule "s" {
    effect = "maybe"
  }
}
audit {
  log = true
}
audit {
  arguments = "all"
}
`
	got := mustFail(t, src, fakeEnv(nil))
	want := strings.Join([]string{
		`p.hcl:2:13: error: Invalid value; Element 1 of "command" is null; it must be a string.`,
		`p.hcl:2:13: error: Invalid value; Element 2 of "command" is null; it must be a string.`,
		`p.hcl:3:13: error: Invalid value; The value of "A" in "env" is null; it must be a string.`,
		`p.hcl:3:13: error: Invalid value; The value of "B" in "env" is null; it must be a string.`,
		`p.hcl:5:8: error: Invalid listen kind; The only listen kind is "http": listen "http" { address = "127.0.0.1:8080" }.`,
		`p.hcl:6:13: error: Invalid address; "address" must be host:port, such as "127.0.0.1:8080": address nowhere: missing port in address.`,
		`p.hcl:9:10: error: Invalid path; "path" must start with /, got "mcp".`,
		`p.hcl:11:1: error: Duplicate listen block; Only one listen "http" block is supported; the first one is at p.hcl:8:1.`,
		`p.hcl:12:19: error: Invalid max_body_size; "max_body_size" must be at least 1024 bytes, got 1.`,
		`p.hcl:17:14: error: Invalid sha256; "sha256" must be 64 hex digits (` + "`mcp-proxy hash-key`" + ` prints them).`,
		`p.hcl:18:14: error: Weak api_key token; An API key must be at least 16 characters long.`,
		`p.hcl:18:14: error: Conflicting api_key settings; Set sha256 or token, not both.`,
		`p.hcl:24:3: error: Duplicate jwt block; Only one jwt block is allowed; the first one is at p.hcl:20:3.`,
		`p.hcl:24:3: error: Incomplete jwt block; A jwt block needs issuer and jwks_url.`,
		`p.hcl:28:1: error: Duplicate auth block; Only one auth block is allowed; the first one is at p.hcl:14:1.`,
		`p.hcl:29:3: error: Missing api_key secret; api_key "k2" needs sha256 = "…" (from ` + "`mcp-proxy hash-key`" + `) or token = env("…").`,
		`p.hcl:35:19: error: Unknown annotation; "aa" is not a tool annotation; use readOnlyHint, destructiveHint, idempotentHint or openWorldHint.`,
		`p.hcl:35:19: error: Invalid annotation; readOnlyHint = null: an annotation to match must be true or false.`,
		`p.hcl:35:19: error: Unknown annotation; "zz" is not a tool annotation; use readOnlyHint, destructiveHint, idempotentHint or openWorldHint.`,
		`p.hcl:38:1: error: Duplicate policy block; Only one policy block is allowed; the first one is at p.hcl:32:1.`,
		`p.hcl:40:14: error: Invalid effect; "effect" must be "allow" or "deny", got "maybe".`,
		`p.hcl:46:1: error: Duplicate audit block; Only one audit block is allowed; the first one is at p.hcl:43:1.`,
		`p.hcl:46:1: warning: Audit goes nowhere; The audit block has no file and log = false; set file = "audit.jsonl" or log = true.`,
		`p.hcl:47:15: error: Invalid arguments; "arguments" must be "hash", "full" or "none", got "all".`,
	}, "\n") + "\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
