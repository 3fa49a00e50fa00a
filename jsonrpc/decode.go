package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
)

// decodeFast is the hot-path decoder: one validating pass over the bytes (no reflection),
// one copy of the message, and raw fields that are sub-slices of that copy. It returns
// ok=false when the input is not a syntactically valid JSON object, leaving the precise
// error to the slow path.
func decodeFast(data []byte) (m *Message, err error, ok bool) {
	buf := make([]byte, len(data))
	copy(buf, data)
	var (
		version, id, method, params, result, errObj []byte
		hasMethod                                   bool
	)
	sc := jsonx.NewObjectScanner(buf)
	for sc.Next() {
		key, value := sc.Key(), sc.Value()
		// Raw comparison first: escaped keys are rare and handled by KeyIs.
		switch {
		case jsonx.KeyIs(key, "jsonrpc"):
			version = value
		case jsonx.KeyIs(key, "id"):
			id = value
		case jsonx.KeyIs(key, "method"):
			method, hasMethod = value, !isNull(value)
		case jsonx.KeyIs(key, "params"):
			params = value
		case jsonx.KeyIs(key, "result"):
			result = value
		case jsonx.KeyIs(key, "error"):
			errObj = value
		}
	}
	if sc.Err() != nil || jsonx.SkipWS(buf, sc.End) != len(buf) {
		return nil, nil, false
	}

	m = &Message{}
	if len(id) > 0 && !isNull(id) {
		if c := id[0]; c != '"' && c != '-' && (c < '0' || c > '9') {
			return nil, fmt.Errorf("%w: %v", ErrInvalidMessage, errBadID), true
		}
		m.ID = ID{raw: bufString(id)} // no copy: buf is ours and never changes
	}
	if string(version) != `"2.0"` {
		if s, uerr := jsonx.Unquote(version); uerr != nil || s != Version {
			return m, fmt.Errorf("%w: jsonrpc must be %q", ErrInvalidMessage, Version), true
		}
	}
	if hasMethod {
		name, uerr := unquoteInBuf(method)
		if uerr != nil {
			return m, fmt.Errorf("%w: method must be a string", ErrInvalidMessage), true
		}
		if name == "" {
			return m, fmt.Errorf("%w: empty method", ErrInvalidMessage), true
		}
		if len(result) > 0 || len(errObj) > 0 {
			return m, fmt.Errorf("%w: a request cannot carry result or error", ErrInvalidMessage), true
		}
		m.Method = name
		if len(params) > 0 && !isNull(params) {
			if c := params[0]; c != '{' && c != '[' {
				return m, fmt.Errorf("%w: params must be an object or array", ErrInvalidMessage), true
			}
			m.Params = params
		}
		// What the proxy decides on must be what the receiver acts on: a request whose
		// objects have two members of one name (after unescaping, without case) reads
		// differently to different parsers, so it is refused whole.
		if err := jsonx.CheckUnique(buf); err != nil {
			return m, duplicateError(err), true
		}
		return m, nil, true
	}
	hasResult, hasError := len(result) > 0, len(errObj) > 0 && !isNull(errObj)
	switch {
	case hasResult && hasError:
		return m, fmt.Errorf("%w: response has both result and error", ErrInvalidMessage), true
	case hasError:
		e := new(Error)
		if uerr := json.Unmarshal(errObj, e); uerr != nil {
			return m, fmt.Errorf("%w: error object: %v", ErrInvalidMessage, uerr), true
		}
		m.Error = e
	case hasResult:
		m.Result = result
	default:
		return m, fmt.Errorf("%w: neither method, result nor error", ErrInvalidMessage), true
	}
	if !m.ID.IsValid() && m.Error == nil {
		return m, fmt.Errorf("%w: response without id", ErrInvalidMessage), true
	}
	return m, nil, true
}

// bufString views bytes of a decoded message's private buffer as a string without
// copying. Sound because Decode copies the input into a buffer that nothing writes to
// afterwards; the string keeps that buffer alive.
func bufString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// unquoteInBuf decodes a string literal, viewing the buffer when it has no escapes.
func unquoteInBuf(v []byte) (string, error) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return bufString(v[1 : len(v)-1]), nil
	}
	return jsonx.Unquote(v)
}
