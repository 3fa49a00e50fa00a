package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// completionScript writes `mcp-proxy completion shell` to a file and returns its path.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	code, stdout, stderr := runArgs(t, "completion", shell)
	if code != 0 || stderr != "" {
		t.Fatalf("completion %s: exit %d, stderr %q", shell, code, stderr)
	}
	path := filepath.Join(t.TempDir(), "mcp-proxy."+shell)
	if err := os.WriteFile(path, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCompletionScripts: each shell's script names every command and every flag, and
// parses (bash -n always; zsh -n and fish -n where those shells are installed).
func TestCompletionScripts(t *testing.T) {
	model := completionModel(context.Background())
	checks := map[string][]string{"bash": {"bash", "-n"}, "zsh": {"zsh", "-n"}, "fish": {"fish", "--no-execute"}}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			path := completionScript(t, shell)
			src, _ := os.ReadFile(path)
			for _, c := range model {
				if !strings.Contains(string(src), c.name) {
					t.Errorf("script lacks command %q", c.name)
				}
				for _, f := range c.flags {
					if !strings.Contains(string(src), f.name) {
						t.Errorf("script lacks flag --%s of %s", f.name, c.name)
					}
				}
			}
			check := checks[shell]
			if _, err := exec.LookPath(check[0]); err != nil {
				if shell == "bash" {
					t.Fatal("bash not found")
				}
				t.Skipf("%s is not installed: the script's syntax is not checked", shell)
			}
			if out, err := exec.Command(check[0], append(check[1:], path)...).CombinedOutput(); err != nil {
				t.Errorf("%s: %v\n%s", strings.Join(check, " "), err, out)
			}
		})
	}
	if len(model) != len(commands)+1 || model[len(model)-1].name != "help" {
		t.Errorf("model: %d commands", len(model))
	}
	if !strings.Contains(bashCompletion(model), `tools) flags='--as --config --endpoint --groups --json --log-format --log-level --help'`) {
		t.Errorf("the flags of tools are not learned from its flag set")
	}
}

// TestBashCompletion runs the bash script's function on typed words.
func TestBashCompletion(t *testing.T) {
	script := completionScript(t, "bash")
	dir := t.TempDir()
	for _, f := range []string{"proxy.hcl", "prod.hcl", "other.txt"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	tests := []struct {
		words []string // after mcp-proxy; the last is the word being completed
		want  string   // the candidates, sorted, one per line
	}{
		{[]string{"to"}, "tools"},
		{[]string{"--v"}, "--version"},
		{[]string{"tools", "--j"}, "--json"},
		{[]string{"tools", "--lo"}, "--log-format\n--log-level"},
		{[]string{"run", "--log-level", "w"}, "warn"},
		{[]string{"run", "--log-format", ""}, "console\njson"},
		{[]string{"run", "--config", "pro"}, "prod.hcl\nproxy.hcl"},
		{[]string{"run", "--config", "=", "prox"}, "proxy.hcl"},
		{[]string{"validate", "pro"}, "prod.hcl\nproxy.hcl"},
		{[]string{"tools", "--as", ""}, ""},
		{[]string{"completion", "z"}, "zsh"},
		{[]string{"help", "br"}, "bridge"},
		{[]string{"hash-key", "--"}, "--help"},
		{[]string{"bridge", "--listen", "127.0.0.1:0", "--", "ech"}, "echo"},
		{[]string{"import", "-o", "prox"}, "proxy.hcl"},
		{[]string{"import", "-"}, "--force\n--help\n--workspace\n-o"},
		{[]string{"frobnicate", ""}, ""},
	}
	for _, tt := range tests {
		cmd := exec.Command("bash", "-c", `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _mcp_proxy; `+
			`((${#COMPREPLY[@]})) && printf '%s\n' "${COMPREPLY[@]}" | sort -u`, "bash", script, "mcp-proxy")
		cmd.Args = append(cmd.Args, tt.words...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		got := strings.TrimSpace(string(out))
		if tt.want == "" && err != nil && got == "" {
			err = nil // (( 0 )) is false: nothing to print
		}
		if err != nil || got != tt.want {
			t.Errorf("mcp-proxy %s<TAB>: got %q (%v), want %q", strings.Join(tt.words, " "), got, err, tt.want)
		}
	}
}

// TestFishCompletion asks fish itself what it completes, where fish is installed.
func TestFishCompletion(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("fish is not installed")
	}
	script := completionScript(t, "fish")
	tests := []struct{ line, want string }{
		{"mcp-proxy to", "tools\t"},
		{"mcp-proxy run --log-level=", "--log-level=warn\t"},
		{"mcp-proxy tools --", "--json\tprint JSON instead of a table"},
		{"mcp-proxy completion ", "zsh"},
	}
	for _, tt := range tests {
		out, err := exec.Command("fish", "--no-config", "-c", `source $argv[1]; complete -C$argv[2]`, script, tt.line).CombinedOutput()
		if err != nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%q: %v, got:\n%s\nwant a line with %q", tt.line, err, out, tt.want)
		}
	}
}
