package httpsyntax

import (
	"strings"
	"testing"
)

func TestIndexHeadEnd(t *testing.T) {
	for _, tc := range []struct {
		buf  string
		want int
	}{
		{"", -1},
		{"GET / HTTP/1.1\r\n", -1},
		{"GET / HTTP/1.1\r\nHost: a\r\n", -1},
		{"GET / HTTP/1.1\r\nHost: a\r\n\r", -1},
		{"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 27},
		{"GET / HTTP/1.1\r\nHost: a\r\n\r\nbody\r\n\r\n", 27}, // the body is not the head's
		{"GET / HTTP/1.1\r\n\r\n", 18},
		{"\r\n", -1},    // a blank first line ends nothing: it is not a head yet
		{"\r\n\r\n", 4}, // an empty request line, then the blank line: the caller refuses it
		{"\n", -2},      // a bare LF
		{"GET / HTTP/1.1\n\n", -2},
		{"GET / HTTP/1.1\r\nHost: a\n\r\n", -2},
		{"GET / HTTP/1.1\r\nHost: a\r\n\n", -2},
		{"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 26}, // a bare CR is CutLine's to refuse
	} {
		if got := IndexHeadEnd([]byte(tc.buf)); got != tc.want {
			t.Errorf("IndexHeadEnd(%q) = %d, want %d", tc.buf, got, tc.want)
		}
	}
}

// TestIsTokenChar checks every byte against RFC 9110's tchar list.
func TestIsTokenChar(t *testing.T) {
	for c := 0; c < 256; c++ {
		want := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c < 128 && strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
		if got := IsTokenChar(byte(c)); got != want {
			t.Errorf("IsTokenChar(%q) = %v, want %v", rune(c), got, want)
		}
	}
}

func TestCutLine(t *testing.T) {
	for _, tc := range []struct {
		b, line, rest string
		ok            bool
	}{
		{"a\r\nb", "a", "b", true},
		{"\r\n", "", "", true},
		{"a b\tc\r\n\r\n", "a b\tc", "\r\n", true},
		{"a", "", "", false},
		{"a\n", "", "", false},      // bare LF
		{"\n", "", "", false},       // bare LF at the start
		{"a\rb\r\n", "", "", false}, // bare CR inside
		{"a\r\r\n", "", "", false},  // CR CR LF
		{"", "", "", false},
	} {
		line, rest, ok := CutLine([]byte(tc.b))
		if ok != tc.ok || string(line) != tc.line || string(rest) != tc.rest {
			t.Errorf("CutLine(%q) = %q, %q, %v; want %q, %q, %v", tc.b, line, rest, ok, tc.line, tc.rest, tc.ok)
		}
	}
}

func TestTrimOWS(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"a":                "a",
		" \ta b\t ":        "a b",
		"\t\t":             "",
		"\va\f":            "\va\f",   // not OWS
		"a\u00a0":          "a\u00a0", // a no-break space is obs-text, not OWS
		"\u0085a":          "\u0085a", // nor is NEL
		"application/json": "application/json",
	} {
		if got := TrimOWS(in); got != want {
			t.Errorf("TrimOWS(%q) = %q, want %q", in, got, want)
		}
		if got := TrimOWS([]byte(in)); string(got) != want {
			t.Errorf("TrimOWS([]byte(%q)) = %q, want %q", in, got, want)
		}
	}
}

func TestValidNameAndValue(t *testing.T) {
	for _, tc := range []struct {
		s           string
		name, value bool
	}{
		{"Content-Type", true, true},
		{"x!#$%&'*+-.^_`|~09", true, true},
		{"", false, true},
		{"a b", false, true},
		{"a:b", false, true},
		{"a\tb", false, true},
		{"a\"b", false, true},
		{"a(b)", false, true},
		{"a\x7f", false, false},
		{"a\x00b", false, false},
		{"a\rb", false, false},
		{"a\nb", false, false},
		{"a\vb", false, false},
		{"caf\xc3\xa9", false, true}, // obs-text: a value may hold it, a name may not
		{"\xff", false, true},
	} {
		if got := ValidName(tc.s); got != tc.name {
			t.Errorf("ValidName(%q) = %v, want %v", tc.s, got, tc.name)
		}
		if got := ValidName([]byte(tc.s)); got != tc.name {
			t.Errorf("ValidName([]byte(%q)) = %v, want %v", tc.s, got, tc.name)
		}
		if got := ValidValue(tc.s); got != tc.value {
			t.Errorf("ValidValue(%q) = %v, want %v", tc.s, got, tc.value)
		}
		if got := ValidValue([]byte(tc.s)); got != tc.value {
			t.Errorf("ValidValue([]byte(%q)) = %v, want %v", tc.s, got, tc.value)
		}
	}
}

func TestParseLength(t *testing.T) {
	for _, tc := range []struct {
		v  string
		n  int64
		ok bool
	}{
		{"0", 0, true},
		{"12", 12, true},
		{"007", 7, true},
		{"999999999999999999", 999999999999999999, true}, // 18 digits
		{"1000000000000000000", 0, false},                // 19: left to net/http
		{"99999999999999999999999", 0, false},            // would overflow
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{" 1", 0, false}, // the caller trims OWS
		{"1 ", 0, false},
		{"1,1", 0, false},
		{"3, 3", 0, false},
		{"0x10", 0, false},
		{"1_000", 0, false},
		{"１", 0, false}, // a fullwidth digit
	} {
		n, ok := ParseLength(tc.v)
		if n != tc.n || ok != tc.ok {
			t.Errorf("ParseLength(%q) = %d, %v; want %d, %v", tc.v, n, ok, tc.n, tc.ok)
		}
		if n2, ok2 := ParseLength([]byte(tc.v)); n2 != n || ok2 != ok {
			t.Errorf("ParseLength([]byte(%q)) = %d, %v; the string form says %d, %v", tc.v, n2, ok2, n, ok)
		}
	}
}

func TestEqualFoldAndHasToken(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"close", "close", true},
		{"CLOSE", "close", true},
		{"Keep-Alive", "keep-alive", true},
		{"clos", "close", false},
		{"cloſe", "close", false},                // U+017F folds to "s" in Unicode, not in a token
		{"\u212aeep-alive", "keep-alive", false}, // nor does the Kelvin sign fold to "k"
		{"close\x00", "close", false},
		{"[", "{", false}, // 0x5b and 0x7b differ by the case bit but are no letters
		{"@", "`", false},
	} {
		if got := EqualFold(tc.a, tc.b); got != tc.want {
			t.Errorf("EqualFold(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := EqualFold([]byte(tc.a), tc.b); got != tc.want {
			t.Errorf("EqualFold([]byte(%q), %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"close", true},
		{"Close", true},
		{"keep-alive, close", true},
		{"close,keep-alive", true},
		{" \tclose\t ", true},
		{",,close,,", true},
		{"keep-alive", false},
		{"", false},
		{",", false},
		{"closed", false},
		{"close-ish", false},
		{"cl ose", false},
		{"cloſe", false},
		{"\"close\"", false},
	} {
		if got := HasToken(tc.v, "close"); got != tc.want {
			t.Errorf("HasToken(%q, close) = %v, want %v", tc.v, got, tc.want)
		}
		if got := HasToken([]byte(tc.v), "close"); got != tc.want {
			t.Errorf("HasToken([]byte(%q), close) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestCanonicalKey(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"Content-Type", "Content-Type", true},
		{"content-type", "Content-Type", true},
		{"CONTENT-TYPE", "Content-Type", true},
		{"mcp-session-id", "Mcp-Session-Id", true},
		{"WWW-Authenticate", "Www-Authenticate", true},
		{"x-custom-thing", "X-Custom-Thing", true},
		{"X-Custom-Thing", "X-Custom-Thing", true},
		{"a-1b", "A-1b", true},
		{"-a", "-A", true},
		{"a--b", "A--B", true},
		{"te", "Te", true},
		{"x_y", "X_y", true},
		{"x-" + strings.Repeat("abc", 20), "X-Abc" + strings.Repeat("abc", 19), true}, // longer than the stack buffer
		{"", "", false},
		{"a b", "", false},
		{"a:b", "", false},
		{"host ", "", false},
		{"caf\xc3\xa9", "", false},
	} {
		got, ok := CanonicalKey(tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("CanonicalKey(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestCanonicalKeyAllocs: a name already canonical, or a common one in another case,
// costs no allocation; an uncommon one in another case costs its one string.
func TestCanonicalKeyAllocs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		allocs float64
	}{
		{"Content-Type", 0},
		{"content-type", 0},
		{"mcp-protocol-version", 0},
		{"X-Custom", 0},
		{"x-custom", 1},
	} {
		name := tc.name
		if n := testing.AllocsPerRun(100, func() { CanonicalKey(name) }); n != tc.allocs {
			t.Errorf("CanonicalKey(%q): %v allocations, want %v", name, n, tc.allocs)
		}
	}
}

// TestNoAllocs: the other rules never allocate, in either form.
func TestNoAllocs(t *testing.T) {
	head := []byte("POST /mcp HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\nContent-Length: 12\r\n\r\n")
	v, s := []byte("keep-alive, Close"), "keep-alive, Close"
	n := testing.AllocsPerRun(100, func() {
		IndexHeadEnd(head)
		CutLine(head)
		TrimOWS(v)
		TrimOWS(s)
		ValidName(v)
		ValidName(s)
		ValidValue(v)
		ValidValue(s)
		ParseLength(v[:0])
		ParseLength(s[:0])
		HasToken(v, "close")
		HasToken(s, "close")
		EqualFold(v, s)
	})
	if n != 0 {
		t.Errorf("%v allocations", n)
	}
}
