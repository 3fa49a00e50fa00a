package mcp

import (
	"errors"
	"net/url"
	"slices"
	"strings"
)

// Resource URIs are compared, matched against policy rules and forwarded in one canonical
// form, so that no spelling of a URI reaches an upstream that the policy did not decide
// on: file:///srv/public/../secret, file:///srv/./secret and file:///srv/%73ecret all
// name file:///srv/secret.

// ErrAmbiguousURI is wrapped by NormalizeURI's errors: the URI is malformed, or could
// name different resources to different readers.
var ErrAmbiguousURI = errors.New("ambiguous or malformed URI")

// NormalizeURI returns the RFC 3986 §6.2.2 syntax-based normal form of an absolute URI:
// scheme and host in lower case, percent-encodings in upper case, unreserved characters
// decoded (%73 → s, %2E → .), and "." and ".." segments removed from the path; also an
// empty port (host:) is dropped and an empty path after an authority becomes "/" for http
// and https (§6.2.3). Characters outside ASCII are left as they are.
//
// It refuses, wrapping ErrAmbiguousURI, what it cannot vouch for: a "%" not followed by
// two hex digits, an encoded NUL, and a path whose dot segments are hidden behind encoded
// or backslash separators (public%2F..%2Fsecret, a\..\b), which a reader that decodes
// them before resolving the path would climb out of. A string without a scheme is
// returned unchanged (it is not an absolute URI; rules then see it as it is).
func NormalizeURI(s string) (string, error) {
	colon := strings.IndexByte(s, ':')
	if colon <= 0 || !validScheme(s[:colon]) {
		return s, nil
	}
	if err := checkPercent(s); err != nil {
		return "", err
	}
	scheme := strings.ToLower(s[:colon])
	rest := s[colon+1:]
	var fragment, query string
	hasFragment, hasQuery := false, false
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest, fragment, hasFragment = rest[:i], rest[i+1:], true
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query, hasQuery = rest[:i], rest[i+1:], true
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(scheme)
	b.WriteByte(':')
	p := rest
	hasAuthority := strings.HasPrefix(rest, "//")
	if hasAuthority {
		auth := rest[2:]
		if i := strings.IndexByte(auth, '/'); i >= 0 {
			auth, p = auth[:i], auth[i:]
		} else {
			p = ""
		}
		b.WriteString("//")
		b.WriteString(normalizeAuthority(auth))
		if p == "" && (scheme == "http" || scheme == "https") {
			p = "/"
		}
	}
	p = normalizePercent(p)
	if hiddenDotSegments(p) {
		return "", errAmbiguous("a dot segment behind an encoded or backslash separator")
	}
	if hasAuthority || strings.HasPrefix(p, "/") {
		p = RemoveDotSegments(p)
	}
	if !hasAuthority && strings.HasPrefix(p, "//") {
		return "", errAmbiguous("a path that would read as an authority")
	}
	b.WriteString(p)
	if hasQuery {
		b.WriteByte('?')
		b.WriteString(normalizePercent(query))
	}
	if hasFragment {
		b.WriteByte('#')
		b.WriteString(normalizePercent(fragment))
	}
	return b.String(), nil
}

func errAmbiguous(why string) error {
	return &uriError{why}
}

type uriError struct{ why string }

func (e *uriError) Error() string        { return "ambiguous or malformed URI: " + e.why }
func (e *uriError) Is(target error) bool { return target == ErrAmbiguousURI }

// validScheme reports whether s is ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// checkPercent refuses a "%" not followed by two hex digits, and an encoded NUL.
func checkPercent(s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return errAmbiguous("a % not followed by two hex digits")
		}
		if s[i+1] == '0' && s[i+2] == '0' {
			return errAmbiguous("an encoded NUL (%00)")
		}
		i += 2
	}
	return nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// normalizePercent decodes percent-encoded unreserved characters and upper-cases the hex
// digits of the others. The input has passed checkPercent.
func normalizePercent(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	const hexdigits = "0123456789ABCDEF"
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		c := unhex(s[i+1])<<4 | unhex(s[i+2])
		if unreserved(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hexdigits[c>>4], hexdigits[c&15])
		}
		i += 2
	}
	return string(b)
}

// normalizeAuthority lower-cases the host (not the userinfo), normalizes its
// percent-encodings and drops an empty port.
func normalizeAuthority(a string) string {
	userinfo := ""
	if i := strings.LastIndexByte(a, '@'); i >= 0 {
		userinfo, a = a[:i+1], a[i+1:]
	}
	a = strings.TrimRight(a, ":") // an empty port
	host, port := a, ""
	if i := strings.LastIndexByte(a, ':'); i >= 0 && !strings.Contains(a[i:], "]") {
		host, port = a[:i], a[i:]
	}
	return normalizePercent(userinfo) + lowerOutsidePercent(normalizePercent(host)) + port
}

// lowerOutsidePercent lower-cases s but for the hex digits of its percent-encodings.
func lowerOutsidePercent(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '%':
			i += 2
		case 'A' <= c && c <= 'Z':
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// hiddenDotSegments reports whether p (percent-encodings already normalized) has a "."
// or ".." segment bounded by an encoded separator (%2F, %5C) or a backslash: a reader
// that decodes separators before resolving the path would climb where the plain path,
// as matched, does not.
func hiddenDotSegments(p string) bool {
	if !strings.Contains(p, "%2F") && !strings.Contains(p, "%5C") && !strings.ContainsRune(p, '\\') {
		return false
	}
	start, encLeft := 0, false
	for i := 0; i <= len(p); i++ {
		sep, encoded, width := i == len(p), false, 1
		switch {
		case sep:
		case p[i] == '/':
			sep = true
		case p[i] == '\\':
			sep, encoded = true, true
		case p[i] == '%' && (strings.HasPrefix(p[i:], "%2F") || strings.HasPrefix(p[i:], "%5C")):
			sep, encoded, width = true, true, 3
		}
		if !sep {
			continue
		}
		if seg := p[start:i]; (seg == "." || seg == "..") && (encLeft || encoded) {
			return true
		}
		start, encLeft = i+width, encoded
		i += width - 1
	}
	return false
}

// RemoveDotSegments is RFC 3986 §5.2.4's algorithm: "." and ".." segments removed from a
// path, ".." never climbing above the root.
func RemoveDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	in := p
	out := make([]string, 0, strings.Count(p, "/")+1)
	abs := strings.HasPrefix(in, "/")
	if abs {
		in = in[1:]
	}
	segs := strings.Split(in, "/")
	for i, seg := range segs {
		last := i == len(segs)-1
		switch seg {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	res := strings.Join(out, "/")
	if abs {
		return "/" + res
	}
	return res
}

// URIForms returns the spellings of a resource URI that policy rules must see besides
// the URI itself: its normal form, and the normal form with the path fully
// percent-decoded and backslashes read as "/" (what a file server acts on when it
// decodes %2F). A URI that cannot be normalized has no other forms (it is refused
// before it is routed). Duplicates and uri itself are left out.
func URIForms(uri string) []string {
	n, err := NormalizeURI(uri)
	if err != nil {
		return nil
	}
	var forms []string
	add := func(f string) {
		if f != uri && !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	add(n)
	if strings.ContainsAny(n, `%\`) {
		if d, err := url.PathUnescape(n); err == nil {
			add(strings.ReplaceAll(d, `\`, "/"))
		}
	}
	return forms
}
