package main

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// runArgs runs the program as main would and returns its exit status and output.
func runArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	if err != nil {
		code = reportError(&errOut, err)
	}
	return code, out.String(), errOut.String()
}

// TestHelpEveryCommand: every command answers --help, -h and `help COMMAND` the same way:
// on stdout, exit 0, with a synopsis, a description, each of its flags and an example,
// and without doing anything else (nothing on stderr; no config is read).
func TestHelpEveryCommand(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, c.name, "--help")
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			for _, want := range []string{"mcp-proxy " + c.name + ": ", "\nUsage:\n  mcp-proxy " + c.name, "\nExample:\n  "} {
				if !strings.Contains(stdout, want) {
					t.Errorf("help lacks %q:\n%s", want, stdout)
				}
			}
			if !strings.HasSuffix(stdout, "\n") || strings.Contains(stdout, "Usage of") {
				t.Errorf("help:\n%s", stdout)
			}
			flags := flagsOf(context.Background(), c.name)
			if len(flags) > 0 && !strings.Contains(stdout, "\nFlags:\n") {
				t.Errorf("no Flags section:\n%s", stdout)
			}
			for _, f := range flags {
				if !strings.Contains(stdout, "  "+dashed(f.Name)+" ") && !strings.Contains(stdout, "  "+dashed(f.Name)+"\n") {
					t.Errorf("flag %s not listed:\n%s", dashed(f.Name), stdout)
				}
				if n := valueName(f); n == "VALUE" || n == "STRING" || n == "INT" {
					t.Errorf("flag --%s has no back-quoted value name in its usage (%q)", f.Name, f.Usage)
				}
			}
			for _, args := range [][]string{{c.name, "-h"}, {"help", c.name}} {
				code, out, errOut := runArgs(t, args...)
				if code != 0 || out != stdout || errOut != "" {
					t.Errorf("%v: exit %d, stderr %q, stdout differs from --help: %v", args, code, errOut, out != stdout)
				}
			}
		})
	}
	// A default appears with its flag, and a zero default does not.
	_, stdout, _ := runArgs(t, "bridge", "--help")
	if !strings.Contains(stdout, "(default /mcp)") || strings.Contains(stdout, "(default false)") || strings.Contains(stdout, "(default map[])") {
		t.Errorf("defaults in bridge help:\n%s", stdout)
	}
}

// TestUsageErrors: a usage mistake prints what is wrong and the short usage on stderr,
// nothing on stdout, and exits 2.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"tools", "--frob"}, "mcp-proxy: tools: flag provided but not defined: -frob\nusage: mcp-proxy tools [--config FILE]"},
		{[]string{"validate", "--config"}, "validate: flag needs an argument: -config\nusage: mcp-proxy validate"},
		{[]string{"run", "extra"}, `mcp-proxy: run: takes no arguments (got ["extra"])`},
		{[]string{"tools", "extra"}, `tools: takes no arguments`},
		{[]string{"call"}, "call: takes a TOOL name"},
		{[]string{"call", "t", "[1]"}, "call: the arguments must be a JSON object"},
		{[]string{"bridge"}, "bridge: give --url URL, or --listen HOST:PORT and a command after --\nusage: mcp-proxy bridge --url URL [--header NAME=VALUE]...\n   or: mcp-proxy bridge --listen HOST:PORT"},
		{[]string{"bridge", "--url", "ftp://x"}, "--url must be an http:// or https:// address"},
		{[]string{"bridge", "--listen", "127.0.0.1:0"}, "--listen takes the command to serve after --"},
		{[]string{"bridge", "--timeout", "soon"}, `bridge: invalid value "soon" for flag -timeout`},
		{[]string{"hash-key", "key"}, "hash-key: reads the key on stdin"},
		{[]string{"completion"}, "completion: takes one shell: bash, zsh or fish"},
		{[]string{"completion", "tcsh"}, `completion: unknown shell "tcsh"`},
		{[]string{"version", "x"}, "version: takes no arguments"},
		{[]string{"version", "--short"}, "version: flag provided but not defined: -short"},
		{[]string{"import"}, "import: needs at least one FILE\nusage: mcp-proxy import [-o FILE [--force]] [--workspace DIR] FILE...\n"},
	}
	for _, tt := range tests {
		code, stdout, stderr := runArgs(t, tt.args...)
		if code != 2 || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q; want 2 and nothing", tt.args, code, stdout)
		}
		if !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: stderr lacks %q:\n%s", tt.args, tt.want, stderr)
		}
		if name := tt.args[0]; !strings.HasSuffix(stderr, "Run 'mcp-proxy "+name+" --help' for more.\n") {
			t.Errorf("%q: stderr does not end with the pointer to --help:\n%s", tt.args, stderr)
		}
	}
}

// TestEveryCommandDocumented: every command dispatch knows has an entry in commands (so
// that it has help, a line in the usage and completion), and every entry is one dispatch
// knows.
func TestEveryCommandDocumented(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	dispatched := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "dispatch" {
			return true
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if cc, ok := n.(*ast.CaseClause); ok {
				for _, e := range cc.List {
					if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if s, _ := strconv.Unquote(lit.Value); !strings.HasPrefix(s, "-") && s != "help" {
							dispatched[s] = true
						}
					}
				}
			}
			return true
		})
		return false
	})
	if len(dispatched) < 5 {
		t.Fatalf("found only %v in dispatch's switch", dispatched)
	}
	usage := topUsage()
	documented := map[string]bool{}
	for _, c := range commands {
		documented[c.name] = true
		if !dispatched[c.name] {
			t.Errorf("commands lists %q, which dispatch does not run", c.name)
		}
		if !strings.Contains(usage, "  mcp-proxy "+c.name+" ") {
			t.Errorf("usage lacks %q:\n%s", c.name, usage)
		}
	}
	for name := range dispatched {
		if !documented[name] {
			t.Errorf("dispatch runs %q, which commands (help.go) does not describe", name)
		}
	}
}

func TestTopLevelUsage(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		code, stdout, stderr := runArgs(t, args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "mcp-proxy: one MCP server in front of many.\n\nUsage:\n") {
			t.Errorf("%q: exit %d, stderr %q, stdout:\n%s", args, code, stderr, stdout)
		}
	}
	code, stdout, stderr := runArgs(t)
	if code != 2 || stdout != "" || !strings.Contains(stderr, "Usage:") {
		t.Errorf("no arguments: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
}
