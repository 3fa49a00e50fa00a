package jsonrpc

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Standard JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Error is a JSON-RPC error object. It implements error, so a handler can return it and
// the code reaches the wire unchanged. Data is raw JSON, forwarded untouched.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

// Errorf returns an *Error with a formatted message.
func Errorf(code int64, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithData returns a copy of e carrying data, marshalled once here.
func (e *Error) WithData(v any) *Error {
	c := *e
	b, err := json.Marshal(v)
	if err == nil {
		c.Data = b
	}
	return &c
}

func (e *Error) append(buf []byte) []byte {
	buf = append(buf, `{"code":`...)
	buf = strconv.AppendInt(buf, e.Code, 10)
	buf = append(buf, `,"message":`...)
	buf = appendString(buf, e.Message)
	if len(e.Data) > 0 {
		buf = append(buf, `,"data":`...)
		if b, err := appendRaw(buf, e.Data); err == nil {
			buf = b
		} else {
			buf = append(buf, "null"...)
		}
	}
	return append(buf, '}')
}
