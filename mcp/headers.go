package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
)

// The 2026-07-28 Streamable HTTP transport mirrors some body fields into request
// headers: Mcp-Method, Mcp-Name, and Mcp-Param-{Name} for tool arguments whose schema
// property carries "x-mcp-header". This file holds both sides of that rule: computing
// the headers (the proxy as a client) and checking them (the proxy as a server).

const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
	// ParamHeaderPrefix starts every argument-mirroring header name.
	ParamHeaderPrefix = "Mcp-Param-"
)

// EncodeHeaderValue encodes a value for Mcp-Name or Mcp-Param-*: visible ASCII without
// leading or trailing space as it is; anything else, and anything that looks like the
// encoded form, as =?base64?…?=.
func EncodeHeaderValue(s string) string {
	if PlainHeaderValue(s) {
		return s
	}
	return base64Prefix + base64.StdEncoding.EncodeToString([]byte(s)) + base64Suffix
}

// PlainHeaderValue reports whether EncodeHeaderValue leaves s as it is: visible ASCII
// without leading or trailing space, not in the encoded form's shape.
func PlainHeaderValue[T string | []byte](s T) bool {
	if len(s) > 0 && (s[0] == ' ' || s[len(s)-1] == ' ') {
		return false
	}
	if len(s) >= len(base64Prefix) && string(s[:len(base64Prefix)]) == base64Prefix &&
		len(s) >= len(base64Suffix) && string(s[len(s)-len(base64Suffix):]) == base64Suffix {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// DecodeHeaderValue is the inverse of EncodeHeaderValue. A value with characters a
// plain value may not hold, or a malformed encoded value, is an error.
func DecodeHeaderValue(v string) (string, error) {
	if strings.HasPrefix(v, base64Prefix) && strings.HasSuffix(v, base64Suffix) && len(v) >= len(base64Prefix)+len(base64Suffix) {
		b, err := base64.StdEncoding.DecodeString(v[len(base64Prefix) : len(v)-len(base64Suffix)])
		if err != nil {
			return "", errors.New("malformed base64 value")
		}
		return string(b), nil
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", fmt.Errorf("invalid character 0x%02x", v[i])
		}
	}
	return v, nil
}

// ParamHeader is one tool argument mirrored into a request header.
type ParamHeader struct {
	Path   []string // property names from the arguments' root to the argument
	Header string   // the full header name, Mcp-Param-{x-mcp-header}
	Type   string   // string, integer or boolean
}

// ParamHeaders reads the x-mcp-header annotations of a tool's inputSchema. An annotation
// that breaks the spec's constraints (not a token, duplicated, on a type other than
// string/integer/boolean, or not reachable from the root through "properties" alone)
// makes the whole tool invalid: the error says why.
func ParamHeaders(inputSchema json.RawMessage) ([]ParamHeader, error) {
	if len(inputSchema) == 0 || !bytes.Contains(inputSchema, []byte("x-mcp-header")) {
		return nil, nil // the common case, without decoding the schema
	}
	var root any
	if err := json.Unmarshal(inputSchema, &root); err != nil {
		return nil, fmt.Errorf("inputSchema: %v", err)
	}
	w := headerWalk{seen: map[string]bool{}}
	w.schema(root, nil, true)
	return w.out, w.err
}

type headerWalk struct {
	out  []ParamHeader
	seen map[string]bool // lower-cased header names
	err  error
}

// schema walks one schema node. reachable: the node is the root or a property reached
// through "properties" keys only; path is the property chain (nil at the root).
func (w *headerWalk) schema(node any, path []string, reachable bool) {
	if w.err != nil {
		return
	}
	switch n := node.(type) {
	case []any:
		for _, v := range n {
			w.schema(v, path, false)
		}
	case map[string]any:
		if h, ok := n["x-mcp-header"]; ok {
			w.annotation(n, h, path, reachable)
		}
		for k, v := range n {
			switch k {
			case "x-mcp-header":
			case "properties":
				props, ok := v.(map[string]any)
				if !ok {
					w.schema(v, path, false)
					continue
				}
				for name, sub := range props {
					p := append(append([]string(nil), path...), name)
					w.schema(sub, p, reachable)
				}
			default:
				w.schema(v, path, false)
			}
		}
	}
}

func (w *headerWalk) annotation(n map[string]any, h any, path []string, reachable bool) {
	name, _ := h.(string)
	where := strings.Join(path, ".")
	switch {
	case !reachable || len(path) == 0:
		w.err = fmt.Errorf("x-mcp-header %q is not on a property reachable through properties alone", name)
	case !isToken(name):
		w.err = fmt.Errorf("x-mcp-header %q of %s is not an HTTP token", name, where)
	case w.seen[strings.ToLower(name)]:
		w.err = fmt.Errorf("x-mcp-header %q is used twice", name)
	}
	if w.err != nil {
		return
	}
	typ, _ := n["type"].(string)
	switch typ {
	case "string", "integer", "boolean":
	default:
		w.err = fmt.Errorf("x-mcp-header %q is on %s of type %v; only string, integer and boolean are allowed", name, where, n["type"])
		return
	}
	w.seen[strings.ToLower(name)] = true
	w.out = append(w.out, ParamHeader{Path: path, Header: ParamHeaderPrefix + name, Type: typ})
}

// isToken reports whether s is an RFC 9110 token (1*tchar).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// argument returns the value at ph's path in a tools/call's arguments; ok is false when
// it is absent or null.
func (ph ParamHeader) argument(arguments json.RawMessage) (json.RawMessage, bool) {
	v := arguments
	for _, k := range ph.Path {
		next, ok, _ := jsonx.Get(v, k)
		if !ok {
			return nil, false
		}
		v = next
	}
	if len(v) == 0 || string(v) == "null" {
		return nil, false
	}
	return v, true
}

// maxSafeInteger is the largest integer JavaScript represents exactly.
const maxSafeInteger = 1<<53 - 1

// ParamHeaderValues returns the Mcp-Param-* headers of a tools/call with these params,
// or nil when there are none. An argument of the wrong type is left out (the server
// will reject the call for its arguments anyway).
func ParamHeaderValues(phs []ParamHeader, params json.RawMessage) map[string]string {
	if len(phs) == 0 {
		return nil
	}
	args, ok, _ := jsonx.Get(params, "arguments")
	if !ok {
		return nil
	}
	var h map[string]string
	for _, ph := range phs {
		v, ok := ph.argument(args)
		if !ok {
			continue
		}
		value, ok := headerText(v)
		if !ok {
			continue
		}
		if h == nil {
			h = map[string]string{}
		}
		h[ph.Header] = value
	}
	return h
}

// headerText is the header form of a JSON string, integer or boolean.
func headerText(v json.RawMessage) (string, bool) {
	switch v[0] {
	case '"':
		s, err := jsonx.Unquote(v)
		if err != nil {
			return "", false
		}
		return EncodeHeaderValue(s), true
	case 't', 'f':
		return string(v), true
	default:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
			return "", false
		}
		return strconv.FormatInt(int64(f), 10), true
	}
}

