package redact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// maxDepth is the deepest nesting of arrays and objects JSON accepts, as encoding/json.
const maxDepth = 10000

// JSON masks every JSON string value in doc (object member names are never changed), at
// any depth, and returns the new document and the counts per detector. Bytes of
// everything else (numbers' spelling, whitespace, member order, escapes of unchanged
// strings) are preserved exactly: only string literals that change are re-encoded (as
// valid JSON strings, without HTML escaping; invalid UTF-8 and lone surrogates in them
// become U+FFFD). When nothing is masked, it returns doc itself (same slice) and nil.
// Invalid JSON is an error.
func (r *Redactor) JSON(doc []byte) (out []byte, counts map[string]int, err error) {
	st := r.get()
	defer r.put(st)
	w := walker{r: r, st: st, doc: doc}
	if err := w.document(); err != nil {
		return nil, nil, fmt.Errorf("masking JSON: %w", err)
	}
	if w.out == nil {
		return doc, nil, nil
	}
	return append(w.out, doc[w.last:]...), st.takeCounts(), nil
}

// A walker checks one JSON document and masks its string values as it goes.
type walker struct {
	r    *Redactor
	st   *state
	doc  []byte
	pos  int    // the next byte to read
	out  []byte // the new document, up to doc[last]; nil while nothing has changed
	last int
}

// A SyntaxError reports invalid JSON and where.
type SyntaxError struct {
	Offset int // of the byte that is wrong (len(doc) for an unexpected end)
	msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.msg)
}

func (w *walker) fail(format string, args ...any) error {
	return &SyntaxError{Offset: w.pos, msg: fmt.Sprintf(format, args...)}
}

// unexpected is the error for the byte at w.pos (or the end of the document).
func (w *walker) unexpected(what string) error {
	if w.pos >= len(w.doc) {
		return w.fail("unexpected end of input, want %s", what)
	}
	return w.fail("unexpected %q, want %s", w.doc[w.pos], what)
}

func (w *walker) document() error {
	if err := w.value(0); err != nil {
		return err
	}
	w.space()
	if w.pos < len(w.doc) {
		return w.unexpected("end of input after the top-level value")
	}
	return nil
}

