package redact

// awsSecretLen is the length of an AWS secret access key.
const awsSecretLen = 40

// minAWSSecret is the length of the shortest text with a key: "aws=" and the key.
const minAWSSecret = len("aws=") + awsSecretLen

// awsKeyWindow is how far before a candidate key the key word may start.
const awsKeyWindow = 48

// findAWSSecret finds AWS secret access keys. A key is 40 characters of base64 with no
// mark of its own, so a run of exactly 40 base64 characters (not touching another
// base64 character, or followed by "=") is taken only if it mixes upper case, lower case and a digit,
// "/" or "+" (hex digests and words do not), and the word "aws" or "secret" (any case)
// occurs within the 48 bytes before it on the same line, as in AWS_SECRET_ACCESS_KEY=…,
// aws_secret_access_key = … or "SecretAccessKey": "…". A key on its own, or below its
// label (the console's credentials CSV), is not found.
func findAWSSecret(s []byte, det int, dst []span) []span {
	const L = awsSecretLen
	// Runs are found by reading every 40th byte while it is not base64. Invariant:
	// i == 0, or s[i-1] is not base64, or s[i] is not base64.
	for i := 0; i+L <= len(s); {
		if !clsB64[s[i+L-1]] {
			i += L
			continue
		}
		j := i + L - 1
		for j > i && clsB64[s[j-1]] {
			j--
		}
		if j > i {
			i = j // s[j-1] is not base64: look again at the window starting at j
			continue
		}
		e := runEnd(s, i+L, clsB64)
		if e-i == L && (e == len(s) || s[e] != '=') &&
			awsSecretShape(s[i:e]) && awsKeyWord(s, i) {
			dst = append(dst, span{i, e, det})
		}
		i = e
	}
	return dst
}

// awsSecretShape reports whether k mixes upper case, lower case, and a digit or "/" or "+".
func awsSecretShape(k []byte) bool {
	var up, low, other bool
	for _, c := range k {
		switch {
		case clsUpper[c]:
			up = true
		case clsLower[c]:
			low = true
		default:
			other = true
		}
	}
	return up && low && other
}

// awsKeyWord reports whether "aws" or "secret" occurs in the awsKeyWindow bytes before
// s[i], after the last line break there.
func awsKeyWord(s []byte, i int) bool {
	w := s[max(0, i-awsKeyWindow):i]
	for k := len(w) - 1; k >= 0; k-- {
		if w[k] == '\n' || w[k] == '\r' {
			w = w[k+1:]
			break
		}
	}
	return containsFold(w, "aws") || containsFold(w, "secret")
}
