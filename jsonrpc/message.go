// Package jsonrpc is the JSON-RPC 2.0 wire layer of mcp-proxy: the message type with raw
// params and results, exact id preservation, the standard error codes and newline framing.
//
// It knows nothing about MCP. Everything the proxy only forwards stays as raw bytes
// (json.RawMessage); only the envelope is decoded.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
)

// Version is the only JSON-RPC version this package speaks.
const Version = "2.0"

// Message is one JSON-RPC 2.0 message: a request (ID and Method), a notification (Method,
// no ID), or a response (ID and exactly one of Result or Error).
//
// Params and Result are raw JSON and are never re-encoded. A Message is not safe for
// concurrent mutation; senders build a fresh Message rather than editing a received one.
type Message struct {
	ID     ID
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  *Error
}

// IsRequest reports whether m is a request (has a method and an id).
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID.IsValid() }

// IsNotification reports whether m is a notification (has a method, no id).
func (m *Message) IsNotification() bool { return m.Method != "" && !m.ID.IsValid() }

// IsResponse reports whether m is a response (no method).
func (m *Message) IsResponse() bool { return m.Method == "" }

// NewRequest returns a request message.
func NewRequest(id ID, method string, params json.RawMessage) *Message {
	return &Message{ID: id, Method: method, Params: params}
}

// NewNotification returns a notification message.
func NewNotification(method string, params json.RawMessage) *Message {
	return &Message{Method: method, Params: params}
}

// NewResult returns a success response. A nil result is sent as {}.
func NewResult(id ID, result json.RawMessage) *Message {
	if len(result) == 0 {
		result = emptyObject
	}
	return &Message{ID: id, Result: result}
}

// NewErrorResponse returns an error response. A zero id is sent as null, as JSON-RPC
// requires when the request id could not be determined.
func NewErrorResponse(id ID, err *Error) *Message {
	return &Message{ID: id, Error: err}
}

var emptyObject = json.RawMessage("{}")

// ErrInvalidMessage is wrapped by every decoding error that is not a JSON syntax error:
// the bytes were JSON but not a valid JSON-RPC 2.0 message.
var ErrInvalidMessage = errors.New("invalid JSON-RPC message")

// Decode parses one JSON-RPC message. Syntax errors are returned as *json.SyntaxError
// (wrapped); structurally invalid messages wrap ErrInvalidMessage. When the message is
// structurally invalid but its id could be read, the returned Message carries that id so
// that the caller can answer -32600 to the right request.
func Decode(data []byte) (*Message, error) {
	data = bytes.Trim(data, " \t\r\n") // JSON whitespace only
	if len(data) == 0 || data[0] != '{' {
		if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
			return nil, err // a *json.SyntaxError with its message and offset
		}
		if data[0] == '[' {
			return nil, fmt.Errorf("%w: batch (JSON array) where one message was expected", ErrInvalidMessage)
		}
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalidMessage)
	}
	if m, err, ok := decodeFast(data); ok {
		return m, err
	}
	// Not valid JSON: let encoding/json find and describe the syntax error.
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		return nil, err
	}
	// Valid for encoding/json but not for the scanner: nesting beyond its bound.
	return nil, fmt.Errorf("%w: nested too deeply", ErrInvalidMessage)
}

// ErrDuplicateMember is wrapped by Decode's error for a request or notification with an
// object that has two members of the same name (compared after unescaping and without
// case): readers disagree on which one counts. In params it is answered with
// CodeInvalidParams, in the envelope with CodeInvalidRequest (see DecodeError).
var ErrDuplicateMember = errors.New("duplicate member name")

type duplicateMemberError struct {
	dup    *jsonx.DuplicateError
	params bool
}

func duplicateError(err error) error {
	var de *jsonx.DuplicateError
	if !errors.As(err, &de) {
		return fmt.Errorf("%w: %v", ErrInvalidMessage, err)
	}
	return &duplicateMemberError{dup: de, params: len(de.Path) > 0 && de.Path[0] == "params"}
}

func (e *duplicateMemberError) Error() string {
	return e.dup.Error() + " (member names must be unique, compared after unescaping and without case)"
}

func (e *duplicateMemberError) Is(target error) bool {
	return target == ErrDuplicateMember || (!e.params && target == ErrInvalidMessage)
}

// DecodeError is the JSON-RPC error to answer for an error from Decode: -32700 for bad
// JSON, -32602 for an ambiguous params object, -32600 for anything else that is not a
// valid message.
func DecodeError(err error) *Error {
	var de *duplicateMemberError
	switch {
	case errors.As(err, &de) && de.params:
		return Errorf(CodeInvalidParams, "Invalid params: %v", err)
	case errors.Is(err, ErrInvalidMessage):
		return Errorf(CodeInvalidRequest, "Invalid Request: %v", err)
	}
	return Errorf(CodeParseError, "Parse error: %v", err)
}

func isNull(b json.RawMessage) bool { return len(b) == 4 && string(b) == "null" }

// Append appends the wire encoding of m (one compact JSON object, no trailing newline, no
// HTML escaping) to buf. Raw fields that contain newlines (pretty-printed input from an
// HTTP peer) are compacted so the result is always a single line.
func (m *Message) Append(buf []byte) ([]byte, error) {
	buf = append(buf, `{"jsonrpc":"2.0"`...)
	if m.Method != "" {
		if m.ID.IsValid() {
			buf = append(buf, `,"id":`...)
			buf = append(buf, m.ID.raw...)
		}
		buf = append(buf, `,"method":`...)
		buf = appendString(buf, m.Method)
		if len(m.Params) > 0 {
			buf = append(buf, `,"params":`...)
			var err error
			if buf, err = appendRaw(buf, m.Params); err != nil {
				return buf, fmt.Errorf("encoding params of %s: %w", m.Method, err)
			}
		}
		return append(buf, '}'), nil
	}
	buf = append(buf, `,"id":`...)
	if m.ID.IsValid() {
		buf = append(buf, m.ID.raw...)
	} else {
		buf = append(buf, "null"...)
	}
	if m.Error != nil {
		buf = append(buf, `,"error":`...)
		buf = m.Error.append(buf)
	} else {
		buf = append(buf, `,"result":`...)
		r := m.Result
		if len(r) == 0 {
			r = emptyObject
		}
		var err error
		if buf, err = appendRaw(buf, r); err != nil {
			return buf, fmt.Errorf("encoding result: %w", err)
		}
	}
	return append(buf, '}'), nil
}

// Encode returns the wire encoding of m without a trailing newline.
func (m *Message) Encode() ([]byte, error) {
	return m.Append(make([]byte, 0, 128+len(m.Params)+len(m.Result)))
}

// appendRaw appends a raw JSON value, compacting it when it spans lines.
func appendRaw(buf, raw []byte) ([]byte, error) {
	if bytes.IndexByte(raw, '\n') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		return append(buf, raw...), nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return buf, err
	}
	return append(buf, b.Bytes()...), nil
}

// String returns the encoding for logs; it never fails.
func (m *Message) String() string {
	b, err := m.Encode()
	if err != nil {
		return fmt.Sprintf("<unencodable message: %v>", err)
	}
	return string(b)
}
