package jsonx

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DuplicateError reports an object with two members whose names are the same once
// unescaped and compared without case.
type DuplicateError struct {
	Name string   // the second member's name, unescaped
	Path []string // the member names leading to the object, outermost first
}

func (e *DuplicateError) Error() string {
	where := "the top-level object"
	if len(e.Path) > 0 {
		where = strings.Join(e.Path, ".")
	}
	return "duplicate member " + quoteName(e.Name) + " in " + where
}

func quoteName(s string) string { return strconv.Quote(s) }

// CheckUnique reports, as a *DuplicateError, the first object in the JSON value b (at
// any depth) that has two members with the same name after unescaping ("p\u0061th" is
// "path") and Unicode case folding ("Path" is "path"). Parsers disagree on such input:
// some keep the first member, most the last, and Go's encoding/json matches struct
// fields without case, so a value checked by one reader can differ from the value
// another acts on. b must be valid JSON (a decoded message's raw field); malformed
// input gives ErrSyntax. One pass; no allocation for objects of up to 8 members whose names need no unescaping.
func CheckUnique(b []byte) error {
	_, err := uniqValue(b, skipWS(b, 0), 0)
	return err
}

func uniqValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, ErrSyntax
	}
	switch c := b[i]; {
	case c == '{':
		if depth >= maxDepth {
			return 0, ErrSyntax
		}
		return uniqObject(b, i, depth)
	case c == '[':
		if depth >= maxDepth {
			return 0, ErrSyntax
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = uniqValue(b, i, depth+1); err != nil {
				return 0, err
			}
			i = skipWS(b, i)
			switch {
			case i >= len(b):
				return 0, ErrSyntax
			case b[i] == ']':
				return i + 1, nil
			case b[i] != ',':
				return 0, ErrSyntax
			}
			i = skipWS(b, i+1)
		}
	}
	return scanValue(b, i, depth) // a scalar
}

// seenName is one name seen in an object; ascii says whether folding can be byte-wise.
type seenName struct {
	name  []byte
	ascii bool
}

func uniqObject(b []byte, i, depth int) (int, error) {
	var local [8]seenName // the names of this object: on the stack for small objects
	seen := local[:0]
	var folded map[string]struct{} // for objects with many members
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, ErrSyntax
		}
		kEnd, err := scanString(b, i)
		if err != nil {
			return 0, err
		}
		name := b[i+1 : kEnd-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			s, err := Unquote(b[i:kEnd])
			if err != nil {
				return 0, err
			}
			name = []byte(s)
		}
		m := seenName{name, isASCII(name)}
		if folded == nil && len(seen) < 16 {
			for _, k := range seen {
				if (k.ascii && m.ascii && len(k.name) != len(m.name)) || !bytes.EqualFold(k.name, m.name) {
					continue
				}
				return 0, &DuplicateError{Name: string(name)}
			}
			seen = append(seen, m)
		} else {
			if folded == nil {
				folded = make(map[string]struct{}, 32)
				for _, k := range seen {
					folded[foldKey(k.name)] = struct{}{}
				}
			}
			f := foldKey(name)
			if _, dup := folded[f]; dup {
				return 0, &DuplicateError{Name: string(name)}
			}
			folded[f] = struct{}{}
		}
		i = skipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return 0, ErrSyntax
		}
		if i, err = uniqValue(b, skipWS(b, i+1), depth+1); err != nil {
			if de, ok := err.(*DuplicateError); ok {
				de.Path = append([]string{string(name)}, de.Path...)
			}
			return 0, err
		}
		i = skipWS(b, i)
		switch {
		case i >= len(b):
			return 0, ErrSyntax
		case b[i] == '}':
			return i + 1, nil
		case b[i] != ',':
			return 0, ErrSyntax
		}
		i = skipWS(b, i+1)
	}
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldKey maps a name to one representative of its case-folding class, so that two
// names are equal under bytes.EqualFold exactly when their foldKeys are equal.
func foldKey(name []byte) string {
	out := make([]byte, 0, len(name))
	for len(name) > 0 {
		r, n := utf8.DecodeRune(name)
		name = name[n:]
		min := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < min {
				min = f
			}
		}
		out = utf8.AppendRune(out, min)
	}
	return string(out)
}
