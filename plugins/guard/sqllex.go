package guard

import (
	"fmt"
	"strings"
)

// The SQL tokenizer. Databases disagree on where strings, quoted identifiers and comments
// end (backslash escapes, "..." as string or identifier, $$ bodies, nesting of /* */,
// # and -- comments), and text one database takes for a string another runs as code. So
// the tokenizer has one profile per known reading, and a query must pass in every profile
// of its dialect (see dialectProfiles).

// lexProfile is one way a database splits SQL text into tokens.
type lexProfile struct {
	name            string // for messages: "PostgreSQL", "MySQL with ANSI_QUOTES", ...
	backslashSingle bool   // '...' takes backslash escapes (MySQL; PostgreSQL with standard_conforming_strings off)
	eStrings        bool   // E'...' takes backslash escapes (PostgreSQL)
	doubleQuoteEsc  bool   // "..." takes backslash escapes (MySQL's double-quoted strings)
	backtickIdent   bool   // `...` is an identifier (MySQL, SQLite)
	bracketIdent    bool   // [...] is an identifier (SQL Server, SQLite)
	bracketDouble   bool   // ]] inside [...] stands for ] (SQL Server; SQLite ends at the first ])
	dollarQuotes    bool   // $tag$...$tag$ strings and $n parameters (PostgreSQL)
	dollarIdent     bool   // $ may start an identifier (MySQL)
	sqliteVars      bool   // $name, @name, :name, #name variables with Tcl-style suffixes (SQLite)
	nestedComments  bool   // /* /* */ */ nests (PostgreSQL, SQL Server)
	hashComment     bool   // # starts a line comment (MySQL)
	dashNeedsSpace  bool   // -- starts a comment only before whitespace, a control or the end (MySQL)
}

var (
	profPostgres       = &lexProfile{name: "PostgreSQL", eStrings: true, dollarQuotes: true, nestedComments: true}
	profPostgresLegacy = &lexProfile{name: "PostgreSQL with standard_conforming_strings off", backslashSingle: true, eStrings: true, dollarQuotes: true, nestedComments: true}
	profMySQL          = &lexProfile{name: "MySQL", backslashSingle: true, doubleQuoteEsc: true, backtickIdent: true, dollarIdent: true, hashComment: true, dashNeedsSpace: true}
	profMySQLANSI      = &lexProfile{name: "MySQL with ANSI_QUOTES", backslashSingle: true, backtickIdent: true, dollarIdent: true, hashComment: true, dashNeedsSpace: true}
	profMySQLNoBS      = &lexProfile{name: "MySQL with NO_BACKSLASH_ESCAPES", backtickIdent: true, dollarIdent: true, hashComment: true, dashNeedsSpace: true}
	profSQLite         = &lexProfile{name: "SQLite", backtickIdent: true, bracketIdent: true, sqliteVars: true}
	profSQLServer      = &lexProfile{name: "SQL Server", bracketIdent: true, bracketDouble: true, nestedComments: true}
)

type tokKind uint8

const (
	tkWord   tokKind = iota // an unquoted identifier or keyword; text is lower-cased
	tkQuoted                // a quoted identifier; text is its lower-cased content
	tkString                // a string literal (any quoting); text is empty
	tkNumber
	tkParam // a parameter or variable: $1, ?, SQLite's $name
	tkPunct // one character of punctuation or operator; text is the character
)

type token struct {
	kind tokKind
	pos  int // byte offset in the query
	text string
}

// sqlError is a refusal of the SQL checks: what and where.
type sqlError struct {
	pos    int // byte offset, or -1
	reason string
}

// lexer splits one query into tokens under one profile; comments and whitespace are
// dropped.
type lexer struct {
	p    *lexProfile
	s    string
	toks []token
	// trailingLineComment is set when the query ends inside a -- or # comment.
	trailingLineComment bool
}

func lexSQL(s string, p *lexProfile) ([]token, bool, *sqlError) {
	lx := &lexer{p: p, s: s}
	if err := lx.run(); err != nil {
		return nil, false, err
	}
	return lx.toks, lx.trailingLineComment, nil
}

