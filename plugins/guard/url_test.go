package guard

import (
	"strings"
	"testing"
)

func urlGuard(t testing.TB, schemes []string, hosts ...string) *Guard {
	t.Helper()
	g, err := New(Config{URLArguments: []string{"url"}, Hosts: hosts, Schemes: schemes})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestCheckURL(t *testing.T) {
	g := urlGuard(t, nil,
		"api.github.com", "*.example.com", "127.0.0.1", "10.0.0.0/8", "[::1]", "fd00::/8",
		"localhost:8080", "xn--bcher-kva.de", "münchen.de", "internal.test:8443", "192.168.1.0/24:9000")
	tests := []struct {
		name string
		url  string
		want string // "" accepted; else a substring of the refusal
	}{
		// Accepted.
		{"exact host", "https://api.github.com/x", ""},
		{"case and trailing dot", "https://API.GitHub.com./", ""},
		{"upper-case scheme", "HTTPS://api.github.com/repos?x=1#frag", ""},
		{"http default port", "http://api.github.com/", ""},
		{"explicit default port", "https://api.github.com:443/x", ""},
		{"explicit http default port", "http://api.github.com:80/x", ""},
		{"wildcard subdomain", "https://a.example.com/", ""},
		{"wildcard deep subdomain", "https://a.b.example.com/", ""},
		{"no path", "https://api.github.com", ""},
		{"ipv4", "http://127.0.0.1/", ""},
		{"ipv4 hex", "http://0x7f000001/", ""},
		{"ipv4 decimal", "http://2130706433/", ""},
		{"ipv4 octal", "http://0177.0.0.1/", ""},
		{"ipv4 short", "http://127.1/", ""},
		{"ipv4 mixed short hex", "http://0x7f.1/", ""},
		{"ipv4 trailing dot", "http://127.0.0.1./", ""},
		{"cidr", "http://10.20.30.40/", ""},
		{"cidr short form", "http://10.1/", ""},
		{"ipv6 loopback", "http://[::1]/", ""},
		{"ipv6 long form", "http://[0:0:0:0:0:0:0:1]/", ""},
		{"ipv6 cidr", "https://[fd12:3456::1]/", ""},
		{"ipv4-mapped ipv6", "http://[::ffff:127.0.0.1]/", ""},
		{"ipv4-mapped ipv6 in cidr", "http://[::ffff:a00:1]/", ""},
		{"entry with port", "http://localhost:8080/", ""},
		{"entry with port and cidr", "http://192.168.1.7:9000/", ""},
		{"entry with port equals default", "https://internal.test:8443/", ""},
		{"punycode entry, unicode url", "https://bücher.de/", ""},
		{"punycode entry, punycode url", "https://xn--bcher-kva.de/", ""},
		{"unicode entry, punycode url", "https://xn--mnchen-3ya.de/", ""},
		{"unicode entry, upper-case unicode url", "https://MÜNCHEN.de/", ""},
		{"fullwidth dots map to dots", "https://api\u3002github\u3002com/", ""},
		{"backslash in path is fine", `https://api.github.com/a\b`, ""},
		{"at sign in path", "https://api.github.com/@evil.com", ""},

		// Refused: host.
		{"suffix attack", "https://api.github.com.evil.com/", "not in the allowed hosts"},
		{"fragment trick", "https://evil.com#@api.github.com", `host "evil.com" is not in the allowed hosts`},
		{"userinfo trick", "https://api.github.com@evil.com/", "user info"},
		{"user and password", "https://user:pass@api.github.com/", "user info"},
		{"empty userinfo", "https://@api.github.com/", "user info"},
		{"wildcard apex", "https://example.com/", "not in the allowed hosts"},
		{"wildcard lookalike", "https://badexample.com/", "not in the allowed hosts"},
		{"wildcard lookalike subdomain", "https://a.badexample.com/", "not in the allowed hosts"},
		{"other ipv4", "http://127.0.0.2/", "not in the allowed hosts"},
		{"hex other ipv4", "http://0x7f000002/", `host "127.0.0.2"`},
		{"ipv4 out of range", "http://256.0.0.1/", "not an IPv4 address"},
		{"ipv4 too many parts", "http://1.2.3.4.5/", "not an IPv4 address"},
		{"bad octal", "http://08.0.0.1/", "not an IPv4 address"},
		{"numeric tld", "http://example.123/", "not an IPv4 address"},
		{"ipv4 in brackets", "http://[127.0.0.1]/", "not a valid URL"},
		{"ipv6 zone", "http://[fe80::1%25eth0]/", "percent-encoded"},
		{"other ipv6", "http://[::2]/", "not in the allowed hosts"},
		{"name is never resolved", "http://localtest.me/", "not in the allowed hosts"},
		{"percent-encoded host", "https://%61pi.github.com/", "percent-encoded"},
		{"invalid punycode", "https://xn--a.com/", "not a valid (internationalized) domain name"},
		{"underscore", "https://a_b.example.com/", "not a valid"},
		{"empty label", "https://a..example.com/", "empty label"},
		{"double trailing dot", "https://api.github.com../", "empty label"},
		{"only a dot", "https://./", "empty host"},
		{"cyrillic lookalike", "https://аpi.github.com/", "not in the allowed hosts"},
		{"label too long", "https://" + strings.Repeat("a", 64) + ".example.com/", "longer than 63"},

		// Refused: ports.
		{"other port", "https://api.github.com:8443/", "port 8443 of host"},
		{"http port on https", "https://api.github.com:80/", "port 80 of host"},
		{"entry port, url default", "http://localhost/", "port 80 of host"},
		{"entry port, other port", "http://localhost:8081/", "port 8081"},
		{"empty port", "https://api.github.com:/", "port"},
		{"zero-padded port", "https://api.github.com:0443/", "leading zeros"},
		{"port zero", "https://api.github.com:0/", "port"},
		{"port too big", "https://api.github.com:65536/", "from 1 to 65535"},

		// Refused: form.
		{"scheme not allowed", "ftp://api.github.com/", `scheme "ftp" is not allowed (allowed: https, http)`},
		{"javascript", "javascript:alert(1)", "no //host"},
		{"file", "file:///etc/passwd", "empty host"},
		{"relative", "/x/y", "not an absolute URL"},
		{"scheme-relative", "//api.github.com/x", "not an absolute URL"},
		{"no slashes", "https:api.github.com", "no //host"},
		{"one slash", "https:/api.github.com", "no //host"},
		{"three slashes", "https:///api.github.com", "empty host"},
		{"backslash authority", `https://evil.com\@api.github.com`, "backslash"},
		{"backslash host end", `https://evil.com\.api.github.com/`, "backslash"},
		{"backslashes for slashes", `https:\\api.github.com`, "no //host"},
		{"space", "https://api.github.com/a b", "whitespace"},
		{"tab in host", "https://api.git\thub.com/", "whitespace"},
		{"newline", "https://api.github.com/\n", "whitespace"},
		{"nul", "https://api.github.com\x00.evil.com/", "whitespace or an invisible"},
		{"zero-width space", "https://api.git\u200bhub.com/", "invisible"},
		{"invalid utf-8", "https://api.github.com/\xff", "UTF-8"},
		{"empty", "", "not an absolute URL"},
		{"too long", "https://api.github.com/" + strings.Repeat("a", maxURL), "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := g.CheckURL(tt.url)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused, want accepted: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("accepted, want refusal containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("refusal %q does not contain %q", err, tt.want)
			}
			if err != nil && len(err.Error()) > 250 {
				t.Errorf("refusal is %d bytes long: %v", len(err.Error()), err)
			}
		})
	}
}

