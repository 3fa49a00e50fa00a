package redact

// minBearer is the length of the shortest token findBearer masks.
const minBearer = 20

var bearerAnchors = []*anchor{newAnchor("Bearer", "BEARER"), newAnchor("bearer")}

// findBearer finds the token after the word Bearer (Bearer, bearer or BEARER, not
// inside a longer word), one or more spaces or tabs, as in "Authorization: Bearer
// <token>": an RFC 6750 b64token (letters, digits, -._~+/ then any "=") of at least 20
// characters, without a trailing dot. Only the token is masked.
func findBearer(s []byte, det int, dst []span) []span {
	for _, a := range bearerAnchors {
		for from := 0; from < len(s); {
			b, _ := a.next(s, from)
			if b < 0 {
				break
			}
			from = b + 1
			if b > 0 && clsWord[s[b-1]] {
				continue
			}
			q := b + len("Bearer")
			t := q
			for t < len(s) && (s[t] == ' ' || s[t] == '\t') {
				t++
			}
			if t == q {
				continue
			}
			end := runEnd(s, t, clsB64Token)
			for end < len(s) && s[end] == '=' {
				end++
			}
			if end < len(s) && clsWord[s[end]] {
				continue
			}
			for end > t && s[end-1] == '.' {
				end--
			}
			if end-t < minBearer {
				continue
			}
			dst = append(dst, span{t, end, det})
			from = end
		}
	}
	return dst
}
