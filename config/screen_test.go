package config

import (
	"slices"
	"strings"
	"testing"
)

func TestScreenAllow(t *testing.T) {
	cfg, diags := Parse([]byte(`proxy {
  screen       = "withhold"
  screen_allow = ["long-description"]
}

upstream "ssh" {
  command      = ["ssh-mcp"]
  screen_allow = ["credential-file"]
  tool "ssh_exec" {
    screen_allow = ["model-directive", "cross-reference"]
  }
  prompt "connect" {
    screen_allow = ["zero-width"]
  }
}

upstream "plain" {
  command = ["plain"]
  screen  = "flag"
}
`), "p.hcl", "/base")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if len(diags) != 0 {
		t.Errorf("warnings: %s", FormatDiagnostics(diags)) // a block with screen_allow alone changes something
	}
	ssh, plain := cfg.Upstreams[0], cfg.Upstreams[1]
	switch {
	case !slices.Equal(cfg.Proxy.ScreenAllow, []string{"long-description"}),
		!slices.Equal(ssh.ScreenAllow, []string{"credential-file"}),
		len(ssh.Tools.Overrides) != 1 || !slices.Equal(ssh.Tools.Overrides[0].ScreenAllow, []string{"model-directive", "cross-reference"}),
		len(ssh.Prompts.Overrides) != 1 || !slices.Equal(ssh.Prompts.Overrides[0].ScreenAllow, []string{"zero-width"}),
		plain.ScreenAllow != nil:
		t.Fatalf("proxy %v, ssh %v %+v %+v, plain %v", cfg.Proxy.ScreenAllow, ssh.ScreenAllow, ssh.Tools.Overrides, ssh.Prompts.Overrides, plain.ScreenAllow)
	}
}

func TestScreenAllowErrors(t *testing.T) {
	got := mustFail(t, `proxy {
  screen_allow = ["credential-files"]
}

upstream "ssh" {
  command      = ["ssh-mcp"]
  screen_allow = ["zero-width", "tags", "zero-width"]
  tool "x" {
    screen_allow = "model-directive"
  }
}
`, Options{})
	want := strings.Join([]string{
		`p.hcl:2:19: error: Unknown check; screen_allow names the screening checks whose findings are accepted; "credential-files" is not one. Did you mean "credential-file"? The checks are unicode-tags, bidi-control, zero-width, instruction-markup, model-directive, credential-file, cross-reference, long-description.`,
		`p.hcl:7:33: error: Unknown check; screen_allow names the screening checks whose findings are accepted; "tags" is not one. The checks are unicode-tags, bidi-control, zero-width, instruction-markup, model-directive, credential-file, cross-reference, long-description.`,
		`p.hcl:7:41: error: Duplicate check; "zero-width" is listed twice in screen_allow.`,
		`p.hcl:9:20: error: Invalid value; "screen_allow" must be a list of strings`,
	}, "\n")
	if !strings.HasPrefix(got, want) {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", got, want)
	}
}
