package config

import (
	"slices"
	"strings"
	"testing"
)

const jwtAuth = `
listen "http" { address = "127.0.0.1:8080" }
auth {
  resource = "https://mcp.example.com/mcp"
  jwt {
    issuer   = "https://idp.example.com"
    jwks_url = "https://idp.example.com/jwks"
  }
}
`

func TestCredentialsBlock(t *testing.T) {
	cfg := mustParse(t, jwtAuth+`
upstream "gh" {
  url = "https://gh.example.com/mcp"
  credentials {
    mode           = "exchange"
    token_endpoint = "https://idp.example.com/token"
    client_id      = "proxy"
    client_secret  = env("S")
    scopes         = ["repo"]
    id_jag {
      issuer    = "https://auth.gh.example.com"
      client_id = "proxy-at-gh"
      private_key_file = "keys/gh.pem"
    }
  }
}
upstream "jira" {
  url          = "https://jira.example.com/mcp"
  max_sessions = 8
  credentials { mode = "oauth" }
}
upstream "db" {
  command = ["db-mcp"]
  env     = { DB_PASSWORD = secret("db_password"), DB_USER = "${secret("db_user")}@prod", MODE = "ro" }
  session = "per-principal"
  credentials {
    mode         = "secret"
    secrets_file = "secrets.json"
  }
}
upstream "plain" {
  command = ["x"]
  session = "per-principal"
}
`, fakeEnv(map[string]string{"S": "s3cret"}))
	gh := cfg.Upstreams[0]
	c := gh.Credentials
	if gh.Session != SessionPerPrincipal || c.Mode != CredentialsExchange || c.ClientAuth != ClientAuthBasic || c.ClientSecret != "s3cret" ||
		c.Resource != "https://gh.example.com/mcp" || c.SubjectTokenType != TokenTypeAccessToken || !slices.Equal(c.Scopes, []string{"repo"}) {
		t.Errorf("exchange: session %q, %+v", gh.Session, c)
	}
	if j := c.IDJAG; j == nil || j.Issuer != "https://auth.gh.example.com" || j.ClientAuth != ClientAuthJWT || j.PrivateKeyFile != "/base/keys/gh.pem" {
		t.Errorf("id_jag %+v", c.IDJAG)
	}
	jira := cfg.Upstreams[1]
	if jira.Session != SessionPerPrincipal || jira.MaxSessions != 8 || jira.Credentials.RedirectURL != "https://mcp.example.com/oauth/callback" {
		t.Errorf("oauth: session %q max %d, %+v", jira.Session, jira.MaxSessions, jira.Credentials)
	}
	db := cfg.Upstreams[2]
	if !slices.Equal(db.Secrets, []string{"db_password", "db_user"}) || db.Credentials.SecretsFile != "/base/secrets.json" {
		t.Errorf("secret: %v %+v", db.Secrets, db.Credentials)
	}
	got, err := ExpandSecrets(db.Env["DB_USER"], func(n string) (string, bool) { return map[string]string{"db_user": "alice"}[n], n == "db_user" })
	if err != nil || got != "alice@prod" {
		t.Errorf("expand: %q %v", got, err)
	}
	if _, err := ExpandSecrets(db.Env["DB_PASSWORD"], func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), `no secret "db_password"`) {
		t.Errorf("missing secret: %v", err)
	}
	if w := WithoutSecrets(db.Env); len(w) != 1 || w["MODE"] != "ro" {
		t.Errorf("without secrets: %v", w)
	}
	if s := ShowSecretRefs(db.Env["DB_USER"]); s != `${secret("db_user")}@prod` {
		t.Errorf("shown: %q", s)
	}
	if p := cfg.Upstreams[3]; p.Session != SessionPerPrincipal || p.Credentials != nil {
		t.Errorf("plain per-principal: %+v", p)
	}
}

func TestCredentialsErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`upstream "a" {
  command = ["x"]
  env = { T = secret("t") }
}`, `p.hcl:3:9: error: Secret without credentials mode "secret"`},
		{`upstream "a" {
  command = [secret("t")]
  credentials { mode = "secret" }
}`, `p.hcl:2:13: error: Secret not allowed here`},
		{`upstream "a" {
  command = ["x"]
  env = { T = upper(secret("t")) }
  credentials { mode = "secret" }
}`, `Invalid secret reference`},
		{`upstream "a" {
  command = ["x"]
  env = { T = secret("no spaces") }
  credentials { mode = "secret" }
}`, `a secret's name is letters`},
		{`upstream "a" {
  command = ["x"]
  session = "shared"
  env = { T = secret("t") }
  credentials { mode = "secret" }
}`, `p.hcl:3:13: error: Session shared between principals`},
		{`upstream "a" {
  command = ["x"]
  credentials { mode = "exchange" }
}`, `Mode needs a url upstream`},
		{`upstream "a" {
  url = "https://a.example/mcp"
  credentials { mode = "exchange" }
}`, `Missing token_endpoint`},
		{`upstream "a" {
  url = "https://a.example/mcp"
  credentials {
    mode = "exchange"
    token_endpoint = "https://idp/token"
    client_id = "c"
  }
}`, `Exchange without tokens`},
		{`upstream "a" {
  url = "https://a.example/mcp"
  credentials { mode = "oauth" }
}`, `OAuth without a listener`},
		{`upstream "a" {
  url = "https://a.example/mcp"
  credentials {
    mode = "secret"
    token_endpoint = "https://x/token"
  }
}`, `p.hcl:5:22: error: Argument does not apply; "token_endpoint" does not apply to credentials mode "secret".`},
		{`upstream "a" {
  url = "https://a.example/mcp"
  credentials {
    mode = "exchange"
    token_endpoint = "https://idp/token"
    client_id = "c"
    client_auth = "private_key_jwt"
  }
}`, `Missing private_key_file`},
		{`upstream "a" {
  url = "https://a.example/mcp"
  credentials { mode = "per-user" }
}`, `Invalid mode`},
		{`upstream "a" {
  url = "https://a.example/mcp"
  credentials {}
}`, `Missing mode`},
		{`upstream "a" {
  url = "https://a.example/mcp"
  credentials {
    mode = "oauth"
    id_jag { issuer = "https://as" }
  }
}`, `Block does not apply`},
		{`upstream "a" {
  command = ["x"]
  env = { T = secret("t") }
  credentials {
    mode = "secret"
    catalogue_principal = "svc"
  }
}`, `p.hcl:6:27: error: Invalid catalogue_principal; "catalogue_principal" names a principal as the secrets are kept, by its identity: "api_key:svc", "jwt:svc" or "stdio:svc", not "svc".`},
		{`auth {
  resource = "https://mcp.example.com/mcp"
  jwt {
    issuer   = "https://idp.example.com/#x"
    jwks_url = "https://idp.example.com/jwks"
  }
}
upstream "a" {
  command = ["x"]
}`, `p.hcl:4:16: error: Invalid issuer; "issuer" must be the issuer's URL, such as "https://idp.example.com", without a fragment, got "https://idp.example.com/#x".`},
	} {
		got := mustFail(t, tc.src, Options{})
		if !strings.Contains(got, tc.want) {
			t.Errorf("for\n%s\ngot\n%s\nwant %q", tc.src, got, tc.want)
		}
	}
}

