package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// decodeUpstreams evaluates, defaults and validates the upstream blocks in
// file order, then checks what must hold across blocks: unique labels and
// distinct non-empty namespaces. baseDir must be absolute.
func decodeUpstreams(e *evaluator, raws []rawUpstream, baseDir string) []Upstream {
	ups := make([]Upstream, 0, len(raws))
	for i := range raws {
		ups = append(ups, decodeUpstream(e, &raws[i], baseDir))
	}
	checkUniqueLabels(e, raws)
	checkNamespaceCollisions(e, raws, ups)
	return ups
}

// decodeUpstream evaluates, defaults and validates one upstream block.
func decodeUpstream(e *evaluator, raw *rawUpstream, baseDir string) Upstream {
	u := Upstream{
		Name:           raw.Name,
		Cwd:            baseDir,
		Namespace:      raw.Name,
		Timeout:        DefaultTimeout,
		StartupTimeout: DefaultStartupTimeout,
		MaxMessageSize: DefaultMaxMessageSize,
		DeclRange:      raw.DefRange,
	}

	if !validLabel(raw.Name) {
		e.diags = append(e.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid upstream name",
			Detail: fmt.Sprintf("Upstream name %q must be non-empty and contain only letters, digits, '_' and '-'.",
				raw.Name),
			Subject: raw.NameRange.Ptr(),
			Context: raw.DefRange.Ptr(),
		})
	}

	if raw.URL != nil && raw.Command == nil {
		if url, ok := e.string(raw.URL); ok {
			if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
				e.errorf(raw.URL, "Invalid url", "\"url\" must be an http:// or https:// address, got %q.", url)
			}
			u.URL = url
		}
		if h, ok := e.secretMap(raw.Headers); ok {
			u.Headers = h
		}
		u.Transport = TransportAuto
		if t, ok := e.string(raw.Transport); ok {
			if t != TransportAuto && t != TransportStreamableHTTP && t != TransportSSE {
				e.errorf(raw.Transport, "Invalid transport",
					"\"transport\" must be %q, %q or %q, got %q.", TransportAuto, TransportStreamableHTTP, TransportSSE, t)
			}
			u.Transport = t
		}
		u.OAuth = decodeOAuth(e, raw.OAuth, baseDir)
	} else {
		if raw.URL != nil {
			e.errorf(raw.URL, "Conflicting arguments", "An upstream has either \"command\" (a child process) or \"url\" (an HTTP server), not both.")
		}
		for _, a := range []*hcl.Attribute{raw.Headers, raw.Transport} {
			if a != nil {
				e.errorf(a, "Unexpected argument", "%q applies to upstreams with a \"url\".", a.Name)
			}
		}
		for _, o := range raw.OAuth {
			e.blockErrorf(o.DefRange, "Unexpected block", "An \"oauth\" block applies to upstreams with a \"url\".")
		}
		u.Command = decodeCommand(e, raw)
	}

	if env, ok := e.secretMap(raw.Env); ok {
		if checkEnv(e, raw.Env, env) {
			u.Env = env
		}
	}

	if s, ok := e.string(raw.Cwd); ok {
		if s == "" {
			e.errorf(raw.Cwd, "Invalid cwd",
				"\"cwd\" must not be empty; omit it to use the directory of the configuration file.")
		} else {
			u.Cwd = resolvePath(baseDir, s)
		}
	}

	if s, ok := e.string(raw.Namespace); ok {
		if msg := checkNamespace(s); msg != "" {
			e.errorf(raw.Namespace, "Invalid namespace", "%s", msg)
		} else {
			u.Namespace = s
		}
	}

	if d, ok := e.duration(raw.Timeout); ok {
		u.Timeout = d
	}
	if d, ok := e.duration(raw.StartupTimeout); ok {
		u.StartupTimeout = d
	}

	if n, ok := e.int(raw.MaxMessageSize); ok {
		if n < minMaxMessageSize {
			e.errorf(raw.MaxMessageSize, "Invalid max_message_size",
				"\"max_message_size\" must be at least %d bytes, got %d.", minMaxMessageSize, n)
		} else {
			u.MaxMessageSize = n
		}
	}

	if b, ok := e.bool(raw.Disabled); ok {
		u.Disabled = b
	}
	u.Required = !u.Disabled
	if b, ok := e.bool(raw.Required); ok {
		if b && u.Disabled {
			e.errorf(raw.Required, "Required upstream is disabled",
				"A disabled upstream is never started, so it cannot be required for readiness: drop required = true or disabled = true.")
		}
		u.Required = b && !u.Disabled
	}
	u.Sandbox = decodeSandbox(e, raw.Sandboxes, raw.URL == nil || raw.Command != nil, baseDir)
	decodeSession(e, raw, &u)
	u.Credentials = decodeCredentials(e, raw, &u, baseDir)
	perUserSession(e, raw, &u)
	checkSecretRefs(e, raw, &u)
	if n, ok := e.int(raw.MaxInFlight); ok {
		if n < 1 {
			e.errorf(raw.MaxInFlight, "Invalid max_in_flight", "\"max_in_flight\" must be at least 1, got %d.", n)
		} else {
			u.MaxInFlight = n
		}
	}
	u.Tools = decodeFilter(e, raw.Tools, raw.ToolBlocks, "tool")
	u.Prompts = decodeFilter(e, raw.Prompts, raw.PromptBlocks, "prompt")
	if s, ok := e.oneOf(raw.Screen, "screen", ScreenOff, ScreenFlag, ScreenWithhold); ok {
		u.Screen = s
	}
	u.ScreenAllow = decodeScreenAllow(e, raw.ScreenAllow)
	u.Protocol = ProtocolAuto
	if s, ok := e.string(raw.Protocol); ok {
		switch s {
		case ProtocolAuto, ProtocolLegacy, ProtocolModern:
			u.Protocol = s
		default:
			e.errorf(raw.Protocol, "Invalid protocol",
				"\"protocol\" must be %q, %q or %q, got %q.", ProtocolAuto, ProtocolLegacy, ProtocolModern, s)
		}
	}
	return u
}

