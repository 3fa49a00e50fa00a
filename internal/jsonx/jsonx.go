// Package jsonx reads and edits single fields of raw JSON objects without decoding the
// rest: the proxy rewrites a name, a token or an id and forwards every other byte as the
// peer sent it (unknown fields, _meta, field order).
//
// Inputs are expected to be valid JSON (they come from a decoded message); on malformed
// input the functions return ErrSyntax and never panic.
package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"
)

// ErrSyntax reports input that is not the JSON shape the function expected.
var ErrSyntax = errors.New("jsonx: malformed JSON")

// ErrNotObject reports a value that is not a JSON object.
var ErrNotObject = errors.New("jsonx: not a JSON object")

// Field is one member of an object: its key as raw JSON text (with quotes) and its value.
// Start and End delimit the whole member (key through value) in the object's bytes.
type Field struct {
	RawKey     []byte
	Value      []byte
	Start, End int
}

// Each calls fn for every member of obj in order until fn returns false.
func Each(obj []byte, fn func(f Field) bool) error {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return ErrNotObject
	}
	i = skipWS(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return ErrSyntax
		}
		start := i
		kEnd, err := skipString(obj, i)
		if err != nil {
			return err
		}
		key := obj[i:kEnd]
		i = skipWS(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return ErrSyntax
		}
		i = skipWS(obj, i+1)
		vEnd, err := skipValue(obj, i)
		if err != nil {
			return err
		}
		if !fn(Field{RawKey: key, Value: obj[i:vEnd], Start: start, End: vEnd}) {
			return nil
		}
		i = skipWS(obj, vEnd)
		if i >= len(obj) {
			return ErrSyntax
		}
		if obj[i] == '}' {
			return nil
		}
		if obj[i] != ',' {
			return ErrSyntax
		}
		i = skipWS(obj, i+1)
	}
}

// KeyIs reports whether a raw key (with quotes) equals name.
func KeyIs(rawKey []byte, name string) bool {
	// A raw match means equality only when there is no escape in it: the raw key "a\"b"
	// is the name a"b, not a\"b.
	if len(rawKey) == len(name)+2 && string(rawKey[1:len(rawKey)-1]) == name &&
		strings.IndexByte(name, '\\') < 0 {
		return true
	}
	if bytes.IndexByte(rawKey, '\\') < 0 {
		return false
	}
	var s string
	return json.Unmarshal(rawKey, &s) == nil && s == name
}

// Get returns the raw value of key in obj. ok is false when the key is absent.
func Get(obj []byte, key string) (val []byte, ok bool, err error) {
	err = Each(obj, func(f Field) bool {
		if KeyIs(f.RawKey, key) {
			val, ok = f.Value, true
			return false
		}
		return true
	})
	return val, ok, err
}

// GetString returns the string value of key. ok is false when the key is absent or not
// a string.
func GetString(obj []byte, key string) (s string, ok bool, err error) {
	v, ok, err := Get(obj, key)
	if err != nil || !ok || len(v) == 0 || v[0] != '"' {
		return "", false, err
	}
	s, err = Unquote(v)
	return s, err == nil, err
}

// Unquote decodes a JSON string literal. Invalid UTF-8 becomes U+FFFD, as in encoding/json.
func Unquote(v []byte) (string, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", ErrSyntax
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", ErrSyntax
	}
	return s, nil
}

// Set returns a new object equal to obj with key's value replaced by val (raw JSON), or
// with key appended when absent. obj is not modified. A nil or empty obj counts as {}.
func Set(obj []byte, key string, val []byte) ([]byte, error) {
	return Edit(obj, []Change{{Key: key, Value: val}})
}

// Delete returns a new object equal to obj without key.
func Delete(obj []byte, key string) ([]byte, error) {
	return Edit(obj, []Change{{Key: key, Delete: true}})
}

// Change is one edit for Edit: replace (or add) Key with Value, or delete it.
type Change struct {
	Key    string
	Value  []byte
	Delete bool
}

// Edit applies changes to obj in one pass and returns a new object; obj is not modified.
// Replaced members keep their position; added members go at the end in the given order.
func Edit(obj []byte, changes []Change) ([]byte, error) {
	if len(bytes.TrimSpace(obj)) == 0 {
		obj = []byte("{}")
	}
	var done uint64 // bit i set: change i applied (at most 64 changes per call)
	if len(changes) > 64 {
		return nil, errors.New("jsonx: too many changes")
	}
	out := make([]byte, 0, len(obj)+64)
	out = append(out, '{')
	n := 0
	err := Each(obj, func(f Field) bool {
		for ci, c := range changes {
			if KeyIs(f.RawKey, c.Key) {
				done |= 1 << ci
				if c.Delete {
					return true
				}
				out = appendMember(out, n, f.RawKey, c.Value)
				n++
				return true
			}
		}
		out = appendMember(out, n, f.RawKey, f.Value)
		n++
		return true
	})
	if err != nil {
		return nil, err
	}
	for ci, c := range changes {
		if done&(1<<ci) != 0 || c.Delete {
			continue
		}
		key, _ := json.Marshal(c.Key)
		out = appendMember(out, n, key, c.Value)
		n++
	}
	return append(out, '}'), nil
}

func appendMember(out []byte, n int, key, val []byte) []byte {
	if n > 0 {
		out = append(out, ',')
	}
	out = append(out, key...)
	out = append(out, ':')
	return append(out, val...)
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string literal starting at b[i] == '"'. It
// looks for the closing quote with bytes.IndexByte (vectorized), then for an escape
// before it: a long string costs a fraction of a byte-by-byte loop.
func skipString(b []byte, i int) (int, error) {
	i++
	for i < len(b) {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return 0, ErrSyntax
		}
		e := bytes.IndexByte(b[i:i+q], '\\')
		if e < 0 {
			return i + q + 1, nil
		}
		i += e + 2 // the escaped byte, whatever it is, does not end the string
	}
	return 0, ErrSyntax
}

// skipValue returns the index just past the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, ErrSyntax
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, ErrSyntax
	default:
		start := i
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if i == start {
					return 0, ErrSyntax
				}
				return i, nil
			}
			i++
		}
		if i == start {
			return 0, ErrSyntax
		}
		return i, nil
	}
}

// Marshal is json.Marshal without HTML escaping: json.Marshal rewrites <, > and & as
// \u003c, \u003e and \u0026, also inside json.RawMessage values, which would change
// bytes the proxy only forwards (an upstream's text, a tool's description).
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
