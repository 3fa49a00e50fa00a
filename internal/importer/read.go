package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// member is one member of a JSON object, in file order, with the offsets (into the
// whole file) of its key and its value.
type member struct {
	key    string
	keyOff int
	val    json.RawMessage
	valOff int
}

// members returns the members of the object at data[off:off+n] in order. data is the
// whole (comment-stripped) file, so that offsets can be reported as positions in it.
func members(data []byte, off, n int) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data[off : off+n]))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errNotObject
	}
	var out []member
	for dec.More() {
		keyOff := skipSpace(data, off+int(dec.InputOffset()), ",")
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		valOff := skipSpace(data, off+int(dec.InputOffset()), ":")
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		out = append(out, member{key: key, keyOff: keyOff, val: val, valOff: valOff})
	}
	return out, nil
}

var errNotObject = errors.New("not a JSON object")

// skipSpace returns the offset of the first byte at or after i that is neither JSON
// white space nor one of the separators in seps.
func skipSpace(data []byte, i int, seps string) int {
	for i < len(data) && (strings.IndexByte(" \t\r\n", data[i]) >= 0 || strings.IndexByte(seps, data[i]) >= 0) {
		i++
	}
	return i
}

// lineCol turns a byte offset into a 1-based line and column (in bytes).
func lineCol(data []byte, off int) (int, int) {
	off = min(off, len(data))
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	col := off + 1
	if nl := bytes.LastIndexByte(data[:off], '\n'); nl >= 0 {
		col = off - nl
	}
	return line, col
}

// jsonError locates a decoding error: a syntax error or a value of the wrong type.
func jsonError(data []byte, base int, err error) (int, string) {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return base + int(syn.Offset) - 1, "invalid JSON: " + syn.Error()
	case errors.As(err, &typ):
		return base + int(typ.Offset) - 1, fmt.Sprintf("invalid JSON: a %s where a %s belongs", typ.Value, typ.Type)
	case errors.Is(err, errNotObject):
		return base, "expected a JSON object"
	}
	return base, "invalid JSON: " + err.Error()
}

// rawServer is one server entry as the file has it. Values are kept as written; the
// interpolation of ${...} happens later.
type rawServer struct {
	name     string
	file     *file
	keyOff   int
	typ      string
	command  string
	args     []string
	env      []keyValue // in file order; null values (VS Code: unset) are left out with a warning
	envFile  string
	cwd      string
	url      string
	headers  []keyValue
	disabled bool
	ignored  []string // members the proxy has no use for
}

type keyValue struct{ key, value string }

// known server members and what they are; everything else is reported as ignored.
var serverMembers = map[string]bool{
	"type": true, "command": true, "args": true, "env": true, "envFile": true,
	"cwd": true, "url": true, "headers": true, "disabled": true,
}

// readServer decodes one server member, appending problems to f.
func readServer(f *file, m member) *rawServer {
	s := &rawServer{name: m.key, file: f, keyOff: m.keyOff}
	ms, err := members(f.data, m.valOff, len(m.val))
	if err != nil {
		off, msg := jsonError(f.data, m.valOff, err)
		f.errorf(off, "server %q: %s", m.key, msg)
		return nil
	}
	ok := true
	for _, fm := range ms {
		bad := func(want string) {
			f.errorf(fm.valOff, "server %q: %q must be %s", m.key, fm.key, want)
			ok = false
		}
		switch fm.key {
		case "type":
			if !decodeString(fm.val, &s.typ) {
				bad("a string")
			}
		case "command":
			if !decodeString(fm.val, &s.command) {
				bad("a string")
			}
		case "args":
			args, good := decodeStrings(fm.val)
			if !good {
				bad("an array of strings")
			}
			s.args = args
		case "env":
			kvs, nulls, good := decodeStringMap(f.data, fm)
			if !good {
				bad("an object of strings")
			}
			for _, k := range nulls {
				f.warnf(fm.valOff, "server %q: env %q is null (unset in VS Code); the proxy cannot unset a variable, so it is left out", m.key, k)
			}
			s.env = kvs
		case "envFile":
			if !decodeString(fm.val, &s.envFile) {
				bad("a string")
			}
		case "cwd":
			if !decodeString(fm.val, &s.cwd) {
				bad("a string")
			}
		case "url":
			if !decodeString(fm.val, &s.url) {
				bad("a string")
			}
		case "headers":
			kvs, nulls, good := decodeStringMap(f.data, fm)
			if !good || len(nulls) > 0 {
				bad("an object of strings")
			}
			s.headers = kvs
		case "disabled":
			if json.Unmarshal(fm.val, &s.disabled) != nil {
				bad("true or false")
			}
		default:
			s.ignored = append(s.ignored, fm.key)
		}
	}
	if !ok {
		return nil
	}
	return s
}

// decodeString decodes a JSON string (null counts as absent).
func decodeString(raw json.RawMessage, dst *string) bool {
	if string(raw) == "null" {
		return true
	}
	return json.Unmarshal(raw, dst) == nil
}

// decodeStrings decodes an array whose elements are strings, numbers or booleans (some
// hand-written files put a port number in args); numbers keep their JSON spelling.
func decodeStrings(raw json.RawMessage) ([]string, bool) {
	if string(raw) == "null" {
		return nil, true
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil, false
	}
	out := make([]string, 0, len(elems))
	for _, e := range elems {
		s, ok := scalarString(e)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// scalarString renders a JSON string, number or boolean as the string a client passes
// to a process.
func scalarString(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	raw = bytes.TrimSpace(raw)
	if string(raw) == "true" || string(raw) == "false" {
		return string(raw), true
	}
	if _, err := strconv.ParseFloat(string(raw), 64); err == nil {
		return string(raw), true
	}
	return "", false
}

// decodeStringMap decodes an object of scalars in member order; the keys of null
// members are returned apart.
func decodeStringMap(data []byte, m member) ([]keyValue, []string, bool) {
	if string(m.val) == "null" {
		return nil, nil, true
	}
	ms, err := members(data, m.valOff, len(m.val))
	if err != nil {
		return nil, nil, false
	}
	var kvs []keyValue
	var nulls []string
	seen := map[string]int{}
	for _, e := range ms {
		if string(bytes.TrimSpace(e.val)) == "null" {
			nulls = append(nulls, e.key)
			continue
		}
		v, ok := scalarString(e.val)
		if !ok {
			return nil, nil, false
		}
		if i, dup := seen[e.key]; dup { // the last one wins, as in JavaScript
			kvs[i].value = v
			continue
		}
		seen[e.key] = len(kvs)
		kvs = append(kvs, keyValue{e.key, v})
	}
	return kvs, nulls, true
}

// input is one entry of a VS Code file's "inputs": a value VS Code asks the user for
// and substitutes for ${input:ID}.
type input struct {
	Type        string  `json:"type"`
	ID          string  `json:"id"`
	Description string  `json:"description"`
	Password    bool    `json:"password"`
	Default     *string `json:"default"`
}

// readInputs decodes a VS Code "inputs" array.
func readInputs(f *file, m member) map[string]*input {
	var raws []json.RawMessage
	if err := json.Unmarshal(m.val, &raws); err != nil {
		f.errorf(m.valOff, "\"inputs\" must be an array of objects")
		return nil
	}
	out := map[string]*input{}
	for _, r := range raws {
		var in input
		if err := json.Unmarshal(r, &in); err != nil || in.ID == "" {
			f.errorf(m.valOff, "\"inputs\": every input must be an object with a string \"id\"")
			continue
		}
		out[in.ID] = &in
	}
	return out
}