func errAt(pos int, format string, args ...any) *sqlError {
	return &sqlError{pos: pos, reason: fmt.Sprintf(format, args...)}
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isIdentCont(c byte) bool {
	return isIdentStart(c) || isDigit(c) || c == '$'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (lx *lexer) emit(kind tokKind, pos int, text string) {
	lx.toks = append(lx.toks, token{kind: kind, pos: pos, text: text})
}

func (lx *lexer) run() *sqlError {
	s, p := lx.s, lx.p
	for i := 0; i < len(s); {
		c := s[i]
		next := byte(0)
		if i+1 < len(s) {
			next = s[i+1]
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '-' && next == '-' && (!p.dashNeedsSpace || i+2 == len(s) || s[i+2] <= ' '):
			end, err := lx.lineComment(i)
			if err != nil {
				return err
			}
			i = end
		case c == '#' && p.hashComment:
			end, err := lx.lineComment(i)
			if err != nil {
				return err
			}
			i = end
		case c == '/' && next == '*':
			end, err := lx.blockComment(i)
			if err != nil {
				return err
			}
			i = end
		case c == '\'':
			end, err := lx.quoted(i, '\'', p.backslashSingle, "string")
			if err != nil {
				return err
			}
			lx.emit(tkString, i, "")
			i = end
		case c == '"':
			end, err := lx.quoted(i, '"', p.doubleQuoteEsc, "quoted identifier")
			if err != nil {
				return err
			}
			if p.doubleQuoteEsc {
				lx.emit(tkString, i, "")
			} else if p.eStrings && i >= 2 && s[i-1] == '&' && (s[i-2] == 'u' || s[i-2] == 'U') && (i == 2 || !isIdentCont(s[i-3])) {
				// PostgreSQL's U&"..." spells a name with Unicode escapes
				// (U&"pg\005fsleep"), which would hide it from the name checks.
				return errAt(i-2, `U&"..." identifier with Unicode escapes`)
			} else {
				lx.emit(tkQuoted, i, unquoteIdent(s[i+1:end-1], '"'))
			}
			i = end
		case c == '`' && p.backtickIdent:
			end, err := lx.quoted(i, '`', false, "quoted identifier")
			if err != nil {
				return err
			}
			lx.emit(tkQuoted, i, unquoteIdent(s[i+1:end-1], '`'))
			i = end
		case c == '[' && p.bracketIdent:
			end, err := lx.bracket(i)
			if err != nil {
				return err
			}
			lx.emit(tkQuoted, i, strings.ToLower(strings.ReplaceAll(s[i+1:end-1], "]]", "]")))
			i = end
		case isDigit(c) || c == '.' && isDigit(next):
			i = lx.number(i)
		case isIdentStart(c) || c == '$' && p.dollarIdent:
			j := i + 1
			for j < len(s) && isIdentCont(s[j]) {
				j++
			}
			word := s[i:j]
			if p.eStrings && (word == "e" || word == "E") && j < len(s) && s[j] == '\'' {
				end, err := lx.quoted(j, '\'', true, "string")
				if err != nil {
					return err
				}
				lx.emit(tkString, i, "")
				i = end
				continue
			}
			lx.emit(tkWord, i, strings.ToLower(word))
			i = j
		case c == '$' && p.dollarQuotes:
			end, err := lx.dollar(i)
			if err != nil {
				return err
			}
			i = end
		case p.sqliteVars && (c == '$' || c == '@' || c == ':' || c == '#'):
			end, err := lx.sqliteVar(i)
			if err != nil {
				return err
			}
			i = end
		case p.sqliteVars && c == '?':
			j := i + 1
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			lx.emit(tkParam, i, "")
			i = j
		case c == '\\':
			return errAt(i, "backslash outside a string (a client command?)")
		case c >= 0x80:
			return errAt(i, "non-ASCII character outside a string, quoted identifier or comment; quote the identifier")
		case c < ' ' || c == 0x7f:
			return errAt(i, "control character 0x%02x", c)
		default:
			lx.emit(tkPunct, i, string(c))
			i++
		}
	}
	return nil
}

// lineComment skips a -- or # comment starting at i and returns where it ends. A lone
// carriage return inside it is refused: PostgreSQL ends the comment there, the others at
// the next newline.
func (lx *lexer) lineComment(i int) (int, *sqlError) {
	s := lx.s
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '\n':
			return j + 1, nil
		case '\r':
			if j+1 >= len(s) || s[j+1] != '\n' {
				return 0, errAt(j, "carriage return inside a -- comment (databases disagree where it ends)")
			}
		}
	}
	lx.trailingLineComment = true
	return len(s), nil
}

// blockComment skips a /* */ comment starting at i (nested as the profile says) and
// returns where it ends. Executable comments and optimizer hints are refused, inside
// comments too.
func (lx *lexer) blockComment(i int) (int, *sqlError) {
	s := lx.s
	depth := 0
	for j := i; j < len(s); {
		switch {
		case s[j] == '/' && j+1 < len(s) && s[j+1] == '*':
			rest := s[j+2:]
			switch {
			case strings.HasPrefix(rest, "!") || strings.HasPrefix(rest, "M!"):
				return 0, errAt(j, "executable comment /*! (MySQL runs its content)")
			case strings.HasPrefix(rest, "+"):
				return 0, errAt(j, "optimizer hint /*+ (not allowed)")
			}
			if depth == 0 || lx.p.nestedComments {
				depth++
			}
			j += 2
		case s[j] == '*' && j+1 < len(s) && s[j+1] == '/':
			depth--
			j += 2
			if depth == 0 {
				return j, nil
			}
		default:
			j++
		}
	}
	return 0, errAt(i, "unterminated /* comment")
}

