package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
			fmt.Fprintln(&stderr, "mcp-proxy:", err) // what main prints
		}
		if !strings.Contains(stderr.String(), tt.stderrPart) {
			t.Errorf("%v: stderr %q lacks %q", tt.args, stderr.String(), tt.stderrPart)
		}
	}
}
