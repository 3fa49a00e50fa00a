package redact

import "bytes"

// notTLDs are file extensions that follow an "@" in names that are not addresses
// (icon@2x.png, logo@3x.webp, pkg@next.js) and are not top-level domains.
var notTLDs = map[string]bool{
	"png": true, "jpg": true, "jpeg": true, "gif": true, "svg": true, "webp": true, "ico": true,
	"js": true, "mjs": true, "cjs": true, "ts": true, "tsx": true, "jsx": true, "css": true,
	"json": true, "yaml": true, "yml": true, "toml": true, "lock": true, "txt": true, "map": true,
}

// findEmails finds e-mail addresses: a local part of letters, digits and ._%+- (not
// starting or ending with a dot), "@", and a domain of at least two DNS labels whose last
// label is alphabetic (or punycode, xn--) and at least two letters long. So user@localhost
// and a@b are not addresses; neither are git@host (the SSH user of Git hosting) nor
// name@2x.png. Quoted local parts, IP-literal domains and non-ASCII domains are not
// found.
func findEmails(s []byte, det int, dst []span) []span {
	for from := 0; from < len(s); {
		i := bytes.IndexByte(s[from:], '@')
		if i < 0 {
			break
		}
		at := from + i
		from = at + 1
		start := at
		for start > 0 && clsEmailLocal[s[start-1]] {
			start--
		}
		for start < at && s[start] == '.' {
			start++
		}
		if start == at || at-start > 64 || s[at-1] == '.' || string(s[start:at]) == "git" {
			continue
		}
		end, ok := domainEnd(s, at+1)
		if !ok {
			continue
		}
		dst = append(dst, span{start, end, det})
		from = end
	}
	return dst
}

// domainEnd reads the domain of an address at s[i:] and returns where it ends.
func domainEnd(s []byte, i int) (int, bool) {
	labels, last := 0, i
	j := i
	for {
		st := j
		j = runEnd(s, j, clsLabel)
		if j == st || j-st > 63 || s[st] == '-' || s[j-1] == '-' {
			return 0, false
		}
		labels++
		last = st
		if j+1 < len(s) && s[j] == '.' && clsLabel[s[j+1]] {
			j++
			continue
		}
		break
	}
	if labels < 2 || j-i > 253 {
		return 0, false
	}
	if j < len(s) && (s[j] == '@' || s[j] == '_') {
		return 0, false
	}
	tld := s[last:j]
	if bytes.HasPrefix(tld, []byte("xn--")) {
		return j, len(tld) > 4
	}
	for _, c := range tld {
		if !clsUpper[c] && !clsLower[c] {
			return 0, false
		}
	}
	return j, len(tld) >= 2 && !isFileExt(tld)
}

// isFileExt reports whether the alphabetic label tld is one of notTLDs, in any case.
func isFileExt(tld []byte) bool {
	var buf [8]byte
	if len(tld) > len(buf) {
		return false
	}
	for i, c := range tld {
		buf[i] = c | 0x20
	}
	return notTLDs[string(buf[:len(tld)])]
}
