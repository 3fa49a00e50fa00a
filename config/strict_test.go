package config

import (
	"strings"
	"testing"
	"time"
)

// TestStrictTypes: a value of another type than its setting takes is an error, in every
// block, element by element, each at its own position and all in one run; gohcl and cty
// alone would have converted every one of them.
func TestStrictTypes(t *testing.T) {
	src := `proxy {
  name      = true
  page_size = "50"
}
upstream "a" {
  command   = ["npx", 42, false]
  namespace = 42
  env       = { A = 1, B = "b", C = true }
  disabled  = "false"
  timeout   = 60
  cwd       = ["dir"]
}
upstream "b" {
  url     = "https://b.example/mcp"
  headers = ["X-Key"]
  oauth {
    redirect_port = "8765"
    open_browser  = "yes"
    scopes        = "read"
  }
}
listen "http" {
  address          = 8080
  max_sessions     = "10"
  insecure_no_auth = 1
}
auth {
  resource = "https://p/mcp"
  api_key "k" {
    token  = "0123456789abcdef"
    groups = "dev"
  }
}
policy {
  default = true
  rule "r" {
    effect      = "allow"
    tools       = ["a__x", 1.5]
    annotations = { readOnlyHint = "true" }
  }
  rate_limit "l" {
    rate  = 10
    burst = "5"
  }
}
audit {
  log    = "true"
  redact = { a = "b" }
}
`
	got := mustFail(t, src, fakeEnv(nil))
	want := strings.Join([]string{
		`p.hcl:2:15: error: Invalid value; "name" must be a string, not true or false; if the text is meant, quote it: "true".`,
		`p.hcl:3:15: error: Invalid value; "page_size" must be a number, not a string; write the number without quotes.`,
		`p.hcl:6:23: error: Invalid value; Element 1 of "command" must be a string, not a number; if the text is meant, quote it: "42".`,
		`p.hcl:6:27: error: Invalid value; Element 2 of "command" must be a string, not true or false; if the text is meant, quote it: "false".`,
		`p.hcl:7:15: error: Invalid value; "namespace" must be a string, not a number; if the text is meant, quote it: "42".`,
		`p.hcl:8:21: error: Invalid value; The value of "A" in "env" must be a string, not a number; if the text is meant, quote it: "1".`,
		`p.hcl:8:37: error: Invalid value; The value of "C" in "env" must be a string, not true or false; if the text is meant, quote it: "true".`,
		`p.hcl:9:15: error: Invalid value; "disabled" must be true or false, not a string; write true or false without quotes.`,
		`p.hcl:10:15: error: Invalid duration; "timeout" must be a duration string, not a number; use a duration string such as "60s", "1m30s" or "500ms".`,
		`p.hcl:11:15: error: Invalid value; "cwd" must be a string, not a list.`,
		`p.hcl:15:13: error: Invalid value; "headers" must be a map of strings, not a list.`,
		`p.hcl:17:21: error: Invalid value; "redirect_port" must be a number, not a string; write the number without quotes.`,
		`p.hcl:18:21: error: Invalid value; "open_browser" must be true or false, not a string; write true or false without quotes.`,
		`p.hcl:19:21: error: Invalid value; "scopes" must be a list of strings, not a string.`,
		`p.hcl:23:22: error: Invalid value; "address" must be a string, not a number; if the text is meant, quote it: "8080".`,
		`p.hcl:24:22: error: Invalid value; "max_sessions" must be a number, not a string; write the number without quotes.`,
		`p.hcl:25:22: error: Invalid value; "insecure_no_auth" must be true or false, not a number.`,
		`p.hcl:31:14: error: Invalid value; "groups" must be a list of strings, not a string.`,
		`p.hcl:35:13: error: Invalid value; "default" must be a string, not true or false; if the text is meant, quote it: "true".`,
		`p.hcl:38:28: error: Invalid value; Element 1 of "tools" must be a string, not a number; if the text is meant, quote it: "1.5".`,
		`p.hcl:39:36: error: Invalid value; The value of "readOnlyHint" in "annotations" must be true or false, not a string; write true or false without quotes.`,
		`p.hcl:42:13: error: Invalid value; "rate" must be a string, not a number; if the text is meant, quote it: "10".`,
		`p.hcl:43:13: error: Invalid value; "burst" must be a number, not a string; write the number without quotes.`,
		`p.hcl:47:12: error: Invalid value; "log" must be true or false, not a string; write true or false without quotes.`,
		`p.hcl:48:12: error: Invalid value; "redact" must be a list of strings, not a map.`,
	}, "\n") + "\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestStrictTypesComputedStrings: env() and the other functions return strings, so a
// string computed where a number or true/false is expected is converted when it reads as
// one, and reported when it does not; strings computed for strings are simply strings.
func TestStrictTypesComputedStrings(t *testing.T) {
	env := fakeEnv(map[string]string{"N": "8", "OFF": "true", "NS": "42", "BAD": "many"})
	cfg := mustParse(t, `proxy {
  page_size = env("N")
}
upstream "a" {
  command       = ["a", "${env("N")}"]
  namespace     = env("NS")
  disabled      = env("OFF")
  max_in_flight = "${env("N")}"
  timeout       = format("%ss", env("N"))
  env           = { N = env("N") }
}
`, env)
	u := cfg.Upstreams[0]
	if cfg.Proxy.PageSize != 8 || u.Namespace != "42" || !u.Disabled || u.MaxInFlight != 8 || u.Timeout != 8*time.Second ||
		u.Command[1] != "8" || u.Env["N"] != "8" {
		t.Errorf("got proxy %+v, upstream %+v", cfg.Proxy, u)
	}

	got := mustFail(t, "upstream \"a\" {\n  command = [\"a\"]\n  max_in_flight = env(\"BAD\")\n}\n", env)
	if want := `p.hcl:3:19: error: Invalid value; "max_in_flight" must be a whole number:`; !strings.HasPrefix(got, want) {
		t.Errorf("got:\n%s\nwant it to start with %s", got, want)
	}
}
