package config_test

import (
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/policy"
)

// withPolicy is how the proxy loads a file: the policy's checks in the same pass.
var withPolicy = config.Options{Check: policy.Check, LookupEnv: func(string) (string, bool) { return "", false }}

// TestPolicyMistakesReportedAtOnce: six mistakes in a policy, found by the file's own
// checks (an empty list, a bad rate) and by the policy's (an unknown upstream, a bad
// pattern, an unknown variable, an unknown function), are all reported by one load,
// each at its line, in file order.
func TestPolicyMistakesReportedAtOnce(t *testing.T) {
	src := `upstream "t" {
  command = ["t"]
}
policy {
  rule "empty" {
    effect = "allow"
    tools  = []
  }
  rule "ghost" {
    effect    = "allow"
    upstreams = ["nope"]
  }
  rule "glob" {
    effect = "allow"
    tools  = ["t__\\"]
  }
  rule "var" {
    effect    = "allow"
    condition = who == "alice"
  }
  rule "fn" {
    effect    = "allow"
    condition = frobnicate(args.x)
  }
  rate_limit "bad" {
    rate = "fast"
  }
}
`
	cfg, diags := config.ParseWithOptions([]byte(src), "p.hcl", "/base", withPolicy)
	if cfg != nil {
		t.Fatalf("a config alongside errors")
	}
	want := strings.Join([]string{
		`p.hcl:7:14: error: Empty pattern list; tools = [] is ambiguous: remove "tools" to match every one, or list the patterns to match.`,
		`p.hcl:11:17: error: Unknown upstream; rule "ghost" names upstream "nope", which is not configured (upstreams: t).`,
		`p.hcl:15:14: error: Invalid pattern; rule "glob": tools: pattern "t__\\" ends with a lone backslash.`,
		`p.hcl:19:17: error: Unknown variable in condition; A condition may use args, principal, item; there is no "who".`,
		`p.hcl:23:17: error: Unknown function in condition; There is no function "frobnicate" in conditions; there are can, contains, endswith, length, lower, regex, startswith, try, under, upper.`,
		`p.hcl:26:12: error: Invalid rate; "rate" must look like "10/s", "600/m" or "1000/h", got "fast"`,
	}, "\n") + "\n"
	if got := config.FormatDiagnostics(diags); got != want {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", got, want)
	}
}

// TestCheckReportsNoFollowOns: what the file's own checks reported is not reported again
// by the policy's: an empty pattern is not also an invalid one, and an upstream block
// with an extra label still names an upstream.
func TestCheckReportsNoFollowOns(t *testing.T) {
	src := `upstream "a" "extra" {
  command = ["a"]
}
upstream "b" {
  command = ["b"]
}
policy {
  rule "r" {
    effect    = "allow"
    upstreams = ["a"]
    tools     = ["", "ok"]
  }
}
`
	_, diags := config.ParseWithOptions([]byte(src), "p.hcl", "/base", withPolicy)
	want := "p.hcl:1:14: error: Extraneous label for upstream; Only 1 labels (name) are expected for upstream blocks.\n" +
		"p.hcl:11:17: error: Invalid pattern; \"tools\" must not hold an empty pattern.\n"
	if got := config.FormatDiagnostics(diags); got != want {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", got, want)
	}
}

// TestCheckRunsOnValidFiles: a file without problems of its own still gets the policy's
// checks, and a clean one loads.
func TestCheckRunsOnValidFiles(t *testing.T) {
	bad := "upstream \"a\" {\n  command = [\"a\"]\n}\npolicy {\n  rule \"r\" {\n    effect    = \"deny\"\n    upstreams = [\"b\"]\n  }\n}\n"
	if cfg, diags := config.ParseWithOptions([]byte(bad), "p.hcl", "/base", withPolicy); cfg != nil ||
		!strings.HasPrefix(config.FormatDiagnostics(diags), "p.hcl:7:17: error: Unknown upstream") {
		t.Errorf("unknown upstream in an otherwise valid file: %v %q", cfg, config.FormatDiagnostics(diags))
	}
	good := strings.Replace(bad, `["b"]`, `["a"]`, 1)
	if cfg, diags := config.ParseWithOptions([]byte(good), "p.hcl", "/base", withPolicy); cfg == nil || len(diags) > 0 {
		t.Errorf("valid file: %q", config.FormatDiagnostics(diags))
	}
}