// decodeCommand evaluates the required command argument.
func decodeCommand(e *evaluator, raw *rawUpstream) []string {
	const example = `such as ["npx", "-y", "@modelcontextprotocol/server-github"]`
	if raw.Command == nil {
		e.diags = append(e.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing required argument",
			Detail: fmt.Sprintf("The argument \"command\" is required in upstream %q: a list of strings %s.",
				raw.Name, example),
			Subject: raw.DefRange.Ptr(),
		})
		return nil
	}
	nErrs := len(e.diags)
	cmd, ok := e.stringList(raw.Command)
	switch {
	case !ok && len(e.diags) == nErrs: // null
		e.errorf(raw.Command, "Invalid command", "\"command\" must be a non-empty list of strings %s.", example)
	case !ok:
		// Already reported.
	case len(cmd) == 0:
		e.errorf(raw.Command, "Invalid command", "\"command\" must not be empty; give a list of strings %s.", example)
	case cmd[0] == "":
		e.errorf(raw.Command, "Invalid command", "The program name, the first element of \"command\", must not be empty.")
	default:
		return cmd
	}
	return nil
}

// checkEnv reports environment variable names that could not be passed to a
// child process. It returns whether all names are usable.
func checkEnv(e *evaluator, attr *hcl.Attribute, env map[string]string) bool {
	ok := true
	for _, k := range sortedKeys(env) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			e.errorf(attr, "Invalid environment variable name",
				"Environment variable name %q must be non-empty and must not contain '=' or NUL.", k)
			ok = false
		}
	}
	return ok
}

// checkNamespace returns why s is not a usable namespace, or "" if it is.
// The empty string is valid: it exposes names unprefixed.
func checkNamespace(s string) string {
	for _, r := range s {
		if !isNameChar(r) && r != '.' {
			return fmt.Sprintf("Namespace %q may only contain %s; it contains %q. Use \"\" to expose names unprefixed.",
				s, separatorCharsDesc, r)
		}
	}
	return ""
}

// validLabel reports whether s matches ^[A-Za-z0-9_-]+$.
func validLabel(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !isNameChar(r) {
			return false
		}
	}
	return true
}

// resolvePath makes p absolute, relative to baseDir.
func resolvePath(baseDir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(baseDir, p)
}

