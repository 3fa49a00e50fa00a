// Command misbehave is a configurable MCP server over stdio (or, with -http,
// Streamable HTTP) for tests. The end-to-end tests run it as an upstream that
// misbehaves on demand (it crashes, prints garbage on stdout, exits after N
// requests, answers notifications), and the load tool runs it with -fast as a
// trivial upstream, over stdio or HTTP.
//
// It speaks legacy MCP (2024-11-05 to 2025-11-25) as newline-delimited
// JSON-RPC 2.0 on stdin and stdout and logs to stderr; -http ADDR serves the
// same tools over Streamable HTTP at /mcp instead (see http.go). It uses only
// the standard library, never an MCP SDK, so that it can break the protocol
// in ways an SDK would refuse. It is not a real server and must not be used as
// one: several of its tools are hostile on purpose.
//
// Build it with:
//
//	go build -o /tmp/misbehave ./internal/testing/testserver
//
// Run it with -h for the flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"runtime/pprof"
	"sync"
)

func main() {
	err := run(context.Background(), os.Args, os.Stdin, os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	var exit *exitError
	if errors.As(err, &exit) {
		// The reason has already been logged where it arose.
		os.Exit(exit.code)
	}
	fmt.Fprintf(os.Stderr, "misbehave: %v\n", err)
	os.Exit(1)
}

// exitError asks main to end the process with code and nothing more on
// stdout or stderr.
type exitError struct {
	code   int
	reason string
}

func (e *exitError) Error() string {
	return fmt.Sprintf("exit status %d: %s", e.code, e.reason)
}

// exitSignal records the first request to end the process. It is safe for
// concurrent use.
type exitSignal struct {
	once sync.Once
	done chan struct{} // closed when err is set
	err  *exitError    // written once, before done is closed
}

func newExitSignal() *exitSignal {
	return &exitSignal{done: make(chan struct{})}
}

// request records e unless an earlier request was recorded.
func (s *exitSignal) request(e *exitError) {
	s.once.Do(func() {
		s.err = e
		close(s.done)
	})
}

// get returns the recorded request, or nil.
func (s *exitSignal) get() *exitError {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// engine is one way of serving the protocol: the full server or -fast.
type engine interface {
	// serve reads messages from stdin until EOF and handles them. It returns
	// nil at EOF.
	serve(ctx context.Context, stdin io.Reader) error
	// stop makes serve ignore further requests.
	stop()
	// drain waits for the requests being handled to finish.
	drain()
}

var (
	_ engine = (*server)(nil)
	_ engine = (*fastServer)(nil)
)

const bannerLine = "misbehave server starting (this line is not JSON)"

// run serves MCP on stdin and stdout until stdin reaches EOF, ctx is
// cancelled or a tool asks to end the process (then it returns an
// *exitError carrying the exit status). args includes the program name.
//
// At EOF, requests in flight are allowed to finish. Otherwise they are
// cancelled, nothing more is written to stdout, and stdin is closed if it is
// an io.Closer so that the reading goroutine ends.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		return err
	}
	logger := log.New(stderr, "", 0)
	if cfg.needEnv != "" && os.Getenv(cfg.needEnv) == "" {
		logger.Printf("%s: %s is not set: exiting", cfg.name, cfg.needEnv)
		return &exitError{code: 2, reason: cfg.needEnv + " is not set"}
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return fmt.Errorf("creating the CPU profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("starting the CPU profile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	out := newLineWriter(stdout)
	if cfg.banner {
		if err := out.writeLine([]byte(bannerLine)); err != nil {
			return fmt.Errorf("writing banner: %w", err)
		}
		logger.Printf("%s: starting; the banner on stdout is deliberate", cfg.name)
	}
	if cfg.httpAddr != "" {
		// Streamable HTTP instead of stdio: stdin is not read; SIGINT or SIGTERM (or
		// ctx) ends the server.
		return serveHTTP(ctx, cfg, logger)
	}

	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exit := newExitSignal()

	var eng engine
	if cfg.fast {
		eng = newFastServer(cfg, out, logger, exit.request)
	} else {
		eng = newServer(cfg, out, logger, exit.request)
	}

	readerDone := make(chan error, 1)
	go func() { readerDone <- eng.serve(ctx, stdin) }()

	var readErr error
	readerFinished := false
	select {
	case readErr = <-readerDone:
		readerFinished = true
	case <-exit.done:
	case <-parent.Done():
	}

	if readerFinished && exit.get() == nil && parent.Err() == nil {
		// EOF: let the requests in flight finish, as a shell pipe expects.
		drained := make(chan struct{})
		go func() {
			eng.drain()
			close(drained)
		}()
		select {
		case <-drained:
		case <-exit.done:
		case <-parent.Done():
		}
		defer func() { <-drained }() // ends once drain below has returned
	}

	eng.stop()
	cancel()
	if exit.get() != nil || parent.Err() != nil {
		out.close()
	}
	if !readerFinished {
		if c, ok := stdin.(io.Closer); ok {
			if err := c.Close(); err != nil {
				logger.Printf("closing stdin: %v", err)
			}
		}
	}
	eng.drain()
	if !readerFinished {
		// A blocking read of an *os.File is not interrupted by Close; the
		// process exits as soon as run returns, which ends it. Any other
		// reader has been closed above and returns now.
		if _, isFile := stdin.(*os.File); !isFile {
			<-readerDone
		}
	}

	if e := exit.get(); e != nil {
		return e
	}
	if err := parent.Err(); err != nil {
		return context.Cause(parent)
	}
	return readErr
}
