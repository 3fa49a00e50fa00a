// Package guard holds the argument checks of the proxy's shipped "guard" plugin: it
// refuses a tool call whose arguments a simple policy condition cannot judge — SQL that
// is not one read-only query, a command line that is more than one simple command of an
// allowed program, a URL whose host is not on an allow list.
//
// Every check is an allowlist that fails closed: what the package cannot parse with
// certainty is refused, with a short reason written for the calling model (it never
// echoes more than a few dozen characters of the input).
//
// The package is pure logic. It must not run commands, open connections, resolve names
// or fetch URLs, keep state between calls, log, or read anything but its arguments; the
// plugin around it (SDK wiring, configuration decoding, the reply to the client) lives
// elsewhere. A Guard is immutable after New and safe for concurrent use.
//
// These checks narrow what a model can ask for; they are not a sandbox. The real defences
// stay where they belong: a read-only database role, an unprivileged process, an egress
// firewall.
package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Config is the plugin's configuration (decoded by the host from HCL, passed as JSON).
// At least one of SQLArguments, CommandArguments and URLArguments must be set.
type Config struct {
	// SQLArguments names the tool arguments that hold SQL; each must be one read-only
	// query (see ReadOnlySQL).
	SQLArguments []string `json:"sql_arguments"`
	// SQLDialect is the database the SQL is meant for: "postgres", "mysql" (MariaDB
	// too), "sqlite" or "sqlserver". Empty means "any": a query must be read-only however
	// each of those reads it, which refuses some constructs only one dialect has (a
	// PostgreSQL $$ body, for one). Set it whenever the server behind the tool is known.
	SQLDialect string `json:"sql_dialect"`

	// CommandArguments names the arguments that hold a shell-like command line (see
	// CheckCommand); Commands, which must then be set, lists the allowed programs by
	// name ("ls", "git"): no '/', no blanks.
	CommandArguments []string `json:"command_arguments"`
	Commands         []string `json:"commands"`

	// URLArguments names the arguments that hold URLs (see CheckURL); Hosts, which must
	// then be set, lists the allowed hosts: exact ("api.github.com"), "*.example.com"
	// (strict subdomains, not the apex), IP literals ("127.0.0.1", "[::1]" or "::1"),
	// CIDR ("10.0.0.0/8"), each with an optional ":port". Without a port an entry allows
	// the scheme's default port only. Schemes lists the allowed URL schemes; empty means
	// ["https", "http"].
	URLArguments []string `json:"url_arguments"`
	Hosts        []string `json:"hosts"`
	Schemes      []string `json:"schemes"`
}

// Guard checks the arguments of tool calls against a Config. The zero value checks
// nothing and refuses every Check; build one with New.
type Guard struct {
	sqlArgs, commandArgs, urlArgs []string
	dialect                       Dialect
	commands                      map[string]bool
	hosts                         []hostPattern
	schemes                       []string
}

// New validates cfg and returns its Guard. It reports every problem at once.
func New(cfg Config) (*Guard, error) {
	g := &Guard{}
	var errs []error
	names := func(field string, list []string) []string {
		var out []string
		for i, n := range list {
			if n == "" {
				errs = append(errs, fmt.Errorf("%s[%d]: empty argument name", field, i))
				continue
			}
			out = append(out, n)
		}
		return out
	}
	g.sqlArgs = names("sql_arguments", cfg.SQLArguments)
	g.commandArgs = names("command_arguments", cfg.CommandArguments)
	g.urlArgs = names("url_arguments", cfg.URLArguments)
	if len(cfg.SQLArguments)+len(cfg.CommandArguments)+len(cfg.URLArguments) == 0 {
		errs = append(errs, errors.New("nothing to check: set sql_arguments, command_arguments or url_arguments"))
	}

	d, err := ParseDialect(cfg.SQLDialect)
	if err != nil {
		errs = append(errs, fmt.Errorf("sql_dialect: %w", err))
	}
	g.dialect = d
	if cfg.SQLDialect != "" && len(cfg.SQLArguments) == 0 {
		errs = append(errs, errors.New("sql_dialect is set but sql_arguments is empty"))
	}

	g.commands = map[string]bool{}
	for i, c := range cfg.Commands {
		if err := validCommandName(c); err != nil {
			errs = append(errs, fmt.Errorf("commands[%d]: %w", i, err))
			continue
		}
		g.commands[c] = true
	}
	switch {
	case len(cfg.CommandArguments) > 0 && len(cfg.Commands) == 0:
		errs = append(errs, errors.New("command_arguments is set but commands is empty: no command could pass"))
	case len(cfg.CommandArguments) == 0 && len(cfg.Commands) > 0:
		errs = append(errs, errors.New("commands is set but command_arguments is empty: nothing would be checked"))
	}

	for i, h := range cfg.Hosts {
		p, err := parseHostPattern(h)
		if err != nil {
			errs = append(errs, fmt.Errorf("hosts[%d]: %w", i, err))
			continue
		}
		g.hosts = append(g.hosts, p)
	}
	schemes := cfg.Schemes
	if len(schemes) == 0 {
		schemes = []string{"https", "http"}
	}
	for i, s := range schemes {
		if !validScheme(s) {
			errs = append(errs, fmt.Errorf("schemes[%d]: %q is not a URL scheme", i, s))
			continue
		}
		g.schemes = append(g.schemes, strings.ToLower(s))
	}
	switch {
	case len(cfg.URLArguments) > 0 && len(cfg.Hosts) == 0:
		errs = append(errs, errors.New("url_arguments is set but hosts is empty: no URL could pass"))
	case len(cfg.URLArguments) == 0 && (len(cfg.Hosts) > 0 || len(cfg.Schemes) > 0):
		errs = append(errs, errors.New("hosts or schemes is set but url_arguments is empty: nothing would be checked"))
	}

	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("guard config: %w", err)
	}
	return g, nil
}

