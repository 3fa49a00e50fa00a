package mcp

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalizeURI(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"file:///srv/secret/key.txt", "file:///srv/secret/key.txt"},
		{"file:///srv/public/../secret/key.txt", "file:///srv/secret/key.txt"},
		{"file:///srv/./secret/key.txt", "file:///srv/secret/key.txt"},
		{"file:///srv/%73ecret/key.txt", "file:///srv/secret/key.txt"},
		{"file:///srv/%2e%2e/etc/passwd", "file:///etc/passwd"},
		{"file:///srv/.%2E/etc/passwd", "file:///etc/passwd"},
		{"file:///../../etc/passwd", "file:///etc/passwd"},
		{"FILE:///srv/x", "file:///srv/x"},
		{"HTTP://Example.COM", "http://example.com/"},
		{"http://User@Example.COM:/a/b/../c?q=%7e#f", "http://User@example.com/a/c?q=~#f"},
		{"https://[::1]:8443/x", "https://[::1]:8443/x"},
		{"test://static/resource/%3a1", "test://static/resource/%3A1"},
		{"test://template/a%2Fb/data", "test://template/a%2Fb/data"}, // an encoded slash in a value stays
		{"http://EX%41MPLE%2fcom/", "http://example%2Fcom/"},
		{"urn:isbn:0451450523", "urn:isbn:0451450523"},
		{"mcp-proxy://b/file%3A%2F%2F%2Fx", "mcp-proxy://b/file%3A%2F%2F%2Fx"},
		{"no-scheme/../x", "no-scheme/../x"}, // not an absolute URI: as it is
		{"file:///a/b/.", "file:///a/b/"},
		{"file:///a/b/..", "file:///a/"},
		{"file:///a//b/./c", "file:///a//b/c"},
		{"file:///café/../x", "file:///x"},
	} {
		got, err := NormalizeURI(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormalizeURI(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestNormalizeURIRefusesAmbiguous(t *testing.T) {
	for _, in := range []string{
		"file:///srv/public%2F..%2Fsecret/key.txt",
		"file:///srv/public%2f..%2fsecret/key.txt",
		"file:///srv/public/..%2Fsecret",
		"file:///srv/public%5C..%5Csecret",
		`file:///srv/public\..\secret`,
		"file:///srv/x%00.txt",
		"file:///srv/x%zz",
		"file:///srv/x%4",
	} {
		if got, err := NormalizeURI(in); !errors.Is(err, ErrAmbiguousURI) {
			t.Errorf("NormalizeURI(%q) = %q, %v; want ErrAmbiguousURI", in, got, err)
		}
	}
}

func TestRemoveDotSegments(t *testing.T) {
	// RFC 3986 §5.4's examples, applied to the merged paths.
	for in, want := range map[string]string{
		"/a/b/c/./../../g":   "/a/g",
		"mid/content=5/../6": "mid/6",
		"/b/c/./g":           "/b/c/g",
		"/b/c/g/.":           "/b/c/g/",
		"/b/c/..":            "/b/",
		"/b/c/../..":         "/",
		"/../g":              "/g",
		"/.":                 "/",
		"/a.b/..c/d..":       "/a.b/..c/d..",
	} {
		if got := RemoveDotSegments(in); got != want {
			t.Errorf("RemoveDotSegments(%q) = %q; want %q", in, got, want)
		}
	}
}

// FuzzNormalizeURI: the normal form is a fixed point, has no dot segment in an
// authority-based path, and never holds an encoding of an unreserved character.
func FuzzNormalizeURI(f *testing.F) {
	for _, s := range []string{"file:///srv/public/../secret", "file:///srv/%2e%2E/x", "HTTP://A.b:/c/./d?%7e#%41",
		"test://x/a%2Fb", "mcp-proxy://u/file%3A%2F%2F%2Fa", "a:b/../c", `file:///a\b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := NormalizeURI(s)
		if err != nil {
			return
		}
		n2, err := NormalizeURI(n)
		if err != nil || n2 != n {
			t.Fatalf("not a fixed point: %q → %q → %q (%v)", s, n, n2, err)
		}
		if c := strings.IndexByte(s, ':'); c <= 0 || !validScheme(s[:c]) {
			if n != s {
				t.Fatalf("not an absolute URI, yet changed: %q → %q", s, n)
			}
			return
		}
		if i := strings.IndexByte(n, ':'); strings.HasPrefix(n[i:], "://") {
			p := n[i+3:]
			if j := strings.IndexAny(p, "?#"); j >= 0 {
				p = p[:j]
			}
			if k := strings.IndexByte(p, '/'); k >= 0 {
				for _, seg := range strings.Split(p[k:], "/") {
					if seg == "." || seg == ".." {
						t.Fatalf("dot segment left in %q (from %q)", n, s)
					}
				}
			}
		}
	})
}
