package redact

import "bytes"

var (
	pemStart   = newAnchor("-----BEGIN ")
	pemBegin   = []byte("-----BEGIN ")
	pemEndMark = []byte("-----END ")
	pemDashes  = []byte("-----")
	pemPrivate = []byte("PRIVATE KEY")
)

// pemMaxLabel bounds the label of a boundary line ("RSA PRIVATE KEY", "PGP PRIVATE KEY
// BLOCK", …).
const pemMaxLabel = 64

// findPEM finds PEM private key blocks: a "-----BEGIN <label>-----" line whose label
// contains "PRIVATE KEY", through the next "-----END <label>-----" line whose label
// contains "PRIVATE KEY", before any other BEGIN line. Without such an END line (a
// truncated key), the block runs over the lines of base64 (and, before them, the
// "Name: value" header lines) that follow the BEGIN line.
func findPEM(s []byte, det int, dst []span) []span {
	for from := 0; from < len(s); {
		start, _ := pemStart.next(s, from)
		if start < 0 {
			break
		}
		from = start + 1
		after, ok := pemBoundary(s, start+len(pemBegin))
		if !ok {
			continue
		}
		end := pemEnd(s, after)
		if end < 0 {
			end = pemBody(s, after)
		}
		dst = append(dst, span{start, end, det})
		from = end
	}
	return dst
}

// pemBoundary reads "<label>-----" at s[i:] and reports the index after it, if the label
// is one of a private key.
func pemBoundary(s []byte, i int) (int, bool) {
	j := i
	for j < len(s) && j-i <= pemMaxLabel && clsPEMLabel[s[j]] {
		j++
	}
	if !bytes.HasPrefix(s[j:], pemDashes) || !bytes.Contains(s[i:j], pemPrivate) {
		return 0, false
	}
	return j + len(pemDashes), true
}

// pemEnd returns the index after the END line of the block whose body starts at s[i],
// or -1 if there is none before the next BEGIN line.
func pemEnd(s []byte, i int) int {
	limit := len(s)
	if k := bytes.Index(s[i:], pemBegin); k >= 0 {
		limit = i + k
	}
	for from := i; from < limit; {
		k := bytes.Index(s[from:limit], pemEndMark)
		if k < 0 {
			return -1
		}
		at := from + k
		if end, ok := pemBoundary(s, at+len(pemEndMark)); ok {
			return end
		}
		from = at + 1
	}
	return -1
}

// pemBody returns the end of the body of a block without an END line, starting at s[i]
// (just after the BEGIN line): the header lines, at most one empty line, then every
// line of base64; a last line that is base64 followed by other text contributes its
// base64 if that is at least 16 characters long. Lines end with a newline, CRLF, or the
// two-character escapes \n or \r\n (text that holds an escaped copy of the key).
func pemBody(s []byte, i int) int {
	end, pos := i, i // the block ends at end; pos is where the next line break is read
	data := false
	for {
		q := lineBreak(s, pos)
		if q < 0 {
			return end
		}
		r := runEnd(s, q, clsB64Pad)
		switch {
		case !data && pemHeader(s, q) > q:
			end = pemHeader(s, q)
			pos = end
		case r > q && (r == len(s) || lineBreak(s, r) >= 0):
			end, pos, data = r, r, true
		case r > q:
			if r-q >= 16 {
				end = r
			}
			return end
		case !data && pos == end && lineBreak(s, q) >= 0:
			pos = q // the one empty line between the headers and the data
		default:
			return end
		}
	}
}

// lineBreak returns the index after the line break at s[i], or -1 if there is none.
func lineBreak(s []byte, i int) int {
	for _, lb := range [...]string{"\n", "\r\n", `\n`, `\r\n`} {
		if hasPrefixAt(s, i, lb) {
			return i + len(lb)
		}
	}
	return -1
}

// pemHeader returns the index of the end of the "Name: value" header line at s[i]
// (before its line break), or i if there is none.
func pemHeader(s []byte, i int) int {
	j := i
	for j < len(s) && (clsAlnum[s[j]] || s[j] == '-') {
		j++
	}
	if j == i || !hasPrefixAt(s, j, ": ") {
		return i
	}
	for j < len(s) && s[j] != '\n' && s[j] != '\r' && !hasPrefixAt(s, j, `\n`) && !hasPrefixAt(s, j, `\r`) {
		j++
	}
	return j
}