func (w *walker) space() {
	for w.pos < len(w.doc) {
		switch w.doc[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

func (w *walker) value(depth int) error {
	w.space()
	if w.pos >= len(w.doc) {
		return w.unexpected("a value")
	}
	switch c := w.doc[w.pos]; {
	case c == '"':
		return w.str(false)
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return w.fail("nesting deeper than %d", maxDepth)
		}
		if c == '{' {
			return w.object(depth + 1)
		}
		return w.array(depth + 1)
	case c == '-' || clsDigit[c]:
		return w.number()
	case c == 't':
		return w.literal("true")
	case c == 'f':
		return w.literal("false")
	case c == 'n':
		return w.literal("null")
	}
	return w.unexpected("a value")
}

func (w *walker) object(depth int) error {
	w.pos++ // {
	w.space()
	if w.pos < len(w.doc) && w.doc[w.pos] == '}' {
		w.pos++
		return nil
	}
	for {
		w.space()
		if w.pos >= len(w.doc) || w.doc[w.pos] != '"' {
			return w.unexpected("a member name")
		}
		if err := w.str(true); err != nil {
			return err
		}
		w.space()
		if w.pos >= len(w.doc) || w.doc[w.pos] != ':' {
			return w.unexpected("':'")
		}
		w.pos++
		if err := w.value(depth); err != nil {
			return err
		}
		w.space()
		if w.pos >= len(w.doc) {
			return w.unexpected("',' or '}'")
		}
		switch w.doc[w.pos] {
		case ',':
			w.pos++
		case '}':
			w.pos++
			return nil
		default:
			return w.unexpected("',' or '}'")
		}
	}
}

func (w *walker) array(depth int) error {
	w.pos++ // [
	w.space()
	if w.pos < len(w.doc) && w.doc[w.pos] == ']' {
		w.pos++
		return nil
	}
	for {
		if err := w.value(depth); err != nil {
			return err
		}
		w.space()
		if w.pos >= len(w.doc) {
			return w.unexpected("',' or ']'")
		}
		switch w.doc[w.pos] {
		case ',':
			w.pos++
		case ']':
			w.pos++
			return nil
		default:
			return w.unexpected("',' or ']'")
		}
	}
}

func (w *walker) literal(lit string) error {
	if !hasPrefixAt(w.doc, w.pos, lit) {
		return w.unexpected(lit)
	}
	w.pos += len(lit)
	return nil
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (w *walker) number() error {
	d := w.doc
	if d[w.pos] == '-' {
		w.pos++
	}
	switch {
	case w.pos < len(d) && d[w.pos] == '0':
		w.pos++
	case w.pos < len(d) && clsDigit[d[w.pos]]:
		w.pos = runEnd(d, w.pos, clsDigit)
	default:
		return w.unexpected("a digit")
	}
	if w.pos < len(d) && d[w.pos] == '.' {
		w.pos++
		if w.pos >= len(d) || !clsDigit[d[w.pos]] {
			return w.unexpected("a digit after '.'")
		}
		w.pos = runEnd(d, w.pos, clsDigit)
	}
	if w.pos < len(d) && (d[w.pos] == 'e' || d[w.pos] == 'E') {
		w.pos++
		if w.pos < len(d) && (d[w.pos] == '+' || d[w.pos] == '-') {
			w.pos++
		}
		if w.pos >= len(d) || !clsDigit[d[w.pos]] {
			return w.unexpected("a digit in the exponent")
		}
		w.pos = runEnd(d, w.pos, clsDigit)
	}
	return nil
}

// strStop marks the bytes that end the fast scan of a string: the quote, the backslash,
// control characters (invalid), and non-ASCII bytes (which need a UTF-8 check).
var strStop = func() (c class) {
	for b := 0; b < 256; b++ {
		c[b] = b < 0x20 || b == '"' || b == '\\' || b >= utf8.RuneSelf
	}
	return c
}()

// str reads the string literal at w.pos and, unless it is a member name, masks it.
func (w *walker) str(name bool) error {
	d := w.doc
	start := w.pos
	i := start + 1
	escaped, ascii := false, true
	for {
		i = plainEnd(d, i)
		if i >= len(d) {
			w.pos = i
			return w.unexpected("the end of the string")
		}
		switch c := d[i]; {
		case c == '"':
			w.pos = i + 1
			if name {
				return nil
			}
			return w.mask(start, i+1, escaped, ascii)
		case c == '\\':
			escaped = true
			n, ok := escapeLen(d[i:])
			if !ok {
				w.pos = i
				return w.fail("invalid escape in string")
			}
			i += n
		case c < 0x20:
			w.pos = i
			return w.fail("control character %q in string", c)
		default: // a run of non-ASCII bytes: UTF-8 is checked later, if the string is masked
			ascii = false
			for i++; i < len(d) && d[i] >= utf8.RuneSelf; i++ {
			}
		}
	}
}

// SWAR constants: every byte 0x01, every byte 0x80.
const (
	swarLo = 0x0101010101010101
	swarHi = 0x8080808080808080
)

// plainEnd returns the index of the first byte at or after i that is in strStop (or
// len(d)). It tests eight bytes at a time while they are plain ASCII.
func plainEnd(d []byte, i int) int {
	for ; i+8 <= len(d); i += 8 {
		v := binary.LittleEndian.Uint64(d[i:])
		if v&swarHi != 0 || // non-ASCII
			(v-swarLo*0x20)&^v&swarHi != 0 || // a byte below 0x20 (exact, as no byte is ≥ 0x80)
			hasZeroByte(v^(swarLo*'"')) || hasZeroByte(v^(swarLo*'\\')) {
			break
		}
	}
	for i < len(d) && !strStop[d[i]] {
		i++
	}
	return i
}

// hasZeroByte reports whether one of the eight bytes of v is zero.
func hasZeroByte(v uint64) bool { return (v-swarLo)&^v&swarHi != 0 }

// escapeLen returns the length of the escape sequence at the start of s.
func escapeLen(s []byte) (int, bool) {
	if len(s) < 2 {
		return 0, false
	}
	switch s[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, true
	case 'u':
		if len(s) < 6 {
			return 0, false
		}
		for _, c := range s[2:6] {
			if _, ok := hexVal(c); !ok {
				return 0, false
			}
		}
		return 6, true
	}
	return 0, false
}

func hexVal(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10), true
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10), true
	}
	return 0, false
}

// mask masks the string literal doc[start:end] (quotes included, already checked).
func (w *walker) mask(start, end int, escaped, ascii bool) error {
	raw := w.doc[start+1 : end-1]
	if len(raw) < w.r.minLen && ascii {
		return nil // decoding cannot make it longer
	}
	text := raw
	if escaped || (!ascii && !utf8.Valid(raw)) {
		w.st.scratch = unquote(w.st.scratch[:0], raw, ascii)
		text = w.st.scratch
	}
	if len(text) < w.r.minLen {
		return nil
	}
	masked, changed := w.r.redact(w.st, text)
	if !changed {
		return nil
	}
	if w.out == nil {
		w.out = make([]byte, 0, len(w.doc)+64)
	}
	w.out = append(w.out, w.doc[w.last:start]...)
	w.out = jsonrpc.AppendString(w.out, string(masked)) // the project's encoder: no HTML escaping
	w.last = end
	return nil
}

// unquote appends to dst the value of the checked string literal contents raw, as
// encoding/json decodes it: invalid UTF-8 and unpaired surrogates become U+FFFD. ascii
// says raw is all ASCII.
func unquote(dst, raw []byte, ascii bool) []byte {
	for i := 0; i < len(raw); {
		k := bytes.IndexByte(raw[i:], '\\')
		if k < 0 {
			k = len(raw) - i
		}
		if chunk := raw[i : i+k]; ascii || utf8.Valid(chunk) {
			dst = append(dst, chunk...)
		} else {
			for j := 0; j < len(chunk); {
				r, size := utf8.DecodeRune(chunk[j:])
				dst = utf8.AppendRune(dst, r) // RuneError for an invalid byte
				j += size
			}
		}
		i += k
		if i >= len(raw) {
			break
		}
		switch raw[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2 = hex4(raw[i+2:])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // " \ /
			dst = append(dst, raw[i+1])
		}
		i += 2
	}
	return dst
}

// hex4 reads the four checked hex digits at the start of s.
func hex4(s []byte) rune {
	var r rune
	for _, c := range s[:4] {
		v, _ := hexVal(c)
		r = r<<4 | v
	}
	return r
}
