package jsonx

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 10000

// ScanValue validates the JSON value starting at b[i] (after optional whitespace) and
// returns the index just past it. It follows RFC 8259 strictly (as encoding/json.Valid
// does) in a single pass without allocating.
func ScanValue(b []byte, i int) (int, error) {
	return scanValue(b, skipWS(b, i), 0)
}

func scanValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, ErrSyntax
	}
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
	case c == '{':
		if depth >= maxDepth {
			return 0, ErrSyntax
		}
		return scanObject(b, i, depth, nil)
	case c == '[':
		if depth >= maxDepth {
			return 0, ErrSyntax
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = scanValue(b, i, depth+1); err != nil {
				return 0, err
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return 0, ErrSyntax
			}
			if b[i] == ']' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, ErrSyntax
			}
			i = skipWS(b, i+1)
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	}
	return 0, ErrSyntax
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, ErrSyntax
	}
	return i + len(lit), nil
}

// scanString validates a string literal starting at b[i] == '"'.
func scanString(b []byte, i int) (int, error) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return 0, ErrSyntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return 0, ErrSyntax
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return 0, ErrSyntax
					}
				}
				i += 6
			default:
				return 0, ErrSyntax
			}
		case c < 0x20:
			return 0, ErrSyntax
		default:
			i++
		}
	}
	return 0, ErrSyntax
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanNumber validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return 0, ErrSyntax
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return 0, ErrSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return 0, ErrSyntax
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return 0, ErrSyntax
		}
	}
	return i, nil
}

// SkipWS returns the index of the first non-whitespace byte at or after i.
func SkipWS(b []byte, i int) int { return skipWS(b, i) }

// ScanObject validates the JSON object at the start of b (after optional whitespace) in a
// single pass and calls fn for each member with its raw key (quotes included) and raw
// value. It returns the index just past the object. fn sees members before the whole
// object is known to be valid, so callers must ignore what they collected on error.
func ScanObject(b []byte, fn func(rawKey, value []byte)) (int, error) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, ErrNotObject
	}
	return scanObject(b, i, 0, fn)
}

// scanObject validates the object starting at b[i] == '{', calling fn (when not nil) for
// each member.
func scanObject(b []byte, i, depth int, fn func(rawKey, value []byte)) (int, error) {
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, ErrSyntax
		}
		kEnd, err := scanString(b, i)
		if err != nil {
			return 0, err
		}
		key := b[i:kEnd]
		i = skipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return 0, ErrSyntax
		}
		vStart := skipWS(b, i+1)
		vEnd, err := scanValue(b, vStart, depth+1)
		if err != nil {
			return 0, err
		}
		if fn != nil {
			fn(key, b[vStart:vEnd])
		}
		i = skipWS(b, vEnd)
		if i >= len(b) {
			return 0, ErrSyntax
		}
		if b[i] == '}' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return 0, ErrSyntax
		}
		i = skipWS(b, i+1)
	}
}
