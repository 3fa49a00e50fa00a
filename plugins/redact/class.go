package redact

// A class is a set of bytes, tested by indexing: class[c] reports whether c is in it.
type class [256]bool

const (
	digits = "0123456789"
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lower  = "abcdefghijklmnopqrstuvwxyz"
	alnum  = digits + upper + lower
)

// newClass returns the class of every byte in the given strings.
func newClass(sets ...string) *class {
	var c class
	for _, s := range sets {
		for i := 0; i < len(s); i++ {
			c[s[i]] = true
		}
	}
	return &c
}

// The classes the detectors share. They are built once and never written after.
var (
	clsDigit      = newClass(digits)
	clsUpper      = newClass(upper)
	clsLower      = newClass(lower)
	clsAlnum      = newClass(alnum)
	clsUpperDigit = newClass(upper, digits)
	clsWord       = newClass(alnum, "_")         // identifier characters
	clsB64URL     = newClass(alnum, "_-")        // base64url without padding
	clsB64        = newClass(alnum, "+/")        // standard base64 without padding
	clsB64Pad     = newClass(alnum, "+/=")       // standard base64 with padding
	clsB64Token   = newClass(alnum, "-._~+/")    // RFC 6750 b64token, before its "=" padding
	clsGitLab     = newClass(alnum, "_-.")       // GitLab token bodies (new ones carry ".")
	clsSlack      = newClass(alnum, "-")         // Slack token bodies
	clsEmailLocal = newClass(alnum, "._%+-")     // the usual characters of an address's local part
	clsLabel      = newClass(alnum, "-")         // DNS label characters
	clsPEMLabel   = newClass(upper, digits, " ") // the label of a PEM boundary line
)

// runEnd returns the first index at or after i whose byte is not in c (len(s) if none).
func runEnd(s []byte, i int, c *class) int {
	for i < len(s) && c[s[i]] {
		i++
	}
	return i
}

// has reports whether s holds at least one byte of c.
func has(s []byte, c *class) bool {
	for _, b := range s {
		if c[b] {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains the lower-case ASCII word w, ignoring ASCII case.
func containsFold(s []byte, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		j := 0
		for j < len(w) && s[i+j]|0x20 == w[j] {
			j++
		}
		if j == len(w) {
			return true
		}
	}
	return false
}
