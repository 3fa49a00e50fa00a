package config

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Listen is a listen "http" block: the proxy serves MCP over Streamable HTTP (and the
// legacy HTTP+SSE transport) instead of stdin/stdout.
type Listen struct {
	Address        string        // host:port; default 127.0.0.1:8080 (loopback)
	Path           string        // the MCP endpoint; default /mcp
	AllowedOrigins []string      // Origin patterns allowed ("http://localhost:*"); other origins get 403
	MaxBodySize    int           // bytes of one POST body; default 4 MiB
	KeepAlive      time.Duration // comment lines on idle event streams; default 15s
	SessionIdle    time.Duration // legacy sessions idle this long are ended; default 30m
	MaxSessions    int           // default 1000
	// InsecureNoAuth lets a listener on a non-loopback address run without an auth
	// block (behind a gateway that authenticates, say); otherwise that refuses to start.
	InsecureNoAuth bool
	DeclRange      hcl.Range
	AddressRange   hcl.Range // of the address attribute; DeclRange when it is not set
}

type rawListen struct {
	Kind           string         `hcl:"kind,label"`
	Address        *hcl.Attribute `hcl:"address,optional"`
	Path           *hcl.Attribute `hcl:"path,optional"`
	AllowedOrigins *hcl.Attribute `hcl:"allowed_origins,optional"`
	MaxBodySize    *hcl.Attribute `hcl:"max_body_size,optional"`
	KeepAlive      *hcl.Attribute `hcl:"keepalive,optional"`
	SessionIdle    *hcl.Attribute `hcl:"session_idle_timeout,optional"`
	MaxSessions    *hcl.Attribute `hcl:"max_sessions,optional"`
	InsecureNoAuth *hcl.Attribute `hcl:"insecure_no_auth,optional"`

	KindRange hcl.Range `hcl:"kind,label_range"`
	DefRange  hcl.Range `hcl:",def_range"`
}

// decodeListens decodes the listen blocks. Every block's settings are checked, those of
// a block of an unknown kind or a duplicate too, so that one run reports them all; only
// the first "http" block is used.
func decodeListens(e *evaluator, raws []rawListen) []Listen {
	var out []Listen
	for i := range raws {
		raw := &raws[i]
		l := decodeListen(e, raw)
		switch {
		case raw.Kind != "http":
			e.blockErrorf(raw.KindRange, "Invalid listen kind", `The only listen kind is "http": listen "http" { address = "127.0.0.1:8080" }.`)
		case len(out) == 1:
			e.blockErrorf(raw.DefRange, "Duplicate listen block", "Only one listen \"http\" block is supported; the first one is at %s.",
				position(out[0].DeclRange))
		default:
			out = append(out, l)
		}
	}
	return out
}

// DefaultListen is a listen "http" block with every attribute at its default: the one
// place the front end's defaults are written (the bridge command starts from it too).
func DefaultListen() Listen {
	return Listen{Address: "127.0.0.1:8080", Path: "/mcp", MaxBodySize: 4 << 20, KeepAlive: 15 * time.Second,
		SessionIdle: 30 * time.Minute, MaxSessions: 1000}
}

// decodeListen evaluates, defaults and validates one listen block.
func decodeListen(e *evaluator, raw *rawListen) Listen {
	l := DefaultListen()
	l.DeclRange, l.AddressRange = raw.DefRange, raw.DefRange
	if raw.Address != nil {
		l.AddressRange = raw.Address.Expr.Range()
	}
	if s, ok := e.string(raw.Address); ok {
		if _, _, err := net.SplitHostPort(s); err != nil {
			e.errorf(raw.Address, "Invalid address", "\"address\" must be host:port, such as \"127.0.0.1:8080\": %v.", err)
		}
		l.Address = s
	}
	if s, ok := e.string(raw.Path); ok {
		if !strings.HasPrefix(s, "/") {
			e.errorf(raw.Path, "Invalid path", "\"path\" must start with /, got %q.", s)
		}
		l.Path = s
	}
	if list, ok := e.stringList(raw.AllowedOrigins); ok {
		l.AllowedOrigins = list
	}
	if n, ok := e.int(raw.MaxBodySize); ok {
		if n < 1024 {
			e.errorf(raw.MaxBodySize, "Invalid max_body_size", "\"max_body_size\" must be at least 1024 bytes, got %d.", n)
		}
		l.MaxBodySize = n
	}
	if d, ok := e.duration(raw.KeepAlive); ok {
		l.KeepAlive = d
	}
	if d, ok := e.duration(raw.SessionIdle); ok {
		l.SessionIdle = d
	}
	if n, ok := e.int(raw.MaxSessions); ok {
		if n < 1 {
			e.errorf(raw.MaxSessions, "Invalid max_sessions", "\"max_sessions\" must be at least 1, got %d.", n)
		}
		l.MaxSessions = n
	}
	if b, ok := e.bool(raw.InsecureNoAuth); ok {
		l.InsecureNoAuth = b
	}
	return l
}

// Unauthenticated says why listener l may not serve without authentication (an
// auth block): it is bound beyond loopback and insecure_no_auth does not allow that; ""
// when it may. Load reports it at the address for a file without an auth block, and
// the bridge command, whose listener comes from flags, checks its own with it.
func Unauthenticated(l Listen) string {
	if isLoopbackAddress(l.Address) || l.InsecureNoAuth {
		return ""
	}
	return fmt.Sprintf("refusing to serve %s without authentication: add an auth block, bind to 127.0.0.1, or set insecure_no_auth = true "+
		"in the listen block (bridge: --insecure-no-auth) if a gateway in front authenticates", l.Address)
}

// isLoopbackAddress reports whether host:port addr names a loopback host.
func isLoopbackAddress(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// checkListen reports, at the listener's address, what the file alone says run would
// refuse about it with the other blocks: serving beyond loopback without an auth block
// (Unauthenticated), and a cluster whose listener does not say where the other replicas
// reach this one (Cluster.AdvertiseAddress). validate and run both load the file through
// this, so that they never disagree.
func checkListen(e *evaluator, cfg *Config) {
	if len(cfg.Listen) == 0 {
		return
	}
	l := cfg.Listen[0]
	if _, _, err := net.SplitHostPort(l.Address); err != nil {
		return // reported already
	}
	if cfg.Auth == nil {
		if problem := Unauthenticated(l); problem != "" {
			e.blockErrorf(l.AddressRange, "Listener without authentication", "%s.", problem)
		}
	}
	if cfg.Cluster != nil {
		if _, err := cfg.Cluster.AdvertiseAddress(l.Address); err != nil {
			e.blockErrorf(l.AddressRange, "Cluster without advertise", "%v.", err)
		}
	}
}
