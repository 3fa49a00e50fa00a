package jsonrpc

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// ID is a JSON-RPC request id, kept as the exact bytes the peer sent: "7" stays a string,
// 7 a number, 9007199254740993 and -0 are never rounded or normalised. The zero ID is
// "absent" (a notification, or an error response whose request id was unknown).
type ID struct {
	raw string // exact JSON text: a string literal with quotes, or a number literal
}

// IntID returns a numeric id.
func IntID(n int64) ID { return ID{raw: strconv.FormatInt(n, 10)} }

// StringID returns a string id.
func StringID(s string) ID { return ID{raw: string(appendString(nil, s))} }

// IsValid reports whether the id is present.
func (id ID) IsValid() bool { return id.raw != "" }

// IsString reports whether the id is a JSON string.
func (id ID) IsString() bool { return len(id.raw) > 0 && id.raw[0] == '"' }

// Raw returns the exact JSON text of the id ("" when absent).
func (id ID) Raw() string { return id.raw }

// Int64 returns the id as an integer when it is a JSON integer that fits in int64.
func (id ID) Int64() (int64, bool) {
	if id.IsString() || id.raw == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(id.raw, 10, 64)
	return n, err == nil
}

// Key returns a comparable key under which two ids are equal exactly when JSON-RPC
// considers them the same id: strings compare by value (so "a" and "\u0061" match),
// numbers by their literal text. A string and a number never share a key.
func (id ID) Key() string {
	if !id.IsString() {
		return id.raw
	}
	for i := 1; i < len(id.raw)-1; i++ {
		// Escapes, and non-ASCII text that appendString may write differently (U+2028,
		// U+2029, invalid UTF-8), take the decode and re-encode path.
		if c := id.raw[i]; c == '\\' || c >= utf8.RuneSelf {
			var s string
			if json.Unmarshal([]byte(id.raw), &s) == nil {
				return string(appendString(nil, s))
			}
			break
		}
	}
	return id.raw
}

// String renders the id for logs.
func (id ID) String() string {
	if id.raw == "" {
		return "<none>"
	}
	return id.raw
}

// MarshalJSON encodes the id exactly as received (null when absent).
func (id ID) MarshalJSON() ([]byte, error) {
	if id.raw == "" {
		return []byte("null"), nil
	}
	return []byte(id.raw), nil
}

// UnmarshalJSON accepts a string or number; null leaves the id absent.
func (id *ID) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		*id = ID{}
		return nil
	}
	v, err := parseID(b)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

var errBadID = errors.New("id must be a string or a number")

// parseID validates raw id bytes; the caller has already ensured they are valid JSON.
func parseID(b []byte) (ID, error) {
	if len(b) == 0 {
		return ID{}, errBadID
	}
	switch c := b[0]; {
	case c == '"':
		return ID{raw: string(b)}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return ID{raw: string(b)}, nil
	}
	return ID{}, errBadID
}
