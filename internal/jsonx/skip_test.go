package jsonx

import "testing"

// skipStringLoop is skipString as a plain byte loop: the reference the fast one must match.
func skipStringLoop(b []byte, i int) (int, error) {
	i++
	for i < len(b) {
		switch b[i] {
		case '\\':
			i += 2
		case '"':
			return i + 1, nil
		default:
			i++
		}
	}
	return 0, ErrSyntax
}

// FuzzSkipString: the IndexByte-based skipString ends every input where the byte loop does.
func FuzzSkipString(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b"`, `"a\\"`, `"a\\\"b"x"`, `"\`, `"abc`, `""`, `"\u00e9\n" tail`, `"x\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := append([]byte{'"'}, s...)
		got, gerr := skipString(b, 0)
		want, werr := skipStringLoop(b, 0)
		if got != want || (gerr == nil) != (werr == nil) {
			t.Fatalf("skipString(%q) = %d, %v; the loop says %d, %v", b, got, gerr, want, werr)
		}
	})
}
