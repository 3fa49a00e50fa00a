package router

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// The spec's rules for tool (and, by the proxy's choice, prompt) names: 1–128 characters
// of A-Z a-z 0-9 _ - . (SEP-986).
const specMaxNameLength = 128

const hashLen = 8 // hex characters of the disambiguating hash

func validNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// ValidName reports whether s obeys the spec's name rules within max characters.
func ValidName(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !validNameChar(s[i]) {
			return false
		}
	}
	return true
}

// shortHash is a deterministic disambiguator derived from parts.
func shortHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:hashLen]
}

// exposedName returns the name a client sees for an upstream's item: namespace +
// separator + name when that is valid; otherwise invalid characters become '_' and the
// name is cut to fit max with a hash of the original appended, so that it stays unique and
// the same on every run.
func exposedName(namespace, sep, name string, max int) string {
	full := name
	if namespace != "" {
		full = namespace + sep + name
	}
	if ValidName(full, max) {
		return full
	}
	var b strings.Builder
	b.Grow(len(full))
	for i := 0; i < len(full); i++ {
		if validNameChar(full[i]) {
			b.WriteByte(full[i])
		} else {
			b.WriteByte('_')
		}
	}
	return withHash(b.String(), max, namespace, name)
}

// withHash appends "_" + a hash of parts to base, cutting base so the result fits max.
func withHash(base string, max int, parts ...string) string {
	keep := max - hashLen - 1
	if len(base) > keep {
		base = base[:keep]
	}
	return base + "_" + shortHash(parts...)
}
