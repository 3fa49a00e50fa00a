package guard

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Host names and addresses: one normalization for the configured patterns and the URLs
// they are matched against, so the two can only meet in canonical form.

// hostKind is what a normalized host or pattern is.
type hostKind uint8

const (
	kindName     hostKind = iota // a DNS name, lower-case ASCII (IDNs in xn-- form)
	kindWildcard                 // *.suffix: strict subdomains of a name
	kindAddr                     // one IP address
	kindPrefix                   // a CIDR block
)

// hostPattern is one entry of Config.Hosts.
type hostPattern struct {
	src    string
	kind   hostKind
	name   string       // kindName: the name; kindWildcard: the suffix, without "*."
	addr   netip.Addr   // kindAddr
	prefix netip.Prefix // kindPrefix
	port   int          // 0: the scheme's default port only
}

// parseHostPattern parses and normalizes one configured host: "name", "*.name", an IPv4
// address in dotted-quad form, an IPv6 address ("::1" or "[::1]"), a CIDR block
// ("10.0.0.0/8", "fd00::/8"), each with an optional ":port" ("[::1]:8080",
// "10.0.0.0/8:443").
func parseHostPattern(src string) (hostPattern, error) {
	p := hostPattern{src: src}
	if src == "" {
		return p, errors.New("empty host")
	}
	for _, r := range src {
		if r <= ' ' || r == 0x7f || r == '%' || r == '@' || r == '\\' {
			return p, fmt.Errorf("host %q contains %q", src, r)
		}
	}
	host, port, hasPort := src, "", false
	switch {
	case strings.HasPrefix(src, "["):
		end := strings.IndexByte(src, ']')
		if end < 0 {
			return p, fmt.Errorf("host %q: missing ']'", src)
		}
		host, port = src[1:end], src[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return p, fmt.Errorf("host %q: unexpected text after ']'", src)
		}
		port, hasPort = strings.TrimPrefix(port, ":"), port != ""
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return p, fmt.Errorf("host %q: brackets hold an IPv6 address without zone", src)
		}
		p.kind, p.addr = kindAddr, a.Unmap()
	case strings.Contains(src, "/"):
		slash := strings.IndexByte(src, '/')
		bits := src[slash+1:]
		if c := strings.IndexByte(bits, ':'); c >= 0 {
			bits, port, hasPort = bits[:c], bits[c+1:], true
		}
		pre, err := netip.ParsePrefix(src[:slash] + "/" + bits)
		if err != nil || pre.Addr().Zone() != "" {
			return p, fmt.Errorf("host %q is not a CIDR block", src)
		}
		if pre != pre.Masked() {
			return p, fmt.Errorf("host %q has bits set past the prefix length; did you mean %s?", src, pre.Masked())
		}
		if pre.Addr().Is4In6() && pre.Bits() >= 96 {
			pre = netip.PrefixFrom(pre.Addr().Unmap(), pre.Bits()-96)
		}
		p.kind, p.prefix = kindPrefix, pre
	case strings.Count(src, ":") > 1:
		a, err := netip.ParseAddr(src)
		if err != nil || a.Zone() != "" {
			return p, fmt.Errorf("host %q is not an IPv6 address (write [addr]:port for a port)", src)
		}
		p.kind, p.addr = kindAddr, a.Unmap()
	default:
		if c := strings.IndexByte(src, ':'); c >= 0 {
			host, port, hasPort = src[:c], src[c+1:], true
		}
		wild := strings.HasPrefix(host, "*.")
		if wild {
			host = host[2:]
		}
		if strings.Contains(host, "*") {
			return p, fmt.Errorf("host %q: '*' may only stand first, as in *.example.com", src)
		}
		n, a, err := normalizeHost(host)
		if err != nil {
			return p, fmt.Errorf("host %q: %w", src, err)
		}
		switch {
		case a.IsValid() && wild:
			return p, fmt.Errorf("host %q: a wildcard needs a name; use CIDR for addresses", src)
		case a.IsValid() && a.String() != strings.TrimSuffix(host, "."):
			return p, fmt.Errorf("host %q: write IPv4 addresses as dotted quads (%s)", src, a)
		case a.IsValid():
			p.kind, p.addr = kindAddr, a
		case wild:
			p.kind, p.name = kindWildcard, n
		default:
			p.kind, p.name = kindName, n
		}
	}
	if hasPort {
		n, err := parsePort(port)
		if err != nil {
			return p, fmt.Errorf("host %q: %w", src, err)
		}
		p.port = n
	}
	return p, nil
}

