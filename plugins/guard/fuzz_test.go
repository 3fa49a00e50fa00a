package guard

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzDialects = []Dialect{DialectAny, DialectPostgres, DialectMySQL, DialectSQLite, DialectSQLServer}

// endsInLineComment reports whether some reading of d ends the query inside a -- or #
// comment (text appended on the same line would be commented out there).
func endsInLineComment(sql string, d Dialect) bool {
	for _, p := range dialectProfiles[d] {
		if _, trailing, err := lexSQL(sql, p); err == nil && trailing {
			return true
		}
	}
	return false
}

// FuzzReadOnlySQL: no panics; an accepted query followed by a second statement is
// refused (on a new line always, directly unless the query ends in a line comment); and
// DialectAny accepts exactly what every dialect accepts.
func FuzzReadOnlySQL(f *testing.F) {
	for _, s := range []string{
		"SELECT 1", "SELECT 1;", "select a from t where b = 'x''y' -- c\n", "SELECT 1 -- tail",
		"WITH RECURSIVE r(n) AS (VALUES (1) UNION ALL SELECT n+1 FROM r) SELECT * FROM r",
		"SELECT $q$ ; $q$", "SELECT E'\\''", "SELECT `a`, [b], \"c\" FROM t", "SELECT /* /* */ */ 1",
		"EXPLAIN (FORMAT JSON) SELECT 1", "TABLE t", "(SELECT 1)", "SELECT 1 # x\n", "SELECT 1--x\n",
		"SELECT $a(') FROM t", "SELECT 'a\\', 'b'", "SELECT 1 /*! x */", "SELECT replace(a, 'b', 'c')",
		"SELECT * FROM t FOR UPDATE", "SELECT pg_sleep(1)", "SELECT 1; DROP TABLE t", "SELECT 1 -- x\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		every := true
		for _, d := range fuzzDialects {
			err := ReadOnlySQLDialect(sql, d)
			if d != DialectAny {
				every = every && err == nil
			}
			if err != nil {
				continue
			}
			if ReadOnlySQLDialect(sql+"\n; DROP TABLE t", d) == nil {
				t.Fatalf("%s: accepted %q followed by a new line and a DROP", d, sql)
			}
			if !endsInLineComment(sql, d) && ReadOnlySQLDialect(sql+"; DROP TABLE t", d) == nil {
				t.Fatalf("%s: accepted %q followed by a DROP", d, sql)
			}
		}
		if any := ReadOnlySQL(sql) == nil; any != every {
			t.Fatalf("%q: any dialect %v, every dialect %v", sql, any, every)
		}
	})
}

// fuzzURLGuard allows broadly, so that many inputs get to the matching.
func fuzzURLGuard(t testing.TB) *Guard {
	return urlGuard(t, []string{"https", "http", "ws", "wss", "ftp"},
		"*.com", "*.org", "example.net", "10.0.0.0/8", "127.0.0.1", "[::1]", "fd00::/8", "0.0.0.0/0:8080",
		"*.xn--bcher-kva.de", "localhost:8080", "[2001:db8::1]:443")
}

// FuzzCheckURL: no panics; a URL that normalizes re-parses from its normalized form to
// the same scheme, host and port; an accepted one is accepted in normalized form too;
// and for an ASCII host name, net/url's host (what Go's HTTP client dials) is the
// normalized name up to case and the trailing dot.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://api.github.com/x", "https://API.GitHub.com./", "https://api.github.com.evil.com/",
		"https://evil.com#@api.github.com", "https://api.github.com@evil.com/", "http://0x7f000001/",
		"http://0177.0.0.1/", "http://127.1/", "http://2130706433/", "https://xn--bcher-kva.de/",
		"https://bücher.de/", "https://a.b.example.com/", "http://[::ffff:127.0.0.1]:8080/",
		"http://[fe80::1%25eth0]/", `https://evil.com\@good.com`, "https://%61.com/", "http://10.1/",
		"https://a.com:0443/", "https://a\u3002com/", "wss://x.org:443/s", "http://0x/", "https://faß.de/",
	} {
		f.Add(s)
	}
	g := fuzzURLGuard(f)
	f.Fuzz(func(t *testing.T, raw string) {
		err := g.CheckURL(raw)
		n, nerr := normalizeURL(raw)
		if nerr != nil {
			if err == nil {
				t.Fatalf("%q accepted but does not normalize: %v", raw, nerr)
			}
			return
		}
		canon := n.String() + "/"
		n2, err2 := normalizeURL(canon)
		if err2 != nil || n2 != n {
			t.Fatalf("%q normalizes to %s, which re-normalizes to %s, %v", raw, n, n2, err2)
		}
		if err == nil {
			if err := g.CheckURL(canon); err != nil {
				t.Fatalf("%q accepted, its normalized form %q refused: %v", raw, canon, err)
			}
		}
		u, perr := url.Parse(raw)
		if perr != nil {
			t.Fatalf("%q normalized but net/url refuses it: %v", raw, perr)
		}
		host := u.Hostname()
		if n.name != "" && isASCII(host) && strings.TrimSuffix(strings.ToLower(host), ".") != n.name {
			t.Fatalf("%q: net/url host %q, normalized name %q", raw, host, n.name)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// FuzzCheckCommand: no panics; an accepted command line followed by a second command,
// a pipe or a substitution is refused; and its words, each single-quoted, split back to
// themselves.
func FuzzCheckCommand(f *testing.F) {
	for _, s := range []string{
		"ls -la /tmp", "echo 'a;b' \"c|d\" e\\ f", "git -c core.pager=sh log", "/usr/bin/ls",
		"ls; rm -rf /", "ls && x", "$(rm)", "`rm`", "ls > /etc/passwd", "PATH=/x ls", "echo ~",
		"echo \"\\$x\"", "echo 'it'\\''s'", "ls #x", "ls a#b", "echo *",
	} {
		f.Add(s)
	}
	g := commandGuard(f, "ls", "git", "echo")
	f.Fuzz(func(t *testing.T, cmd string) {
		words, serr := splitCommand(cmd)
		err := g.CheckCommand(cmd)
		if serr != nil {
			if err == nil {
				t.Fatalf("%q accepted but does not split: %v", cmd, serr)
			}
			return
		}
		if err == nil {
			for _, tail := range []string{"; rm -rf /", " | sh", " $(rm)", " `rm`", " > /x", "\nrm"} {
				if g.CheckCommand(cmd+tail) == nil {
					t.Fatalf("accepted %q followed by %q", cmd, tail)
				}
			}
		}
		var b strings.Builder
		for i, w := range words {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString("'" + strings.ReplaceAll(w, "'", `'\''`) + "'")
		}
		again, err := splitCommand(b.String())
		if err != nil || !slices.Equal(again, words) {
			t.Fatalf("%q splits into %q; quoted back, into %q, %v", cmd, words, again, err)
		}
	})
}
