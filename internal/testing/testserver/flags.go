package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// config is the server's behaviour as chosen on the command line.
type config struct {
	name             string        // serverInfo.name and part of the static resource URI
	version          string        // if set, the protocol version always answered
	instructions     string        // initialize instructions; omitted when empty
	dup              string        // name of an extra echo tool prefixed with the server name
	initializedError bool          // answer notifications/initialized with an error
	banner           bool          // print a non-JSON line on stdout at start
	chatter          bool          // log every message received to stderr
	fast             bool          // minimal, allocation-light mode for benchmarks
	page             int           // tools per tools/list page; 0 means all at once
	extraTools       int           // number of extra echo tools t0001..tNNNN
	exitAfter        int64         // exit with status 4 after this many requests; 0 never
	initDelay        time.Duration // wait this long before answering initialize
	initGate         string        // answer initialize only once this file exists

	httpAddr      string        // serve Streamable HTTP on this host:port instead of stdio
	httpAddrFile  string        // write the bound host:port here once listening
	tlsCert       string        // with httpAddr: serve HTTPS (HTTP/2 offered) with this PEM certificate
	tlsKey        string        // and this PEM key
	httpKeepAlive time.Duration // comment lines on idle GET streams
	httpGet       bool          // serve GET streams; false answers 405

	cpuProfile string // write a CPU profile of the whole run here

	files string // also serve this directory's files as resources and through read_file

	toolsFile string     // also serve the echo tools this JSON file defines (read at start)
	fileTools []fileTool // what toolsFile defines

	echoMeta bool   // the echo_meta tool; over HTTP, log the traceparent header of every request
	flood    bool   // the flood tool
	whoami   bool   // the whoami tool
	needEnv  string // exit at start when this environment variable is unset (a server that needs its API key)

	// With -http, as an OAuth protected resource (bearer.go).
	authJWKS               string // the JWKS tokens are checked against; "" checks nothing
	authIssuer             string // the iss they must have; "" any
	authAS                 string // the authorization server the resource metadata names
	authAnonymousCatalogue bool   // initialize and lists without a token
}