// Violation is a refused argument. Its message is meant for the calling model: it says
// which argument and why, briefly.
type Violation struct {
	Argument string // the argument's name as sent; empty when the arguments as a whole are refused
	Reason   string
}

func (v *Violation) Error() string {
	if v.Argument == "" {
		return "guard: arguments refused: " + v.Reason
	}
	return "guard: argument " + excerpt(v.Argument) + " refused: " + v.Reason
}

// Check inspects a tool call's arguments (the JSON object "arguments" of tools/call, raw)
// and returns nil or a *Violation for the first violation in document order.
//
// A configured argument that is absent is fine; one that is present must be a JSON
// string (for URL arguments, a string or an array of strings, each checked). Member names
// are compared with the configured names ignoring case (as Go's encoding/json matches
// struct fields), and every occurrence of a duplicated member is checked, so a server
// that picks another spelling or another duplicate than the guard would still gets a
// checked value. Absent, empty or null arguments pass; anything else that is not one
// JSON object is refused.
func (g *Guard) Check(arguments []byte) error {
	if g == nil || (len(g.sqlArgs)+len(g.commandArgs)+len(g.urlArgs) == 0) {
		return &Violation{Reason: "the guard has no configuration"}
	}
	body := bytes.TrimSpace(arguments)
	if len(body) == 0 || string(body) == "null" {
		return nil
	}
	if !utf8.Valid(body) {
		return &Violation{Reason: "arguments are not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return &Violation{Reason: "arguments must be one JSON object"}
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return &Violation{Reason: "arguments are not valid JSON"}
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return &Violation{Reason: "arguments are not valid JSON"}
		}
		if v := g.checkMember(name, raw); v != nil {
			return v
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return &Violation{Reason: "arguments are not valid JSON"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Violation{Reason: "arguments must be one JSON object"}
	}
	return nil
}

// checkMember applies every check configured for name to its raw JSON value.
func (g *Guard) checkMember(name string, raw json.RawMessage) *Violation {
	if matchName(g.sqlArgs, name) {
		s, v := jsonString(name, raw, "an SQL query")
		if v != nil {
			return v
		}
		if err := ReadOnlySQLDialect(s, g.dialect); err != nil {
			return &Violation{Argument: name, Reason: err.Error()}
		}
	}
	if matchName(g.commandArgs, name) {
		s, v := jsonString(name, raw, "a command line")
		if v != nil {
			return v
		}
		if err := g.CheckCommand(s); err != nil {
			return &Violation{Argument: name, Reason: err.Error()}
		}
	}
	if matchName(g.urlArgs, name) {
		if bytes.HasPrefix(raw, []byte("[")) {
			var elems []json.RawMessage
			if err := json.Unmarshal(raw, &elems); err != nil {
				return &Violation{Argument: name, Reason: "must be a URL string or an array of URL strings"}
			}
			for i, e := range elems {
				s, v := jsonString(name, e, "a URL string")
				if v != nil {
					v.Reason = "element " + strconv.Itoa(i) + ": " + v.Reason
					return v
				}
				if err := g.CheckURL(s); err != nil {
					return &Violation{Argument: name, Reason: "element " + strconv.Itoa(i) + ": " + err.Error()}
				}
			}
			return nil
		}
		s, v := jsonString(name, raw, "a URL string or an array of URL strings")
		if v != nil {
			return v
		}
		if err := g.CheckURL(s); err != nil {
			return &Violation{Argument: name, Reason: err.Error()}
		}
	}
	return nil
}

// matchName reports whether a member name is one of the configured names, ignoring case.
func matchName(list []string, name string) bool {
	for _, n := range list {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// jsonString decodes a raw JSON value that must be a string. Escapes of unpaired UTF-16
// surrogates are refused: decoders disagree on them (Go substitutes U+FFFD, others keep
// them), so the guard would not see what the server sees.
func jsonString(name string, raw json.RawMessage, want string) (string, *Violation) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", &Violation{Argument: name, Reason: "must be " + want + ", not " + jsonKind(raw)}
	}
	if loneSurrogate(raw) {
		return "", &Violation{Argument: name, Reason: "contains an unpaired UTF-16 surrogate escape"}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &Violation{Argument: name, Reason: "is not a valid JSON string"}
	}
	return s, nil
}

// jsonKind names the JSON type of a raw value, for messages.
func jsonKind(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '"':
		return "a string"
	}
	return "a number"
}

// loneSurrogate reports whether a raw JSON string has a \u escape of a UTF-16 surrogate
// that is not a high surrogate directly followed by an escaped low one.
func loneSurrogate(raw []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // skip the escaped character (a quote or a backslash among them)
			continue
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			lo, ok := hex4(i + 6)
			if !ok || lo < 0xDC00 || lo >= 0xE000 {
				return true
			}
			i += 11
		case r >= 0xDC00 && r < 0xE000:
			return true
		default:
			i += 5
		}
	}
	return false
}

// Limits of what a message may quote of the input: bytes of input, characters of output.
const (
	maxExcerptIn  = 40
	maxExcerptOut = 60
)

// excerpt quotes the start of s: at most maxExcerptIn bytes of it and maxExcerptOut
// characters in all, every non-ASCII or non-printable character escaped, a cut marked
// with "...".
func excerpt(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		q := strconv.QuoteToASCII(s[i : i+size])
		q = q[1 : len(q)-1]
		if i+size > maxExcerptIn || b.Len()+len(q) > maxExcerptOut-1 {
			b.WriteString(`"...`)
			return b.String()
		}
		b.WriteString(q)
		i += size
	}
	b.WriteByte('"')
	return b.String()
}
