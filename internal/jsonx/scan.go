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
		return scanObject(b, i, depth)
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

// SkipValue returns the index just past the JSON value starting at b[i], as Each finds
// a member's end: strings are read to their closing quote and brackets counted, without
// validating what is skipped (ScanValue validates).
func SkipValue(b []byte, i int) (int, error) { return skipValue(b, i) }

// scanObject validates the object starting at b[i] == '{' at the given depth.
func scanObject(b []byte, i, depth int) (int, error) {
	sc := objectScannerAt(b, i, depth)
	for sc.Next() {
	}
	if sc.err != nil {
		return 0, sc.err
	}
	return sc.End, nil
}

// ObjectScanner walks the members of one JSON object while validating it, without
// callbacks (so without allocation):
//
//	sc := jsonx.NewObjectScanner(b)
//	for sc.Next() { use(sc.Key(), sc.Value()) }
//	if err := sc.Err(); err != nil { ... }
//
// Members are yielded before the whole object is known to be valid; callers must
// discard what they collected when Err is not nil. After the last member End is the
// index just past the object.
type ObjectScanner struct {
	b          []byte
	i          int
	depth      int
	key, value []byte
	err        error
	done       bool
	End        int
}

// NewObjectScanner returns a scanner of the object at the start of b (after optional
// whitespace).
func NewObjectScanner(b []byte) ObjectScanner {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ObjectScanner{b: b, err: ErrNotObject, done: true}
	}
	return objectScannerAt(b, i, 0)
}

// objectScannerAt scans the object starting at b[i] == '{', nested depth levels deep.
func objectScannerAt(b []byte, i, depth int) ObjectScanner {
	sc := ObjectScanner{b: b, depth: depth}
	sc.i = skipWS(b, i+1)
	if sc.i < len(b) && b[sc.i] == '}' {
		sc.End, sc.done = sc.i+1, true
	}
	return sc
}

// Next advances to the next member; it returns false at the end or on an error.
func (sc *ObjectScanner) Next() bool {
	if sc.done {
		return false
	}
	b, i := sc.b, sc.i
	fail := func() bool { sc.err, sc.done = ErrSyntax, true; return false }
	if i >= len(b) || b[i] != '"' {
		return fail()
	}
	kEnd, err := scanString(b, i)
	if err != nil {
		return fail()
	}
	sc.key = b[i:kEnd]
	i = skipWS(b, kEnd)
	if i >= len(b) || b[i] != ':' {
		return fail()
	}
	vStart := skipWS(b, i+1)
	vEnd, err := scanValue(b, vStart, sc.depth+1)
	if err != nil {
		return fail()
	}
	sc.value = b[vStart:vEnd]
	i = skipWS(b, vEnd)
	switch {
	case i >= len(b):
		return fail()
	case b[i] == '}':
		sc.End, sc.done = i+1, true
	case b[i] == ',':
		sc.i = skipWS(b, i+1)
	default:
		return fail()
	}
	return true
}

// Key returns the current member's raw key, quotes included.
func (sc *ObjectScanner) Key() []byte { return sc.key }

// Value returns the current member's raw value.
func (sc *ObjectScanner) Value() []byte { return sc.value }

// Err returns the first syntax error met, if any.
func (sc *ObjectScanner) Err() error { return sc.err }