// checkUniqueLabels reports each upstream whose label was already used,
// pointing at the later label and naming the first one's position.
func checkUniqueLabels(e *evaluator, raws []rawUpstream) {
	first := make(map[string]int, len(raws))
	for i := range raws {
		r := &raws[i]
		j, seen := first[r.Name]
		if !seen {
			first[r.Name] = i
			continue
		}
		e.diags = append(e.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Duplicate upstream name",
			Detail: fmt.Sprintf("An upstream named %q is already defined at %s; upstream names must be unique.",
				r.Name, position(raws[j].NameRange)),
			Subject: r.NameRange.Ptr(),
			Context: r.DefRange.Ptr(),
		})
	}
}

// checkNamespaceCollisions reports an enabled upstream whose non-empty
// namespace equals an earlier enabled upstream's: every name the two expose
// would share a prefix, so any common tool name would collide. Disabled
// upstreams are skipped because they expose nothing, which lets a file keep
// alternative definitions of the same server. Labels that are duplicates are
// skipped too, as checkUniqueLabels already reports them.
func checkNamespaceCollisions(e *evaluator, raws []rawUpstream, ups []Upstream) {
	first := make(map[string]int, len(ups))
	labels := make(map[string]bool, len(ups))
	for i := range ups {
		u := &ups[i]
		dupLabel := labels[u.Name]
		labels[u.Name] = true
		if u.Disabled || u.Namespace == "" || dupLabel {
			continue
		}
		j, seen := first[u.Namespace]
		if !seen {
			first[u.Namespace] = i
			continue
		}
		subject := raws[i].NameRange
		how := "its name, which is also its namespace by default"
		if raws[i].Namespace != nil {
			subject = raws[i].Namespace.Expr.Range()
			how = "its namespace argument"
		}
		e.diags = append(e.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Duplicate namespace",
			Detail: fmt.Sprintf("Upstream %q uses namespace %q (from %s), which upstream %q at %s already uses; "+
				"give one of them a different namespace.",
				u.Name, u.Namespace, how, ups[j].Name, position(raws[j].DefRange)),
			Subject: subject.Ptr(),
			Context: raws[i].DefRange.Ptr(),
		})
	}
}

// decodeSession evaluates session, max_sessions and idle_timeout.
func decodeSession(e *evaluator, raw *rawUpstream, u *Upstream) {
	u.Session, u.MaxSessions, u.IdleTimeout = SessionShared, DefaultMaxSessions, DefaultIdleTimeout
	if s, ok := e.string(raw.Session); ok {
		switch s {
		case SessionShared, SessionPerClient, SessionPerPrincipal:
			u.Session = s
		default:
			e.errorf(raw.Session, "Invalid session",
				"\"session\" must be %q, %q or %q, got %q.", SessionShared, SessionPerClient, SessionPerPrincipal, s)
		}
	}
	if n, ok := e.int(raw.MaxSessions); ok {
		if n < 1 {
			e.errorf(raw.MaxSessions, "Invalid max_sessions", "\"max_sessions\" must be at least 1, got %d.", n)
		} else {
			u.MaxSessions = n
		}
	}
	if d, ok := e.duration(raw.IdleTimeout); ok {
		u.IdleTimeout = d
	}
	if u.Session == SessionShared && (len(raw.Credentials) == 0 || raw.Session != nil) {
		for _, a := range []*hcl.Attribute{raw.MaxSessions, raw.IdleTimeout} {
			if a != nil {
				e.warnf(a, "Setting has no effect",
					"%q only applies to session = %q and %q upstreams.", a.Name, SessionPerClient, SessionPerPrincipal)
			}
		}
	}
}