// quoted skips a literal or identifier quoted with q (doubled q inside stands for q;
// with backslash, a backslash escapes the next byte) starting at i and returns where it
// ends.
func (lx *lexer) quoted(i int, q byte, backslash bool, what string) (int, *sqlError) {
	s := lx.s
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			if backslash {
				j++
			}
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1, nil
		}
	}
	return 0, errAt(i, "unterminated %s", what)
}

// bracket skips a [...] identifier starting at i.
func (lx *lexer) bracket(i int) (int, *sqlError) {
	s := lx.s
	for j := i + 1; j < len(s); j++ {
		if s[j] == ']' {
			if lx.p.bracketDouble && j+1 < len(s) && s[j+1] == ']' {
				j++
				continue
			}
			return j + 1, nil
		}
	}
	return 0, errAt(i, "unterminated [identifier]")
}

// number skips a numeric literal starting at i: digits with an optional fraction and
// exponent, or 0x/0b/0o and digits, with _ separators. Letters that follow start a new
// token, so a keyword glued to a number is still seen.
func (lx *lexer) number(i int) int {
	s := lx.s
	j := i
	digits := func(ok func(byte) bool) {
		for j < len(s) && (ok(s[j]) || s[j] == '_' && j+1 < len(s) && ok(s[j+1])) {
			j++
		}
	}
	if s[j] == '0' && j+2 < len(s) {
		var ok func(byte) bool
		switch s[j+1] {
		case 'x', 'X':
			ok = isHex
		case 'b', 'B':
			ok = func(c byte) bool { return c == '0' || c == '1' }
		case 'o', 'O':
			ok = func(c byte) bool { return c >= '0' && c <= '7' }
		}
		if ok != nil && ok(s[j+2]) {
			j += 2
			digits(ok)
			lx.emit(tkNumber, i, "")
			return j
		}
	}
	digits(isDigit)
	if j < len(s) && s[j] == '.' {
		j++
		digits(isDigit)
	}
	if j+1 < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if s[k] == '+' || s[k] == '-' {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			j = k
			digits(isDigit)
		}
	}
	lx.emit(tkNumber, i, "")
	return j
}

func isHex(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// dollar reads, in PostgreSQL, what starts with '$' at i: a parameter $n, or a
// dollar-quoted string $tag$...$tag$ (the tag an identifier without '$', or empty).
func (lx *lexer) dollar(i int) (int, *sqlError) {
	s := lx.s
	j := i + 1
	if j < len(s) && isDigit(s[j]) {
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		lx.emit(tkParam, i, "")
		return j, nil
	}
	if j < len(s) && isIdentStart(s[j]) {
		for j < len(s) && (isIdentStart(s[j]) || isDigit(s[j])) {
			j++
		}
	}
	if j >= len(s) || s[j] != '$' {
		if j < len(s) && s[j] >= 0x80 {
			return 0, errAt(i, "non-ASCII dollar-quote tag")
		}
		lx.emit(tkPunct, i, "$")
		return i + 1, nil
	}
	delim := s[i : j+1]
	k := strings.Index(s[j+1:], delim)
	if k < 0 {
		return 0, errAt(i, "unterminated dollar-quoted string %s", delim)
	}
	lx.emit(tkString, i, "")
	return j + 1 + k + len(delim), nil
}

// sqliteVar reads an SQLite variable starting at i, as SQLite's tokenizer does:
// identifier characters, "::" inside, and a Tcl-style "(...)" suffix that runs to the
// next ')' or whitespace and may hold any other character, quotes included.
func (lx *lexer) sqliteVar(i int) (int, *sqlError) {
	s := lx.s
	n := 0
	j := i + 1
	for j < len(s) {
		c := s[j]
		switch {
		case isIdentCont(c) || c >= 0x80:
			n++
			j++
			continue
		case c == '(' && n > 0:
			for j++; j < len(s) && s[j] != ')' && !isSpaceSQLite(s[j]); j++ {
			}
			if j >= len(s) || s[j] != ')' {
				return 0, errAt(i, "malformed SQLite variable")
			}
			j++
		case c == ':' && j+1 < len(s) && s[j+1] == ':':
			j += 2
			continue
		}
		break
	}
	if n == 0 {
		// Not a variable: SQLite refuses it, other readings take the character as an
		// operator. Either way it hides nothing.
		lx.emit(tkPunct, i, string(s[i]))
		return i + 1, nil
	}
	lx.emit(tkParam, i, "")
	return j, nil
}

func isSpaceSQLite(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }

// unquoteIdent undoes the doubling of the quote inside a quoted identifier and lower-cases
// it (the guard compares names case-insensitively).
func unquoteIdent(s string, q byte) string {
	return strings.ToLower(strings.ReplaceAll(s, string([]byte{q, q}), string(q)))
}