// TestCheckURLSchemes: configured schemes replace the default and compare in lower case;
// a scheme without a known default port needs an entry with a port.
func TestCheckURLSchemes(t *testing.T) {
	g := urlGuard(t, []string{"HTTPS", "wss", "git+ssh"}, "example.org", "example.net:22")
	for url, ok := range map[string]bool{
		"https://example.org/":        true,
		"http://example.org/":         false,
		"wss://example.org/socket":    true,
		"wss://example.org:443/":      true,
		"git+ssh://example.net/repo":  false, // no default port for git+ssh: the entry's :22 is not implied
		"git+ssh://example.net:22/r":  true,
		"git+ssh://example.org:22/r":  false,
		"GIT+SSH://example.net:22/r":  true,
		"https://example.net:22/x":    true, // the entry names a port, whatever the scheme
		"https://example.net/x":       false,
		"ftp://example.org/":          false,
		"https+evil://example.org/":   false,
		"https://example.org:443/foo": true,
	} {
		if err := g.CheckURL(url); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", url, err, ok)
		}
	}
}

// TestNormalizeURL: the normalized origin of accepted URLs.
func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"HTTPS://API.GitHub.com.:443/x":  "https://api.github.com:443",
		"http://0x7f.1/":                 "http://127.0.0.1",
		"http://0300.0250.1.1":           "http://192.168.1.1",
		"http://3232235777/":             "http://192.168.1.1",
		"http://192.168.257/":            "http://192.168.1.1",
		"http://0x0/":                    "http://0.0.0.0",
		"http://0x/":                     "http://0.0.0.0",
		"http://[0::FFFF:7F00:1]:8080/":  "http://127.0.0.1:8080",
		"http://[2001:DB8:0:0::1]/":      "http://[2001:db8::1]",
		"https://Bücher.DE/":             "https://xn--bcher-kva.de",
		"https://faß.de/":                "https://xn--fa-hia.de",
		"https://\uff41pi.example.com/":  "https://api.example.com",
		"https://a-b.c0.example.com/x?y": "https://a-b.c0.example.com",
	} {
		n, err := normalizeURL(in)
		if err != nil || n.String() != want {
			t.Errorf("normalizeURL(%q) = %s, %v; want %s", in, n, err, want)
		}
	}
}