// OAuth grants, and how long the proxy waits for a person to approve by default.
const (
	DefaultAuthorizationTimeout = 5 * time.Minute

	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// OAuth is an upstream's oauth block: how the proxy authorizes itself (OAuth 2.1, the
// MCP authorization specification) with an HTTP upstream that answers 401. Without the
// block, an HTTP upstream without an Authorization header in "headers" is authorized
// with the defaults (discovery, dynamic client registration) all the same.
type OAuth struct {
	Disabled             bool          // never authorize: a 401 is an error
	ClientID             string        // a pre-registered client; "" registers dynamically
	ClientSecret         string        // its secret ("" for a public client)
	Issuer               string        // limits ClientID to this authorization server; "" for any
	ClientMetadataURL    string        // https URL of a Client ID Metadata Document, used where supported
	Scopes               []string      // asked for with the 401's scope, instead of scopes_supported; nil: what it asks
	RedirectPort         int           // loopback callback port; 0: a free one
	Grant                string        // GrantAuthorizationCode (default) or GrantClientCredentials
	AuthorizationTimeout time.Duration // how long to wait for a person to approve; default 5m
	TokenFile            string        // keeps the tokens and registration across restarts (0600); "" in memory only
	OpenBrowser          bool          // open the authorization URL in the desktop's browser; default true
	DeclRange            hcl.Range
}

// decodeOAuth evaluates and validates an upstream's oauth block (at most one).
func decodeOAuth(e *evaluator, raws []rawOAuth, baseDir string) *OAuth {
	if len(raws) == 0 {
		return nil
	}
	for _, r := range raws[1:] {
		e.blockErrorf(r.DefRange, "Duplicate oauth block", "An upstream has at most one \"oauth\" block; the first is at %s.",
			position(raws[0].DefRange))
	}
	raw := &raws[0]
	o := &OAuth{Grant: GrantAuthorizationCode, AuthorizationTimeout: DefaultAuthorizationTimeout, OpenBrowser: true, DeclRange: raw.DefRange}
	if b, ok := e.bool(raw.Disabled); ok {
		o.Disabled = b
	}
	if s, ok := e.string(raw.ClientID); ok {
		o.ClientID = s
	}
	if s, ok := e.string(raw.ClientSecret); ok {
		o.ClientSecret = s
		if o.ClientID == "" && s != "" {
			e.errorf(raw.ClientSecret, "Missing client_id", "\"client_secret\" needs the \"client_id\" it belongs to.")
		}
	}
	if s, ok := e.string(raw.Issuer); ok {
		o.Issuer = s
		if o.ClientID == "" {
			e.warnf(raw.Issuer, "Setting has no effect", "\"issuer\" only limits where a pre-registered \"client_id\" is used.")
		}
	}
	if s, ok := e.string(raw.ClientMetadataURL); ok {
		if u, err := url.Parse(s); err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" {
			e.errorf(raw.ClientMetadataURL, "Invalid client_metadata_url",
				"\"client_metadata_url\" must be an https:// URL with a path (a Client ID Metadata Document), got %q.", s)
		} else {
			o.ClientMetadataURL = s
		}
	}
	if l, ok := e.stringList(raw.Scopes); ok {
		o.Scopes = l
		for _, sc := range l {
			if sc == "" || strings.ContainsAny(sc, " \"\\") {
				e.errorf(raw.Scopes, "Invalid scope", "Scope %q must be non-empty, without spaces, quotes or backslashes.", sc)
			}
		}
	}
	if n, ok := e.int(raw.RedirectPort); ok {
		if n < 0 || n > 65535 {
			e.errorf(raw.RedirectPort, "Invalid redirect_port", "\"redirect_port\" must be a port number (0 for a free one), got %d.", n)
		} else {
			o.RedirectPort = n
		}
	}
	if s, ok := e.string(raw.Grant); ok {
		switch s {
		case GrantAuthorizationCode, GrantClientCredentials:
			o.Grant = s
		default:
			e.errorf(raw.Grant, "Invalid grant", "\"grant\" must be %q or %q, got %q.", GrantAuthorizationCode, GrantClientCredentials, s)
		}
	}
	if o.Grant == GrantClientCredentials && o.ClientID == "" && raw.Grant != nil {
		e.errorf(raw.Grant, "Missing client_id", "The %q grant needs a pre-registered \"client_id\" (and usually \"client_secret\").", GrantClientCredentials)
	}
	if d, ok := e.duration(raw.AuthorizationTimeout); ok {
		o.AuthorizationTimeout = d
	}
	if s, ok := e.string(raw.TokenFile); ok {
		if s == "" {
			e.errorf(raw.TokenFile, "Invalid token_file", "\"token_file\" must be a file path; leave it out to keep tokens in memory only.")
		} else {
			o.TokenFile = resolvePath(baseDir, s) // relative to the configuration file
		}
	}
	if b, ok := e.bool(raw.OpenBrowser); ok {
		o.OpenBrowser = b
	}
	return o
}
