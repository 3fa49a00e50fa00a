package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
)

// jwtStart is how the base64url of a JSON object's first member begins: `{"`.
var jwtStart = newAnchor("eyJ")

// minJWT is the length of the shortest token findJWT accepts: the header {"alg":0} (12
// characters of base64url), a dot, the payload {"a":0} (10) and a dot.
const minJWT = 12 + 1 + 10 + 1

// findJWT finds JSON Web Tokens (JWS compact serialization): header.payload.signature,
// each base64url without padding, where the header decodes to a JSON object with an
// "alg" member and the payload to a JSON object. The signature may be empty (an
// unsecured token still carries its claims).
func findJWT(s []byte, det int, dst []span) []span {
	for from := 0; from < len(s); {
		start, _ := jwtStart.next(s, from)
		if start < 0 {
			break
		}
		from = start + 1
		if start > 0 && clsB64URL[s[start-1]] {
			continue
		}
		e1 := runEnd(s, start, clsB64URL)
		if e1 >= len(s) || s[e1] != '.' || !hasPrefixAt(s, e1+1, "eyJ") {
			continue
		}
		e2 := runEnd(s, e1+1, clsB64URL)
		if e2 >= len(s) || s[e2] != '.' {
			continue
		}
		end := runEnd(s, e2+1, clsB64URL)
		if !jwtHeader(s[start:e1]) || !jwtPayload(s[e1+1:e2]) {
			continue
		}
		dst = append(dst, span{start, end, det})
		from = end
	}
	return dst
}

// jwtHeader reports whether seg is base64url of a JSON object with an "alg" member.
func jwtHeader(seg []byte) bool {
	dec, ok := decodeB64URL(seg)
	return ok && json.Valid(dec) && bytes.HasPrefix(dec, []byte("{")) && hasAlgMember(dec)
}

// hasAlgMember reports whether the valid JSON object obj has a member named "alg" (at
// any depth: a nested one is accepted too). In valid JSON, a quote not preceded by a
// backslash that is followed by alg, a quote and a colon starts a member name.
func hasAlgMember(obj []byte) bool {
	for i := 0; ; {
		k := bytes.Index(obj[i:], []byte(`"alg"`))
		if k < 0 {
			return false
		}
		i += k
		j := i + len(`"alg"`)
		for j < len(obj) && (obj[j] == ' ' || obj[j] == '\t' || obj[j] == '\n' || obj[j] == '\r') {
			j++
		}
		if j < len(obj) && obj[j] == ':' && obj[i-1] != '\\' {
			return true
		}
		i++
	}
}

// jwtPayload reports whether seg is base64url of a JSON object.
func jwtPayload(seg []byte) bool {
	dec, ok := decodeB64URL(seg)
	return ok && json.Valid(dec) && bytes.HasPrefix(dec, []byte("{"))
}

func decodeB64URL(seg []byte) ([]byte, bool) {
	dec := make([]byte, base64.RawURLEncoding.DecodedLen(len(seg)))
	n, err := base64.RawURLEncoding.Decode(dec, seg)
	return dec[:n], err == nil
}