func TestParseHostPattern(t *testing.T) {
	for src, want := range map[string]hostPattern{
		"api.github.com":      {kind: kindName, name: "api.github.com"},
		"API.GitHub.com.":     {kind: kindName, name: "api.github.com"},
		"api.github.com:8443": {kind: kindName, name: "api.github.com", port: 8443},
		"*.example.com":       {kind: kindWildcard, name: "example.com"},
		"*.Bücher.de:443":     {kind: kindWildcard, name: "xn--bcher-kva.de", port: 443},
		"localhost":           {kind: kindName, name: "localhost"},
	} {
		got, err := parseHostPattern(src)
		if err != nil || got.kind != want.kind || got.name != want.name || got.port != want.port {
			t.Errorf("parseHostPattern(%q) = %+v, %v; want %+v", src, got, err, want)
		}
	}
	for src, want := range map[string]string{
		"127.0.0.1":          "127.0.0.1",
		"127.0.0.1:8080":     "127.0.0.1",
		"[::1]":              "::1",
		"[::1]:8080":         "::1",
		"::1":                "::1",
		"fe80::":             "fe80::",
		"[::ffff:127.0.0.1]": "127.0.0.1",
	} {
		got, err := parseHostPattern(src)
		if err != nil || got.kind != kindAddr || got.addr.String() != want {
			t.Errorf("parseHostPattern(%q) = %+v, %v; want address %s", src, got, err, want)
		}
	}
	for src, want := range map[string]string{
		"10.0.0.0/8":            "10.0.0.0/8",
		"10.0.0.0/8:443":        "10.0.0.0/8",
		"fd00::/8":              "fd00::/8",
		"fd00::/8:8080":         "fd00::/8",
		"::ffff:10.0.0.0/104":   "10.0.0.0/8",
		"0.0.0.0/0":             "0.0.0.0/0",
		"2001:db8::/32":         "2001:db8::/32",
		"192.168.1.0/24:65535":  "192.168.1.0/24",
		"192.168.100.0/22:9000": "192.168.100.0/22",
	} {
		got, err := parseHostPattern(src)
		if err != nil || got.kind != kindPrefix || got.prefix.String() != want {
			t.Errorf("parseHostPattern(%q) = %+v, %v; want prefix %s", src, got, err, want)
		}
	}
	for _, src := range []string{
		"", " api.github.com", "api.github.com/", "*", "*.", "*example.com", "a.*.com", "*.*.com",
		"api.github.com:", "api.github.com:0", "api.github.com:0443", "api.github.com:65536", "api.github.com:x",
		"127.1", "0x7f000001", "0177.0.0.1", "*.127.0.0.1", "256.0.0.1", "1.2.3.4.5",
		"10.0.0.1/8", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/8:", "[::1", "[::1]x", "[127.0.0.1]", "[fe80::1%eth0]",
		"fe80::1%eth0", "::1:8080x", "user@host", "a_b.com", "xn--a.com", "a..b", "%61.com", `a\b`,
	} {
		if p, err := parseHostPattern(src); err == nil {
			t.Errorf("parseHostPattern(%q) = %+v, want an error", src, p)
		}
	}
}

func TestPortAllowed(t *testing.T) {
	tests := []struct {
		entry  int
		scheme string
		port   int
		want   bool
	}{
		{0, "https", 0, true},
		{0, "https", 443, true},
		{0, "https", 80, false},
		{0, "http", 80, true},
		{0, "http", 8080, false},
		{0, "git", 0, true},
		{0, "git", 9418, false},
		{8080, "http", 8080, true},
		{8080, "http", 0, false},
		{443, "https", 0, true},
		{22, "git", 0, false},
		{22, "git", 22, true},
	}
	for _, tt := range tests {
		if got := portAllowed(tt.entry, tt.scheme, tt.port); got != tt.want {
			t.Errorf("portAllowed(%d, %s, %d) = %v", tt.entry, tt.scheme, tt.port, got)
		}
	}
}