// HeaderGetter reads a request header (http.Header.Get fits).
type HeaderGetter func(name string) (value string, present bool)

// CheckParamHeaders checks the Mcp-Param-* headers of a tools/call against its
// arguments: each mirrored argument present in the body must have its header with the
// same value (integers compared as numbers), and a header without its argument is a
// mismatch too. The error is the message of a -32020 HeaderMismatch.
func CheckParamHeaders(phs []ParamHeader, params json.RawMessage, get HeaderGetter) error {
	if len(phs) == 0 {
		return nil
	}
	args, _, _ := jsonx.Get(params, "arguments")
	for _, ph := range phs {
		raw, present := get(ph.Header)
		v, hasArg := ph.argument(args)
		switch {
		case !hasArg && !present:
			continue
		case !hasArg:
			return fmt.Errorf("%s header is present but its argument is not in the body", ph.Header)
		case !present:
			return fmt.Errorf("%s header is required: the argument %s is in the body", ph.Header, strings.Join(ph.Path, "."))
		}
		hv, err := DecodeHeaderValue(raw)
		if err != nil {
			return fmt.Errorf("%s header: %v", ph.Header, err)
		}
		if !argumentMatches(v, hv) {
			return fmt.Errorf("%s header value %q does not match the body value %s", ph.Header, hv, v)
		}
	}
	return nil
}

func argumentMatches(v json.RawMessage, hv string) bool {
	switch v[0] {
	case '"':
		s, err := jsonx.Unquote(v)
		return err == nil && s == hv
	case 't', 'f':
		return string(v) == hv
	default:
		a, err1 := strconv.ParseFloat(string(v), 64)
		b, err2 := strconv.ParseFloat(hv, 64)
		return err1 == nil && err2 == nil && a == b
	}
}
