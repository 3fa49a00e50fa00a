package config

import (
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Defaults applied to settings the file leaves out.
const (
	DefaultName           = "mcp-proxy"
	DefaultSeparator      = "__"
	DefaultPageSize       = 100
	DefaultMaxNameLength  = 128
	DefaultTimeout        = 60 * time.Second
	DefaultStartupTimeout = 30 * time.Second
	DefaultMaxMessageSize = 64 << 20

	// Upstream protocol eras.
	ProtocolAuto   = "auto"
	ProtocolLegacy = "legacy"
	ProtocolModern = "modern"

	// HTTP upstream transports.
	TransportAuto           = "auto"
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"

	SessionShared       = "shared"
	SessionPerClient    = "per-client"
	SessionPerPrincipal = "per-principal"

	DefaultMaxSessions = 64
	DefaultIdleTimeout = 10 * time.Minute
)

// Limits enforced during validation.
const (
	minSeparatorLen    = 1
	maxSeparatorLen    = 4
	minPageSize        = 1
	maxPageSize        = 10000
	minMaxNameLength   = 16
	maxMaxNameLength   = 128
	minMaxMessageSize  = 1024
	separatorCharsDesc = "letters, digits, '_', '.' and '-'"
)

// Config is a fully decoded, defaulted and validated configuration file.
// A *Config is only ever returned without error diagnostics; callers may treat
// it as read-only and share it between goroutines.
type Config struct {
	Filename  string     // path of the file it came from
	Source    []byte     // the file's bytes (see Equal)
	Proxy     Proxy      // the proxy block, or all defaults when the file has none
	Upstreams []Upstream // in file order
	Listen    []Listen   // at most one; none means stdin/stdout
	Auth      *Auth      // nil: no authentication
	Policy    *Policy    // nil: everything allowed, no limits
	Audit     *Audit     // nil: no audit trail
	Plugins   []Plugin   // in file order
	Telemetry *Telemetry // nil: no telemetry block (the OTEL_* environment may still trace)
	Admin     *Admin     // nil: no admin listener (see admin.go)
	Cluster   *Cluster   // nil: no shared state, every replica on its own (see cluster.go)
	Endpoints []Endpoint // in file order; none: the proxy is one face (see endpoint.go)
	// TokenStore is where per-user credentials are kept; nil: in memory, or in Redis
	// with a cluster block (see tokenstore.go).
	TokenStore *TokenStore
}

// Proxy holds the settings of the optional proxy block.
type Proxy struct {
	Name          string // serverInfo.name shown to clients; default "mcp-proxy"
	Version       string // serverInfo.version; default "" (caller fills with build version)
	Separator     string // between namespace and name; default "__"; 1-4 chars, each from [A-Za-z0-9_.-]
	PageSize      int    // items per page of merged lists; default 100; 1..10000
	MaxNameLength int    // max length of exposed tool/prompt names; default 128; 16..128
	Instructions  string // optional extra instructions prepended to the merged upstream instructions
	// Principal names the one user of a stdio front end, for policy and audit; default
	// the OS user name (the caller fills it in).
	Principal       string
	PrincipalGroups []string
	// Watch reloads the configuration when the file changes (as SIGHUP does).
	Watch bool
	// MaxClientBuffer caps the bytes one client session (stdio, or an HTTP session's
	// event stream) may leave unread before it is disconnected; default 16 MiB; >= 64 KiB.
	MaxClientBuffer int
	// MaxClientInFlight caps the requests one client session has in flight; more are
	// refused with -31006; default 1024; >= 1.
	MaxClientInFlight int
	// ReadyGrace is how long a client's initialize waits for upstreams still starting
	// before it is answered with what is ready (the rest are announced with list_changed
	// when they come up); default 1s; 0 answers at once.
	ReadyGrace time.Duration
	// Pin is what a tool, prompt or resource template whose definition is not the one
	// approved in LockFile leads to: "off" (the default: no lock file is read), "warn"
	// (served and reported) or "enforce" (withheld until approved).
	Pin string
	// LockFile is the lock file of approved definitions; absolute; default proxy.lock in
	// the configuration file's directory.
	LockFile string
	// Screen is what a poisoning finding in a definition leads to, for upstreams that do
	// not set their own: "off", "flag" (the default: reported) or "withhold".
	Screen string
	// ScreenAllow lists the screening checks (ScreenChecks) whose findings are accepted
	// in every upstream: reported as accepted, never withholding.
	ScreenAllow []string
}

// Pin and screen modes.
const (
	PinOff         = "off"
	PinWarn        = "warn"
	PinEnforce     = "enforce"
	ScreenOff      = "off"
	ScreenFlag     = "flag"
	ScreenWithhold = "withhold"

	// DefaultLockFile is the lock file's name in the configuration's directory.
	DefaultLockFile = "proxy.lock"
)

// Defaults and minimums of the client session caps.
const (
	DefaultMaxClientBuffer   = 16 << 20
	DefaultMaxClientInFlight = 1024
	DefaultReadyGrace        = time.Second
	minMaxClientBuffer       = 64 << 10
)

// Upstream describes one MCP server the proxy spawns and talks to over stdio.
type Upstream struct {
	Name           string            // block label, matches ^[A-Za-z0-9_-]+$ and is unique
	Command        []string          // non-empty, Command[0] non-empty
	Env            map[string]string // added to the proxy's own environment; nil when not set
	Cwd            string            // absolute; relative paths are resolved against the config file's directory, which is also the default
	Namespace      string            // default: the label; "" (explicitly set) exposes names unprefixed; matches ^[A-Za-z0-9_.-]*$
	Timeout        time.Duration     // per request; default 60s; > 0
	StartupTimeout time.Duration     // for spawning + initialize + first catalogue fetch; default 30s; > 0
	MaxMessageSize int               // bytes, max size of one message from this upstream; default 64<<20; >= 1024
	Disabled       bool              // a disabled upstream is decoded and validated but not started
	Screen         string            // "off", "flag" or "withhold"; "": the proxy block's screen
	ScreenAllow    []string          // screening checks whose findings are accepted in this upstream (besides the proxy block's)
	Protocol       string            // era: "auto" (probe server/discover, fall back to initialize), "legacy" or "modern"
	URL            string            // a Streamable HTTP upstream instead of Command
	Headers        map[string]string // sent to URL on every request (the upstream's own credentials)
	Transport      string            // for URL: "auto", "streamable-http" or "sse" (legacy HTTP+SSE)
	// Session is "shared" (one upstream session for every client, the default),
	// "per-client" (one per client session of the HTTP front end, started on its first
	// call, at most MaxSessions at once, closed after IdleTimeout without calls) or
	// "per-principal" (one per principal, shared by that principal's client sessions,
	// capped and closed when idle the same way; the default, and the only choice, with
	// a per-user credentials mode).
	Session     string
	MaxSessions int           // per-client, per-principal: default 64; >= 1
	IdleTimeout time.Duration // per-client, per-principal: default 10m; > 0
	MaxInFlight int           // calls in flight at once (over all clients); 0: no cap
	// Required: the proxy is ready (the admin listener's /readyz) only while this upstream
	// is; default true for an enabled upstream, always false for a disabled one.
	Required  bool
	OAuth     *OAuth    // the oauth block of a url upstream; nil when absent (see OAuth)
	Tools     Filter    // the tools block and tool "NAME" blocks; zero: every tool as listed
	Prompts   Filter    // the prompts block and prompt "NAME" blocks; zero: every prompt as listed
	Sandbox   *Sandbox  // the sandbox block of a command upstream; nil when absent (see Sandbox)
	DeclRange hcl.Range // where the block is, for diagnostics reported by other packages later

	// Credentials is whom the upstream's calls act as; nil (no block) is mode "shared".
	Credentials *Credentials
	// Secrets are the names of the secrets Env and Headers refer to with secret(),
	// sorted; only in credentials mode "secret" (see ExpandSecrets).
	Secrets []string
}
