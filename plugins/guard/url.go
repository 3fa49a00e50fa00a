package guard

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxURL is the longest URL the guard reads.
const maxURL = 8 << 10

// defaultPorts are the ports a URL without one goes to, by scheme.
var defaultPorts = map[string]int{"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}

// CheckURL accepts an absolute URL whose scheme is in Schemes and whose host is in Hosts.
// It normalizes first, then matches; it never resolves the name, connects or follows
// redirects, so a name on the list is trusted to point where its owner says (DNS
// rebinding is the fetcher's business).
//
// Refused: text that is not valid UTF-8 or has whitespace, control or invisible (format)
// characters; a relative URL, or one without "//" after the scheme; a backslash or '%' in
// the authority (WHATWG parsers read '\' as '/', and a percent-encoded host is decoded
// differently by different parsers); user info ("user@", "user:pass@",
// "https://good.com@evil.com"); an empty host; an empty, zero-padded or out-of-range
// port; and what net/url cannot parse or splits differently.
//
// The host is normalized: lower case, one trailing dot dropped, IDNA to ASCII with the
// Lookup profile (the Unicode and xn-- forms of a name are the same host; an invalid or
// disallowed label is refused). IPv6 literals go in brackets, without zone; IPv4-mapped
// ones count as IPv4. A host whose last label is a number is an IPv4 address in any
// form a browser accepts (2130706433, 0177.0.0.1, 0x7f.1, 127.1), normalized to dotted
// quad and matched against the address and CIDR entries; one that does not parse is
// refused. Names match only name entries and addresses only address entries: nothing is
// resolved.
//
// Ports: an entry without a port allows the scheme's default port only (443 for https,
// 80 for http; written or not), so allowing a host does not open its other services; an
// entry with a port allows that port (written, or the scheme's default).
func (g *Guard) CheckURL(raw string) error {
	n, err := normalizeURL(raw)
	if err != nil {
		return fmt.Errorf("URL %s refused: %w", excerpt(raw), err)
	}
	if g == nil || !slices.Contains(g.schemes, n.scheme) {
		allowed := "none"
		if g != nil {
			allowed = strings.Join(g.schemes, ", ")
		}
		return fmt.Errorf("URL scheme %s is not allowed (allowed: %s)", excerpt(n.scheme), allowed)
	}
	hostMatched := false
	for i := range g.hosts {
		p := &g.hosts[i]
		if !p.matchHost(n.name, n.addr) {
			continue
		}
		hostMatched = true
		if portAllowed(p.port, n.scheme, n.port) {
			return nil
		}
	}
	if hostMatched {
		return fmt.Errorf("URL port %d of host %s is not allowed", n.effectivePort(), excerpt(n.host()))
	}
	return fmt.Errorf("URL host %s is not in the allowed hosts", excerpt(n.host()))
}

// portAllowed reports whether a URL's port (0: none written) passes an entry's port (0:
// the scheme's default only).
func portAllowed(entry int, scheme string, port int) bool {
	def := defaultPorts[scheme]
	if entry == 0 {
		return port == 0 || def != 0 && port == def
	}
	if port == 0 {
		port = def
	}
	return port == entry
}

// normURL is what CheckURL matches: the scheme, the normalized host and the port.
type normURL struct {
	scheme string
	name   string     // a normalized DNS name, or empty when addr is set
	addr   netip.Addr // an IP address (IPv4-mapped IPv6 unmapped)
	port   int        // the port written in the URL; 0 if none
}

// host renders the normalized host as it would be written in a URL.
func (n normURL) host() string {
	switch {
	case !n.addr.IsValid():
		return n.name
	case n.addr.Is6():
		return "[" + n.addr.String() + "]"
	}
	return n.addr.String()
}

// effectivePort is the written port or the scheme's default (0 if neither).
func (n normURL) effectivePort() int {
	if n.port != 0 {
		return n.port
	}
	return defaultPorts[n.scheme]
}

// normalizeURL checks a raw URL and returns its scheme, normalized host and port.
func normalizeURL(raw string) (normURL, error) {
	var n normURL
	if len(raw) > maxURL {
		return n, fmt.Errorf("longer than %d bytes", maxURL)
	}
	if !utf8.ValidString(raw) {
		return n, errors.New("not valid UTF-8")
	}
	for _, r := range raw {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return n, fmt.Errorf("contains whitespace or an invisible character %U", r)
		}
	}
	colon := strings.IndexByte(raw, ':')
	if colon <= 0 || !validScheme(raw[:colon]) {
		return n, errors.New("not an absolute URL (scheme://host/...)")
	}
	n.scheme = strings.ToLower(raw[:colon])
	rest, ok := strings.CutPrefix(raw[colon+1:], "//")
	if !ok {
		return n, errors.New("no //host after the scheme")
	}
	authority := rest
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		authority = rest[:end]
	}
	switch {
	case strings.Contains(authority, `\`):
		return n, errors.New("backslash before the path")
	case strings.Contains(authority, "@"):
		return n, errors.New("user info (user@ or user:password@) is not allowed; send the URL without credentials")
	case strings.Contains(authority, "%"):
		return n, errors.New("percent-encoded host")
	case authority == "":
		return n, errors.New("empty host")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return n, errors.New("not a valid URL")
	}
	if u.Opaque != "" || u.User != nil || u.Host != authority || !strings.EqualFold(u.Scheme, n.scheme) {
		return n, errors.New("ambiguous URL (parsers would disagree on its host)")
	}

	host, port, hasPort := authority, "", false
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return n, errors.New("unterminated IPv6 literal")
		}
		host, port = authority[1:end], authority[end+1:]
		if port != "" {
			if port[0] != ':' {
				return n, errors.New("unexpected text after the IPv6 literal")
			}
			port, hasPort = port[1:], true
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return n, errors.New("brackets must hold an IPv6 address without zone")
		}
		n.addr = a.Unmap()
	} else {
		if c := strings.IndexByte(authority, ':'); c >= 0 {
			host, port, hasPort = authority[:c], authority[c+1:], true
		}
		name, addr, err := normalizeHost(host)
		if err != nil {
			return n, err
		}
		n.name, n.addr = name, addr
	}
	if hasPort {
		p, err := parsePort(port)
		if err != nil {
			return n, err
		}
		n.port = p
	}
	return n, nil
}

// validScheme reports whether s is a URL scheme: a letter, then letters, digits, + - .
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(isDigit(c) || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// String renders the normalized URL's origin, for tests and messages.
func (n normURL) String() string {
	s := n.scheme + "://" + n.host()
	if n.port != 0 {
		s += ":" + strconv.Itoa(n.port)
	}
	return s
}
