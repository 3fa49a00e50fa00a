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
	"runtime"
	"syscall"
)

func main() {
	if os.Getenv(debugAddrEnv) == "" {
		// The runtime samples allocations for a heap profile that only the debug
		// listener serves; without it, each sample's stack walk reads the binary's
		// tables (and keeps their pages resident) for nobody: about 0.2 MiB of the
		// idle proxy's memory (issue 17).
		runtime.MemProfileRate = 0
	}
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

// run is the whole program behind main, testable with any streams. A command's --help
// comes back from it as a helpError, printed here on stdout.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, stdin, stdout, stderr)
	if h, ok := isHelp(err); ok {
		fmt.Fprint(stdout, commandHelp(h.fs))
		return nil
	}
	return err
}

// dispatch runs the command args name.
func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage())
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
	case "lock":
		return cmdLock(ctx, rest, stdout, stderr)
	case "screen":
		return cmdScreen(ctx, rest, stdout, stderr)
	case "import":
		return cmdImport(rest, stdout, stderr)
	case "bridge":
		return cmdBridge(ctx, rest, stdin, stdout, stderr)
	case "status":
		return cmdStatus(ctx, rest, stdout, stderr)
	case "reload":
		return cmdReload(ctx, rest, stdout, stderr)
	case "credentials":
		return cmdCredentials(ctx, rest, stdin, stdout, stderr)
	case "hash-key":
		return cmdHashKey(rest, stdin, stdout, stderr)
	case "completion":
		return cmdCompletion(ctx, rest, stdout, stderr)
	case "version", "--version", "-version", "-v":
		return cmdVersion(rest, stdout, stderr)
	case "help", "-h", "--help", "-help":
		if len(rest) > 0 && rest[0] != cmd {
			return dispatch(ctx, []string{rest[0], "--help"}, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, topUsage())
		return nil
	}
	fmt.Fprintf(stderr, "unknown command %q\n\n%s", cmd, topUsage())
	return exitError{code: 2}
}
