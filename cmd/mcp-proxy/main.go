// Command mcp-proxy is one MCP server in front of many: it runs or connects to upstream
// MCP servers, merges their tools, prompts and resources into one namespaced catalogue and
// routes every call to its owner.
//
// main is thin: it calls run with the process's arguments and streams and turns an error
// into a non-zero exit status.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		os.Exit(reportError(os.Stderr, err))
	}
}

// reportError prints what main says about run's error, on a line of its own, and
// returns the exit status it asks for.
func reportError(stderr io.Writer, err error) int {
	var ex exitError
	if !errors.As(err, &ex) {
		fmt.Fprintln(stderr, "mcp-proxy:", err)
		return 1
	}
	if ex.msg != "" {
		fmt.Fprintln(stderr, "mcp-proxy:", err)
	}
	return ex.code
}

// exitError asks main for a specific exit status; an empty msg prints nothing more.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// version is set at build time with -ldflags "-X main.version=..."; otherwise the module
// version from the build info is used.
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

const usage = `mcp-proxy: one MCP server in front of many.

Usage:
  mcp-proxy run      [--config FILE]               serve the merged servers on stdin/stdout
  mcp-proxy validate [--config FILE]               check a config file; exit 1 with diagnostics
  mcp-proxy tools    [--config FILE] [--json] [--as PRINCIPAL [--groups G,..]]
                                                   start the upstreams, print the merged tools
                                                   (with --as: only those the policy lets PRINCIPAL see)
  mcp-proxy call     [--config FILE] TOOL [JSON]   call one tool through the proxy, print the result
  mcp-proxy import   [-o FILE] FILE...             convert Claude Desktop, Cursor, Claude Code or VS Code
                                                   server lists (JSON) into a config (run, tools and call
                                                   also take such a JSON file as --config directly)
  mcp-proxy bridge   --url URL [--header K=V]      expose one remote (Streamable HTTP) server on stdin/stdout
  mcp-proxy bridge   --listen ADDR [--insecure-no-auth] -- CMD ARGS...
                                                   serve one stdio server over Streamable HTTP
  mcp-proxy hash-key                               read an API key on stdin, print its sha256 for auth.api_key
  mcp-proxy version                                print the version

Common flags (after the command):
  --config FILE        configuration file (default ./proxy.hcl)
  --log-level LEVEL    trace, debug, info, warn, error (default info)
  --log-format FORMAT  json or console (default json); logs always go to stderr
`

// run is the whole program behind main, testable with any streams.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitError{code: 2}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return cmdRun(ctx, rest, stdin, stdout, stderr)
	case "validate":
		return cmdValidate(rest, stdout, stderr)
	case "tools":
		return cmdTools(ctx, rest, stdout, stderr)
	case "call":
		return cmdCall(ctx, rest, stdout, stderr)
	case "import":
		return cmdImport(rest, stdout, stderr)
	case "bridge":
		return cmdBridge(ctx, rest, stdin, stdout, stderr)
	case "hash-key":
		return cmdHashKey(stdin, stdout)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "mcp-proxy", buildVersion())
		return nil
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "unknown command %q\n\n%s", cmd, usage)
	return exitError{code: 2}
}
