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
	buf := make([]byte, len(data))
	copy(buf, data)
	var (
		version, id, method, params, result, errObj []byte
		hasMethod                                   bool
	)
	end, serr := jsonx.ScanObject(buf, func(key, value []byte) {
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
	})
	if serr != nil || jsonx.SkipWS(buf, end) != len(buf) {
		return nil, nil, false
	}

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
