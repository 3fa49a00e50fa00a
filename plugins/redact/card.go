package redact

// maxGroups bounds the digit groups read for one card number (4-4-4-4-3 has five).
const maxGroups = 8

// findCards finds payment card numbers: 13 to 19 digits written whole, or as groups
// split by one kind of single separator (a space or a dash) with a first group of four
// digits, that pass the Luhn check and start with the prefix of a known network at one
// of its lengths. The digits must stand alone: not touching a letter, an underscore or
// another digit, not the fraction or integer part of a decimal (0.4111…, 4111….5), and a
// grouped number not continuing a longer grouped sequence. If the groups run longer than
// a card number, the longest leading groups that make a valid one are taken (a grouped
// number followed by its security code).
func findCards(s []byte, det int, dst []span) []span {
	// The scan looks for runs of four digits, reading every fourth byte while it sees
	// none. Invariant: i == 0, or s[i-1] is not a digit, or s[i] is not a digit.
	for i := 0; i+13 <= len(s); {
		if !clsDigit[s[i+3]] {
			i += 4
			continue
		}
		j := i + 3
		for j > i && clsDigit[s[j-1]] {
			j--
		}
		e := runEnd(s, i+3, clsDigit)
		if e-j < 4 {
			i = e
			continue
		}
		if end, ok := cardAt(s, j, e); ok {
			dst = append(dst, span{j, end, det})
			i = end
			continue
		}
		i = e
	}
	return dst
}

// cardAt reports whether a card number starts with the digit run s[j:e], and where the
// number ends.
func cardAt(s []byte, j, e int) (int, bool) {
	if j > 0 {
		p := s[j-1]
		if clsAlnum[p] || p == '_' || ((p == '.' || p == ',') && j > 1 && clsDigit[s[j-2]]) {
			return 0, false
		}
	}
	var num [19]byte
	if n := e - j; n != 4 {
		if n < 13 || n > 19 || !cardEdge(s, e) {
			return 0, false
		}
		copy(num[:], s[j:e])
		return e, validCard(num[:n])
	}
	// Grouped: 4 digits, then groups behind one kind of separator.
	if e >= len(s) || (s[e] != ' ' && s[e] != '-') {
		return 0, false
	}
	sep := s[e]
	if j > 1 && s[j-1] == sep && clsDigit[s[j-2]] {
		return 0, false // continues a longer grouped number
	}
	var ends [maxGroups]int // ends[k]: where group k ends
	var total [maxGroups]int
	ends[0], total[0] = e, 4
	copy(num[:], s[j:e])
	groups := 1
	for groups < maxGroups {
		g := ends[groups-1]
		if g+1 >= len(s) || s[g] != sep || !clsDigit[s[g+1]] {
			break
		}
		ge := runEnd(s, g+1, clsDigit)
		t := total[groups-1] + ge - (g + 1)
		if t > 19 {
			break
		}
		copy(num[total[groups-1]:], s[g+1:ge])
		ends[groups], total[groups] = ge, t
		groups++
	}
	for k := groups - 1; k > 0; k-- {
		if total[k] < 13 {
			break
		}
		if k == groups-1 && !cardEdge(s, ends[k]) {
			continue
		}
		if validCard(num[:total[k]]) {
			return ends[k], true
		}
	}
	return 0, false
}

// cardEdge reports whether a card number may end at s[e]: not before a letter, an
// underscore, a digit, or a decimal separator and a digit.
func cardEdge(s []byte, e int) bool {
	if e >= len(s) {
		return true
	}
	c := s[e]
	if clsAlnum[c] || c == '_' {
		return false
	}
	return !((c == '.' || c == ',') && e+1 < len(s) && clsDigit[s[e+1]])
}

// validCard reports whether the digits d are a card number: a known network's prefix
// at one of its lengths, and the Luhn check digit.
func validCard(d []byte) bool {
	return cardNetwork(d) && luhn(d)
}

// cardNetwork reports whether d starts with the prefix of a known network and has one
// of its lengths: Visa, Mastercard, American Express, Discover, JCB, Diners Club.
func cardNetwork(d []byte) bool {
	n := len(d)
	p2 := int(d[0]-'0')*10 + int(d[1]-'0')
	p3 := p2*10 + int(d[2]-'0')
	p4 := p3*10 + int(d[3]-'0')
	switch {
	case d[0] == '4': // Visa
		return n == 13 || n == 16 || n == 19
	case p2 >= 51 && p2 <= 55, p4 >= 2221 && p4 <= 2720: // Mastercard
		return n == 16
	case p2 == 34 || p2 == 37: // American Express
		return n == 15
	case p4 == 6011, p2 == 65, p3 >= 644 && p3 <= 649: // Discover
		return n >= 16 && n <= 19
	case p4 >= 3528 && p4 <= 3589: // JCB
		return n >= 16 && n <= 19
	case p2 == 36, p2 == 38, p3 >= 300 && p3 <= 305: // Diners Club
		return n >= 14 && n <= 19
	}
	return false
}

// luhn reports whether the digits d pass the Luhn (mod 10) check.
func luhn(d []byte) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i] - '0')
		if double {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return sum%10 == 0
}
