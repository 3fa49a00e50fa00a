package jsonrpc

import (
	"encoding/json"
	"fmt"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
)

// decodeFast is the hot-path decoder: one validating pass over the bytes (no reflection),
// one copy of the message, and raw fields that are sub-slices of that copy. It returns
// ok=false when the input is not a syntactically valid JSON object, leaving the precise
// error to the slow path.
func decodeFast(data []byte) (m *Message, err error, ok bool) {
	end, serr := jsonx.ScanValue(data, 0)
	if serr != nil || end != len(data) {
		return nil, nil, false
	}
	buf := make([]byte, len(data))
	copy(buf, data)

	var (
		version, id, method, params, result, errObj []byte
		hasMethod                                   bool
	)
	_ = jsonx.Each(buf, func(f jsonx.Field) bool {
		// Keys are compared raw first: escaped keys are rare and handled by KeyIs.
		switch {
		case jsonx.KeyIs(f.RawKey, "jsonrpc"):
			version = f.Value
		case jsonx.KeyIs(f.RawKey, "id"):
			id = f.Value
		case jsonx.KeyIs(f.RawKey, "method"):
			method, hasMethod = f.Value, !isNull(f.Value)
		case jsonx.KeyIs(f.RawKey, "params"):
			params = f.Value
		case jsonx.KeyIs(f.RawKey, "result"):
			result = f.Value
		case jsonx.KeyIs(f.RawKey, "error"):
			errObj = f.Value
		}
		return true
	})

	m = &Message{}
	if len(id) > 0 && !isNull(id) {
		pid, perr := parseID(id)
		if perr != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidMessage, perr), true
		}
		m.ID = pid
	}
	if string(version) != `"2.0"` {
		if s, uerr := jsonx.Unquote(version); uerr != nil || s != Version {
			return m, fmt.Errorf("%w: jsonrpc must be %q", ErrInvalidMessage, Version), true
		}
	}
	if hasMethod {
		name, uerr := jsonx.Unquote(method)
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