// parseConfig parses args, whose first element is the program name. Usage
// errors are reported on stderr and returned as an *exitError with status 2;
// -h returns an *exitError with status 0.
func parseConfig(args []string, stderr io.Writer) (*config, error) {
	var cfg config
	fs := flag.NewFlagSet("misbehave", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.name, "name", "misbehave", "server `name` in serverInfo and in the URI mis://static/NAME")
	fs.StringVar(&cfg.version, "version", "", "always answer initialize with this protocol `version`, supported or not")
	fs.StringVar(&cfg.instructions, "instructions", "", "initialize `instructions`; omitted when empty")
	fs.StringVar(&cfg.dup, "dup", "", "add an echo tool with this exact `name`, its text prefixed with \"from <server name>: \"")
	fs.BoolVar(&cfg.initializedError, "initialized-error", false, "answer notifications/initialized with an id:null error, as some real servers do")
	fs.BoolVar(&cfg.banner, "banner", false, "print a line that is not JSON on stdout before serving")
	fs.BoolVar(&cfg.chatter, "stderr-chatter", false, "log the method and id of every message received to stderr")
	fs.BoolVar(&cfg.fast, "fast", false, "trivial fast mode: initialize, ping, tools/list and tools/call of echo only, handled inline")
	fs.IntVar(&cfg.page, "page", 0, "tools per tools/list page (`N`); 0 means one page")
	fs.IntVar(&cfg.extraTools, "extra-tools", 0, "add `N` echo tools named t0001..tNNNN")
	fs.StringVar(&cfg.toolsFile, "tools-file", "", "add the echo tools defined in this JSON `file` (an array of {name, description, inputSchema}), read at start")
	fs.DurationVar(&cfg.initDelay, "init-delay", 0, "wait `D` before answering initialize (a server slow to start)")
	fs.StringVar(&cfg.initGate, "init-gate", "", "answer initialize only once `FILE` exists (polled every 10ms), after -init-delay:\n"+
		"a test decides when this server is ready")
	fs.Int64Var(&cfg.exitAfter, "exit-after", 0, "exit with status 4 after handling `N` requests; 0 means never")
	fs.StringVar(&cfg.httpAddr, "http", "", "serve Streamable HTTP at http://`ADDR`/mcp (host:port; port 0 picks a free one) instead of stdin/stdout;\n"+
		"GET /stats answers JSON counters (connections accepted, requests, sessions)")
	fs.StringVar(&cfg.httpAddrFile, "http-addr-file", "", "with -http: write the bound host:port to this `file` once listening (written atomically)")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "with -http: serve HTTPS (HTTP/2 offered by ALPN) with this PEM certificate `file` (needs -tls-key)")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "with -tls-cert: the certificate's PEM private key `file`")
	fs.DurationVar(&cfg.httpKeepAlive, "http-keepalive", 15*time.Second, "with -http: interval of the ': keep-alive' comments on idle GET streams")
	fs.BoolVar(&cfg.httpGet, "http-get", true, "with -http: serve the GET event stream of a session (false answers 405)")
	fs.StringVar(&cfg.files, "files", "", "also be a naive file server: list `DIR`'s files as file:// resources, read any file: URI\n"+
		"(percent-decoded) and add a read_file tool; it checks nothing itself")
	fs.BoolVar(&cfg.echoMeta, "echo-meta", false, "add an echo_meta tool that returns the _meta of its call; with -http, also log\n"+
		"the traceparent and tracestate headers of every request to stderr")
	fs.BoolVar(&cfg.whoami, "whoami", false, "add a whoami tool: \"pid=N env=$WHOAMI sub=S\", S the subjects of the bearer tokens an HTTP session carried")
	fs.StringVar(&cfg.needEnv, "require-env", "", "exit with status 2 at start when the environment variable `NAME` is unset or empty,\n"+
		"as a server that needs its API key does")
	fs.StringVar(&cfg.authJWKS, "auth-jwks", "", "with -http: require a bearer JWT (ES256) signed by a key of the JWKS at `URL`, whose aud is this server's URL")
	fs.StringVar(&cfg.authIssuer, "auth-issuer", "", "with -auth-jwks: the `iss` tokens must have")
	fs.StringVar(&cfg.authAS, "auth-as", "", "with -auth-jwks: the authorization server `URL` the protected resource metadata names")
	fs.BoolVar(&cfg.authAnonymousCatalogue, "auth-anonymous-catalogue", false, "with -auth-jwks: let initialize and the lists through without a token")
	fs.BoolVar(&cfg.flood, "flood", false, "add a flood tool that sends count log notifications of bytes characters each as fast as it can, then answers")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile to `file` (for comparing a benchmark's direct target with the proxy)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: misbehave [flags]\n\n"+
			"An MCP server for tests, on stdio or (with -http) Streamable HTTP. Tools: echo,\n"+
			"slow, crash, big, fail, garbage, env, cwd, two very long names, and the -dup and\n"+
			"-extra-tools ones.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if len(args) > 0 {
		args = args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, &exitError{code: 0, reason: "help requested"}
		}
		return nil, &exitError{code: 2, reason: err.Error()}
	}
	var problems []error
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected arguments: %q", fs.Args()))
	}
	if cfg.page < 0 {
		problems = append(problems, fmt.Errorf("-page must not be negative, got %d", cfg.page))
	}
	if cfg.extraTools < 0 {
		problems = append(problems, fmt.Errorf("-extra-tools must not be negative, got %d", cfg.extraTools))
	}
	if cfg.httpKeepAlive <= 0 {
		problems = append(problems, fmt.Errorf("-http-keepalive must be positive, got %v", cfg.httpKeepAlive))
	}
	if cfg.authJWKS != "" && cfg.httpAddr == "" {
		problems = append(problems, errors.New("-auth-jwks needs -http"))
	}
	if cfg.httpAddr == "" && cfg.httpAddrFile != "" {
		problems = append(problems, errors.New("-http-addr-file needs -http"))
	}
	if (cfg.tlsCert == "") != (cfg.tlsKey == "") || (cfg.tlsCert != "" && cfg.httpAddr == "") {
		problems = append(problems, errors.New("-tls-cert and -tls-key go together, with -http"))
	}
	if cfg.initDelay < 0 {
		problems = append(problems, fmt.Errorf("-init-delay must not be negative, got %v", cfg.initDelay))
	}
	if cfg.exitAfter < 0 {
		problems = append(problems, fmt.Errorf("-exit-after must not be negative, got %d", cfg.exitAfter))
	}
	if cfg.toolsFile != "" {
		ts, err := readToolsFile(cfg.toolsFile)
		if err != nil {
			problems = append(problems, fmt.Errorf("-tools-file: %w", err))
		}
		cfg.fileTools = ts
	}
	if err := errors.Join(problems...); err != nil {
		fmt.Fprintf(stderr, "misbehave: %v\n", err)
		return nil, &exitError{code: 2, reason: err.Error()}
	}
	return &cfg, nil
}

// holdInitialize delays the answer to initialize as -init-delay and -init-gate say, or
// until ctx ends.
func (c *config) holdInitialize(ctx context.Context) {
	if c.initDelay > 0 {
		t := time.NewTimer(c.initDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	if c.initGate == "" {
		return
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(c.initGate); err == nil {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}