func TestSecretRefs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{"plain", nil, false},
		{secretOpen + "a" + secretClose, []string{"a"}, false},
		{"x" + secretOpen + "a" + secretClose + "y" + secretOpen + "b" + secretClose + secretOpen + "a" + secretClose, []string{"a", "b"}, false},
		{"\x00", nil, true},
		{secretOpen + "a", nil, true},
		{strings.ToUpper(secretOpen) + "A" + secretClose, nil, true},
	} {
		got, err := SecretRefs(tc.in)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("SecretRefs(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// FuzzSecretRefs: reading and expanding references never panics, and what SecretRefs
// accepts expands with every name it found.
func FuzzSecretRefs(f *testing.F) {
	f.Add("Bearer " + secretOpen + "api" + secretClose)
	f.Add("\x00secret:\x00")
	f.Add("a\x00b")
	f.Fuzz(func(t *testing.T, s string) {
		names, err := SecretRefs(s)
		out, xerr := ExpandSecrets(s, func(n string) (string, bool) { return "<" + n + ">", true })
		if err == nil && xerr != nil {
			t.Fatalf("SecretRefs accepts %q but ExpandSecrets fails: %v", s, xerr)
		}
		if err == nil && strings.IndexByte(out, 0) >= 0 {
			t.Fatalf("expanded %q still holds NUL: %q", s, out)
		}
		for _, n := range names {
			if !ValidSecretName(n) {
				t.Fatalf("invalid name %q from %q", n, s)
			}
		}
	})
}

func TestTokenStore(t *testing.T) {
	cfg := mustParse(t, `
token_store {
  file = "state/tokens.sealed"
  key  = env("K")
}
upstream "a" {
  command = ["x"]
}
`, fakeEnv(map[string]string{"K": "0123456789abcdef0123456789abcdef"}))
	if ts := cfg.TokenStore; ts == nil || ts.File != "/base/state/tokens.sealed" || ts.Key == "" {
		t.Errorf("token_store %+v", cfg.TokenStore)
	}
	if k, _ := cfg.StoreKey(); k != "0123456789abcdef0123456789abcdef" {
		t.Errorf("store key %q", k)
	}
	cfg = mustParse(t, `
cluster {
  redis = "redis://127.0.0.1:6379/0"
  key   = "0123456789abcdef0123456789abcdef-cluster"
}
listen "http" { address = "127.0.0.1:8080" }
upstream "a" {
  command = ["x"]
  env = { T = secret("t") }
  credentials { mode = "secret" }
}
`, Options{})
	if k, _ := cfg.StoreKey(); k != "0123456789abcdef0123456789abcdef-cluster" {
		t.Errorf("a cluster's store key %q", k)
	}
	for _, tc := range []struct{ src, want string }{
		{`token_store { file = "t" }
upstream "a" { command = ["x"] }`, "Missing key"},
		{`token_store { key = "short" }
upstream "a" { command = ["x"] }`, "Invalid key"},
		{`cluster {
  redis = "redis://127.0.0.1:6379/0"
  key   = "0123456789abcdef0123456789abcdef-cluster"
}
listen "http" { address = "127.0.0.1:8080" }
token_store {
  file = "t"
  key  = "0123456789abcdef0123456789abcdef"
}
upstream "a" { command = ["x"] }`, "Token file in a cluster"},
		{`cluster { redis = "redis://127.0.0.1:6379/0" }
listen "http" { address = "127.0.0.1:8080" }
upstream "a" {
  command = ["x"]
  env = { T = secret("t") }
  credentials { mode = "secret" }
}`, "Per-user credentials without a shared key"},
	} {
		if got := mustFail(t, tc.src, Options{}); !strings.Contains(got, tc.want) {
			t.Errorf("for\n%s\ngot\n%s\nwant %q", tc.src, got, tc.want)
		}
	}
}