// parsePort parses a decimal port 1-65535 without sign or leading zeros.
func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || s[0] == '0' || s[0] == '+' {
		return 0, fmt.Errorf("port %s is not a number from 1 to 65535 without leading zeros", excerpt(s))
	}
	return n, nil
}

// matchHost reports whether a normalized host (name or address) matches the pattern's
// host part, ignoring ports.
func (p *hostPattern) matchHost(name string, addr netip.Addr) bool {
	switch p.kind {
	case kindName:
		return !addr.IsValid() && name == p.name
	case kindWildcard:
		return !addr.IsValid() && len(name) > len(p.name)+1 && strings.HasSuffix(name, "."+p.name)
	case kindAddr:
		return addr.IsValid() && addr == p.addr
	case kindPrefix:
		return addr.IsValid() && p.prefix.Contains(addr)
	}
	return false
}

// maxHost bounds a host before normalization (a DNS name has at most 253 characters; an
// IDN in Unicode may be longer in bytes than its ASCII form).
const maxHost = 1024

// normalizeHost normalizes a host that is not a bracketed IPv6 literal: strips one
// trailing dot, maps it to ASCII with IDNA (the Lookup profile: lower case, Unicode
// normalization, punycode; an invalid label is an error), and reads it as an IPv4 address
// when its last label is a number, in every form a WHATWG URL parser accepts (decimal
// 2130706433, octal 0177.0.0.1, hex 0x7f.1, short 127.1), returned as addr. Otherwise it
// returns the name, which then is only lower-case letters, digits, '-' and '.', in labels
// of 1 to 63 characters, 253 in all.
func normalizeHost(host string) (name string, addr netip.Addr, err error) {
	if len(host) > maxHost {
		return "", addr, errors.New("host name too long")
	}
	h := strings.TrimSuffix(host, ".")
	if h == "" {
		return "", addr, errors.New("empty host")
	}
	if strings.HasSuffix(h, ".") {
		return "", addr, errors.New("host ends in an empty label")
	}
	a, err := idna.Lookup.ToASCII(h)
	if err != nil {
		return "", addr, fmt.Errorf("host is not a valid (internationalized) domain name")
	}
	if a == "" || len(a) > 253 {
		return "", addr, errors.New("host name is empty or longer than 253 characters")
	}
	labels := strings.Split(a, ".")
	if last := labels[len(labels)-1]; endsInNumber(last) {
		ip, ok := parseIPv4Loose(labels)
		if !ok {
			return "", addr, errors.New("host ends in a number but is not an IPv4 address")
		}
		return "", ip, nil
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", addr, errors.New("host has an empty label or one longer than 63 characters")
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", addr, fmt.Errorf("host contains %q", c)
			}
		}
	}
	return a, addr, nil
}

// endsInNumber is the WHATWG test that makes a host an IPv4 address: its last label is
// all digits, or 0x/0X and hex digits (possibly none).
func endsInNumber(l string) bool {
	if l == "" {
		return false
	}
	if strings.HasPrefix(l, "0x") || strings.HasPrefix(l, "0X") {
		for i := 2; i < len(l); i++ {
			if !isHex(l[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if !isDigit(l[i]) {
			return false
		}
	}
	return true
}

// parseIPv4Loose is the WHATWG IPv4 parser: one to four parts, each decimal, octal
// (leading 0) or hex (0x); all but the last at most 255; the last fills the remaining
// bytes.
func parseIPv4Loose(parts []string) (netip.Addr, bool) {
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums []uint64
	for _, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums = append(nums, n)
	}
	for _, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v := last
	for i, n := range nums[:len(nums)-1] {
		v += n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseIPv4Number parses one part of a WHATWG IPv4 address.
func parseIPv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	switch {
	case strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"):
		s, base = s[2:], 16
		if s == "" {
			return 0, true
		}
	case len(s) > 1 && s[0] == '0':
		s, base = s[1:], 8
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(base == 16 && isHex(c) || c >= '0' && int(c-'0') < base) {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, base, 64)
	return n, err == nil
}
