package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// identityAuth has an API key alice, a jwt block and a stdio principal me: the bare name
// alice could be the key or a token's subject.
const identityAuth = `upstream "fs" {
  command = ["fs"]
}
proxy {
  principal = "me"
}
auth {
  resource = "https://mcp.example.com/mcp"
  api_key "alice" {
    sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
  }
  api_key "svc-build" {
    sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
  }
  jwt {
    issuer   = "https://idp.example.com"
    jwks_url = "https://idp.example.com/jwks"
  }
}
`

// TestPrincipalPatternWarnings: validate warns, at the principals list, about a bare
// name that two ways of authenticating could establish (suggesting the identities to
// write), and about an identity no principal of this configuration can have; an
// identity, a bare name only one way establishes and "*" get no warning.
func TestPrincipalPatternWarnings(t *testing.T) {
	for _, tc := range []struct {
		name, auth, pats, want string
	}{
		{"ambiguous name", identityAuth, `"alice"`,
			`p.hcl:23:18: warning: Ambiguous principal; rule "r": principals "alice" matches the API key "alice" and the subject "alice" of tokens from https://idp.example.com: different people, whatever their names. Write "api_key:alice" or "jwt:alice" to say which (list each that is meant).`},
		{"ambiguous glob", identityAuth, `"svc-*"`,
			`p.hcl:23:18: warning: Ambiguous principal; rule "r": principals "svc-*" matches API keys (named "svc-*") and subjects ("svc-*") of tokens from https://idp.example.com: different people, whatever their names. Write "api_key:svc-*" or "jwt:svc-*" to say which (list each that is meant).`},
		{"stdio and jwt", identityAuth, `"me"`,
			`warning: Ambiguous principal; rule "r": principals "me" matches the subject "me" of tokens from https://idp.example.com and the stdio principal (proxy.principal)`},
		{"one way", identityAuth, `"bob"`, ""},
		{"anyone", identityAuth, `"*"`, ""},
		{"qualified", identityAuth, `"api_key:alice", "jwt:alice", "jwt:https://idp.example.com#bob", "stdio:me", "anonymous:anonymous"`, ""},
		{"no such key", identityAuth, `"api_key:bob"`,
			`p.hcl:23:18: warning: Principal matches nothing; rule "r": principals "api_key:bob" names an API key, but there is no api_key "bob".`},
		{"another issuer", identityAuth, `"jwt:https://other.example#bob"`,
			`warning: Principal matches nothing; rule "r": principals "jwt:https://other.example#bob" names a token of issuer "https://other.example", but the jwt block's issuer is "https://idp.example.com" (write "jwt:bob").`},
		{"another stdio user", identityAuth, `"stdio:you"`, `warning: Principal matches nothing; rule "r": principals "stdio:you" names the stdio principal "you", but proxy.principal is "me".`},
		{"no jwt block", "upstream \"fs\" {\n  command = [\"fs\"]\n}\n", `"jwt:alice"`,
			`warning: Principal matches nothing; rule "r": principals "jwt:alice" names a token's subject, but auth has no jwt block.`},
		{"no api keys", "upstream \"fs\" {\n  command = [\"fs\"]\n}\n", `"api_key:*"`,
			`warning: Principal matches nothing; rule "r": principals "api_key:*" names an API key, but there is no api_key block.`},
		{"keys only", "upstream \"fs\" {\n  command = [\"fs\"]\n}\nauth {\n  api_key \"alice\" {\n    sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\n  }\n}\n", `"alice"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.auth + "policy {\n  rule \"r\" {\n    effect     = \"allow\"\n    principals = [" + tc.pats + "]\n  }\n}\n"
			cfg, diags := config.ParseWithOptions([]byte(src), "p.hcl", "/base", withPolicy)
			if cfg == nil {
				t.Fatalf("refused: %s", config.FormatDiagnostics(diags))
			}
			got := config.FormatDiagnostics(diags)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("diagnostics:\n%s\nwant %q", got, tc.want)
			}
		})
	}
}

// TestPrincipalPatternsCanonical: "jwt:NAME" in rules, rate limits and plugins becomes
// the jwt block's issuer's subject; the other patterns stay as written.
func TestPrincipalPatternsCanonical(t *testing.T) {
	src := identityAuth + `policy {
  rule "r" {
    effect     = "allow"
    principals = ["jwt:alice", "api_key:alice", "bob", "jwt:https://idp.example.com#carol"]
  }
  rate_limit "l" {
    rate       = "1/s"
    principals = ["jwt:svc-*"]
  }
}
plugin "p" {
  command    = ["p"]
  principals = ["jwt:alice"]
}
`
	cfg, diags := config.ParseWithOptions([]byte(src), "p.hcl", "/base", withPolicy)
	if cfg == nil {
		t.Fatalf("refused: %s", config.FormatDiagnostics(diags))
	}
	const iss = "jwt:https://idp.example.com#"
	if got, want := cfg.Policy.Rules[0].Principals, []string{iss + "alice", "api_key:alice", "bob", iss + "carol"}; !slices.Equal(got, want) {
		t.Errorf("rule principals = %q, want %q", got, want)
	}
	if got, want := cfg.Policy.RateLimits[0].Principals, []string{iss + "svc-*"}; !slices.Equal(got, want) {
		t.Errorf("rate_limit principals = %q, want %q", got, want)
	}
	if got, want := cfg.Plugins[0].Principals, []string{iss + "alice"}; !slices.Equal(got, want) {
		t.Errorf("plugin principals = %q, want %q", got, want)
	}
	if got, want := cfg.IdentitiesNamed("alice"), []string{"api_key:alice", iss + "alice"}; !slices.Equal(got, want) {
		t.Errorf("IdentitiesNamed(alice) = %q, want %q", got, want)
	}
	if got, want := cfg.IdentitiesNamed("me"), []string{iss + "me", "stdio:me"}; !slices.Equal(got, want) {
		t.Errorf("IdentitiesNamed(me) = %q, want %q", got, want)
	}
}

// TestConditionPrincipalWarnings: a condition comparing principal.name with an
// ambiguous name, or principal.identity with what no identity is, is warned about at
// the string; an unknown attribute of principal is an error.
func TestConditionPrincipalWarnings(t *testing.T) {
	for _, tc := range []struct {
		cond, want string
	}{
		{`principal.name == "alice"`,
			`p.hcl:23:35: warning: Ambiguous principal; rule "r": principal.name "alice" is the name of 2 different principals (api_key:alice, jwt:https://idp.example.com#alice): compare principal.identity with one of them to say which.`},
		{`"alice" != principal.name`, `p.hcl:23:17: warning: Ambiguous principal`},
		{`principal.name == "bob"`, ""},
		{`principal.identity == "jwt:alice"`,
			`p.hcl:23:39: warning: Comparison never true; rule "r": principal.identity of a token spells its issuer out: write "jwt:https://idp.example.com#alice", not "jwt:alice".`},
		{`principal.identity == "alice"`,
			`warning: Comparison never true; rule "r": principal.identity is never a bare name like "alice": an identity says how the principal was established (api_key:alice or jwt:https://idp.example.com#alice); or compare principal.name.`},
		{`principal.identity == "api_key:alice" || principal.via == "jwt"`, ""},
		{`principal.ident == "x"`, `p.hcl:23:17: error: Unknown attribute in condition; principal has name, identity, via, groups; there is no "ident".`},
		{`item.owner == "x"`, `error: Unknown attribute in condition; item has name, upstream, kind; there is no "owner".`},
	} {
		t.Run(tc.cond, func(t *testing.T) {
			src := identityAuth + "policy {\n  rule \"r\" {\n    effect    = \"allow\"\n    condition = " + tc.cond + "\n  }\n}\n"
			_, diags := config.ParseWithOptions([]byte(src), "p.hcl", "/base", withPolicy)
			got := config.FormatDiagnostics(diags)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("diagnostics:\n%s\nwant %q", got, tc.want)
			}
		})
	}
}
