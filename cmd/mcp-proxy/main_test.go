package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunCommands(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.hcl")
	os.WriteFile(good, []byte(`upstream "a" { command = ["x"] }`), 0o644)
	badPolicy := filepath.Join(dir, "policy.hcl")
	os.WriteFile(badPolicy, []byte(`upstream "a" { command = ["x"] }
policy {
  rule "r" {
    effect    = "allow"
    upstreams = ["b"]
    tools     = ["x\\"]
    condition = env.HOME == "x"
  }
}
`), 0o644)
	open := filepath.Join(dir, "open.hcl")
	os.WriteFile(open, []byte("upstream \"a\" { command = [\"x\"] }\nlisten \"http\" {\n  address = \"0.0.0.0:0\"\n}\n"), 0o644)
	bad := filepath.Join(dir, "bad.hcl")
	os.WriteFile(bad, []byte("upstream \"a\" {\n  command = []\n  bogus = 1\n}\n"), 0o644)

	tests := []struct {
		args       []string
		code       int // 0 = success
		stdout     string
		stderrPart string
	}{
		{args: []string{"version"}, stdout: "mcp-proxy "},
		{args: []string{"help"}, stdout: "Usage:"},
		{args: nil, code: 2, stderrPart: "Usage:"},
		{args: []string{"frobnicate"}, code: 2, stderrPart: `unknown command "frobnicate"`},
		{args: []string{"validate", "--config", good}, stdout: "OK (1 upstreams)"},
		{args: []string{"validate", "--config", bad}, code: 1, stderrPart: bad + ":2:"},
		{args: []string{"validate", "--config", filepath.Join(dir, "missing.hcl")}, code: 1},
		{args: []string{"validate", "--config", badPolicy}, code: 1, stderrPart: badPolicy + `:5:17: error: Unknown upstream; rule "r" names upstream "b"`},
		{args: []string{"validate", "--config", badPolicy}, code: 1, stderrPart: badPolicy + `:6:17: error: Invalid pattern`},
		{args: []string{"validate", "--config", badPolicy}, code: 1, stderrPart: badPolicy + `:7:17: error: Unknown variable in condition`},
		{args: []string{"run", "--config", open}, code: 1, stderrPart: "refusing to serve 0.0.0.0:0 without authentication"},
		{args: []string{"hash-key"}, code: 2, stderrPart: ""},
		{args: []string{"run", "--config", good, "--log-level", "loud"}, code: 2},
		{args: []string{"run", "--config", good, "--log-format", "xml"}, code: 2},
		{args: []string{"call", "--config", good}, code: 2, stderrPart: ""},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tt.args, strings.NewReader(""), &stdout, &stderr)
		code := 0
		if err != nil {
			code = 1
			var ex exitError
			if errors.As(err, &ex) {
				code = ex.code
			}
		}
		if code != tt.code {
			t.Errorf("%v: exit %d (%v), want %d\nstderr: %s", tt.args, code, err, tt.code, stderr.String())
		}
		if !strings.Contains(stdout.String(), tt.stdout) {
			t.Errorf("%v: stdout %q lacks %q", tt.args, stdout.String(), tt.stdout)
		}
		if err != nil {
			reportError(&stderr, err) // what main prints
		}
		if !strings.Contains(stderr.String(), tt.stderrPart) {
			t.Errorf("%v: stderr %q lacks %q", tt.args, stderr.String(), tt.stderrPart)
		}
	}
}

// TestValidateOutput: validate prints every problem of a file at once, one per line
// with its file:line, and what main says after them starts on a line of its own; a
// valid file's warnings end with a newline too.
func TestValidateOutput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "six.hcl")
	os.WriteFile(bad, []byte(`upstream "t" {
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
`), 0o644)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"validate", bad}, strings.NewReader(""), &stdout, &stderr)
	if code := reportError(&stderr, err); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	lines := strings.SplitAfter(stderr.String(), "\n")
	if last := lines[len(lines)-1]; last != "" {
		t.Errorf("stderr does not end with a newline: %q", stderr.String())
	}
	lines = lines[:len(lines)-1]
	want := []string{":7:14: error: Empty pattern list", ":11:17: error: Unknown upstream", ":15:14: error: Invalid pattern",
		":19:17: error: Unknown variable in condition", ":23:17: error: Unknown function in condition", ":26:12: error: Invalid rate"}
	if len(lines) != len(want)+1 {
		t.Fatalf("%d lines on stderr, want %d diagnostics and the summary:\n%s", len(lines), len(want), stderr.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], bad+w) {
			t.Errorf("line %d: %q, want it to start with %q", i+1, lines[i], bad+w)
		}
	}
	if got, want := lines[len(want)], "mcp-proxy: "+bad+": invalid configuration\n"; got != want {
		t.Errorf("summary line %q, want %q", got, want)
	}

	warn := filepath.Join(dir, "warn.hcl")
	os.WriteFile(warn, []byte("upstream \"t\" {\n  command = [\"t\"]\n}\naudit {\n}\n"), 0o644)
	stdout.Reset()
	stderr.Reset()
	if err := run(context.Background(), []string{"validate", warn}, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("validate with a warning: %v", err)
	}
	if s := stderr.String(); !strings.HasPrefix(s, warn+":4:1: warning: Audit goes nowhere") || !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		t.Errorf("warning: %q", s)
	}
	if stdout.String() != warn+": OK (1 upstreams)\n" {
		t.Errorf("stdout: %q", stdout.String())
	}
}
