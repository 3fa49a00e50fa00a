package search

import "strings"

// Shapes: what a query's tokens look like, beyond what they say. A person names a file
// ("notes.txt"), a web address, a path, an email address, a place's coordinates, a
// version or pastes a SQL statement without saying "file", "URL", "email",
// "coordinates" or "SQL"; the tools say those words. So a token of such a shape adds
// the words its shape implies, at Params.Shape. And the words inside such a token are
// values (a file's name, a host, a quoted text), not a description of what to do: they
// are looked for at Params.Value only, so that "summary.md" does not find the tools
// that summarise, nor "https://example.com/post" those that post.
//
// The rules are few and general (docs/search.md lists them): they read the shape of a
// token (a known file extension or top-level domain, a scheme, a leading "/", "~/",
// "@" or "#", digits and dots, quotes and braces) and the keywords of SQL statements.
// Only the query is read this way.

// shape is a set of token shapes found in a query.
type shape uint32

const (
	shapeFile shape = 1 << iota
	shapeURL
	shapePath
	shapeEmail
	shapeUser    // @name
	shapeChannel // #name
	shapeNumber  // #123: an issue's or a request's number
	shapeCoord   // 48.85, 2.29
	shapeVersion // v1.2.3, 1.2
	shapeDate    // 2024-05-01, 1/5/2024
	shapeTime    // 14:30
	shapeID      // a hexadecimal id or a UUID
	shapeJSON    // {…}
	shapeSQL     // select … from, insert into…
	shapeCommand // a command-line flag, a `backquoted` command
	numShapes    = iota
)

// shapeWords are the words each shape adds (analyzed as a query's words are).
var shapeWords [numShapes][]string

func init() {
	for s, ws := range [numShapes]string{
		"file", "url", "path", "email", "user", "channel", "number", "latitude longitude coordinates",
		"version", "date", "time", "id", "json", "sql query", "command",
	} {
		shapeWords[s] = Terms(ws)
	}
}

// wellKnownFiles are file names that say they are files without an extension.
var wellKnownFiles = []string{"readme", "license", "licence", "makefile", "dockerfile", "changelog",
	"gemfile", "procfile", "jenkinsfile", "vagrantfile", "rakefile", "codeowners", "authors", "contributing"}

func wellKnownFile(t string) bool {
	for _, f := range wellKnownFiles {
		if strings.EqualFold(t, f) {
			return true
		}
	}
	return false
}

// fileExtensions are extensions that mark a file name.
var fileExtensions = map[string]bool{}

// webDomains are top-level domains that mark a host name (only the common ones: "a.co"
// is a host, "a.go" a file).
var webDomains = map[string]bool{}

func init() {
	for _, e := range strings.Fields(`txt md markdown json yaml yml toml ini conf cfg env xml csv tsv log
		go py js ts tsx jsx rb rs java kt c h cpp hpp cs php sh bash sql html htm css scss
		pdf doc docx xls xlsx ppt pptx odt rtf epub
		jpg jpeg png gif svg webp bmp tiff ico heic mp3 wav flac ogg mp4 mov avi mkv webm
		zip tar gz tgz bz2 xz 7z rar jar whl deb rpm dmg iso lock`) {
		fileExtensions[e] = true
	}
	for _, d := range strings.Fields(`com org net io dev ai app co edu gov info biz me us uk de fr eu`) {
		webDomains[d] = true
	}
}

// token is one whitespace-separated piece of a query: raw as written, bare without the
// punctuation around it.
type token struct {
	raw, bare string
}

// tokenPunct is what is trimmed around a token to read its shape.
const tokenPunct = `"'()[]{}<>,;:!?“”‘’` + "`"

// nextToken returns the first token of s and the rest of s after it.
func nextToken(s string) (tok token, rest string, ok bool) {
	start := 0
	for start < len(s) && isSpace(s[start]) {
		start++
	}
	if start == len(s) {
		return token{}, "", false
	}
	end := start
	for end < len(s) && !isSpace(s[end]) {
		end++
	}
	raw := s[start:end]
	bare := strings.TrimRight(strings.Trim(raw, tokenPunct), ".")
	return token{raw: raw, bare: bare}, s[end:], true
}

// spanOpen says whether a token opens a quoted span (a quote, a backquote or a brace
// at its start) and which byte closes it.
func spanOpen(raw string) (closer byte, ok bool) {
	switch {
	case strings.HasPrefix(raw, `"`), strings.HasPrefix(raw, "“"):
		return '"', true
	case strings.HasPrefix(raw, "'"), strings.HasPrefix(raw, "‘"):
		return '\'', true
	case strings.HasPrefix(raw, "`"):
		return '`', true
	case strings.HasPrefix(raw, "{"):
		return '}', true
	}
	return 0, false
}

// spanCloses says whether a token ends the span closer closes.
func spanCloses(raw string, closer byte) bool {
	r := strings.TrimRight(raw, ".,;:!?)")
	switch closer {
	case '"':
		return strings.HasSuffix(r, `"`) || strings.HasSuffix(r, "”")
	case '\'':
		return strings.HasSuffix(r, "'") || strings.HasSuffix(r, "’")
	}
	return len(r) > 0 && r[len(r)-1] == closer
}

// readQuery reads a query's tokens: it calls word with the text of each token (or of a
// part of one) and whether that text is a value, and returns the shapes found.
func readQuery(query string, word func(text string, value bool)) shape {
	var found shape
	// Found first: where a SQL statement starts (its tokens are values), and the last
	// token that closes each kind of span (a span that nothing after it closes is not
	// one: an apostrophe).
	sqlAt := sqlStart(query)
	lastClose := lastClosers(query)
	if sqlAt >= 0 {
		found |= shapeSQL
	}
	var closer byte // inside a quoted span: what closes it
	prevDecimal := false
	i := 0
	for rest := query; ; i++ {
		tok, r, ok := nextToken(rest)
		if !ok {
			break
		}
		rest = r
		if closer != 0 {
			word(tok.raw, true)
			if spanCloses(tok.raw, closer) {
				closer = 0
			}
			prevDecimal = false
			continue
		}
		if c, open := spanOpen(tok.raw); open && (len(tok.raw) > 1 && spanCloses(tok.raw[1:], c) || lastClose[closerIndex(c)] > i) {
			switch c {
			case '`':
				found |= shapeCommand
			case '}':
				found |= shapeJSON
			}
			word(tok.raw, true)
			if !spanCloses(tok.raw[1:], c) {
				closer = c
			}
			prevDecimal = false
			continue
		}
		if sqlAt >= 0 && i >= sqlAt {
			word(tok.raw, true)
			continue
		}
		// Coordinates: two decimal numbers, the first followed by a comma.
		if isDecimal(tok.bare) {
			coord := prevDecimal
			if coord {
				found |= shapeCoord
			}
			prevDecimal = strings.HasSuffix(tok.raw, ",")
			if !coord && !prevDecimal && isVersion(tok.bare) {
				found |= shapeVersion
			}
			if a, b, ok := strings.Cut(tok.bare, ","); ok && isDecimal(a) && isDecimal(b) {
				found |= shapeCoord
			}
			word(tok.bare, true)
			continue
		}
		prevDecimal = false
		s, value := tokenShape(tok.bare)
		found |= s
		if s&shapeURL != 0 {
			// A scheme other than the web's names a protocol or a service.
			if scheme, _, ok := strings.Cut(tok.bare, "://"); ok {
				if !strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") {
					word(scheme, false)
				}
			}
		}
		word(tok.raw, value)
	}
	return found
}

// closers are the bytes that close spans, in the order of lastClosers' result.
const closers = "\"'`}"

func closerIndex(c byte) int { return strings.IndexByte(closers, c) }

// lastClosers returns, for each closer, the index of the last token of query that
// closes a span of its kind, or -1.
func lastClosers(query string) [len(closers)]int {
	last := [len(closers)]int{-1, -1, -1, -1}
	i := 0
	for rest := query; ; i++ {
		tok, r, ok := nextToken(rest)
		if !ok {
			return last
		}
		rest = r
		for k := range len(closers) {
			if spanCloses(tok.raw, closers[k]) {
				last[k] = i
			}
		}
	}
}

// tokenShape reads one token's shape, and whether its words are values.
func tokenShape(t string) (shape, bool) {
	if t == "" {
		return 0, false
	}
	switch {
	case strings.Contains(t, "://"), len(t) > 4 && strings.EqualFold(t[:4], "www."):
		return shapeURL, true
	case t[0] == '@' && len(t) > 1:
		return shapeUser, true
	case t[0] == '#' && len(t) > 1:
		if isDigits(t[1:]) {
			return shapeNumber, true
		}
		return shapeChannel, true
	case strings.HasPrefix(t, "--") && len(t) > 2, t[0] == '-' && len(t) == 2 && isLetter(t[1]):
		return shapeCommand, true
	}
	if at := strings.IndexByte(t, '@'); at > 0 && strings.IndexByte(t[at:], '.') > 0 {
		return shapeEmail, true
	}
	var s shape
	value := false
	if strings.HasPrefix(t, "/") || strings.HasPrefix(t, "~/") || strings.HasPrefix(t, "./") || strings.HasPrefix(t, "../") {
		s, value = shapePath, true
	}
	if isDate(t) {
		return shapeDate, true
	}
	if isClock(t) {
		return shapeTime, true
	}
	if isHexID(t) {
		return shapeID, true
	}
	if isDigits(t) {
		return 0, true
	}
	if wellKnownFile(t) {
		return shapeFile, true
	}
	if (t[0] == 'v' || t[0] == 'V') && isVersion(t) {
		return shapeVersion, true
	}
	if dot := strings.LastIndexByte(t, '.'); dot > 0 && dot < len(t)-1 && len(t)-dot-1 <= 8 {
		var buf [8]byte
		ext := buf[:0]
		for i := dot + 1; i < len(t); i++ {
			c := t[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			ext = append(ext, c)
		}
		switch {
		case fileExtensions[string(ext)]:
			s, value = s|shapeFile, true
		case webDomains[string(ext)] && strings.IndexByte(t, '@') < 0:
			s, value = s|shapeURL, true
		}
	}
	return s, value
}

// sqlStart returns the index of the token where a SQL statement starts in query, or -1:
// "select" followed by "from" within eight tokens, or "insert into", "delete from",
// "update x set", "create table", "drop table", "alter table".
func sqlStart(query string) int {
	var prev [2]string // the two tokens before
	selectAt := -1
	is := strings.EqualFold
	i := 0
	for rest := query; ; i++ {
		tok, r, ok := nextToken(rest)
		if !ok {
			return -1
		}
		rest = r
		w := tok.bare
		switch {
		case is(w, "select"):
			selectAt = i
		case is(w, "from") && selectAt >= 0 && i-selectAt <= 8:
			return selectAt
		case is(w, "into") && is(prev[1], "insert"),
			is(w, "from") && is(prev[1], "delete"),
			is(w, "table") && (is(prev[1], "create") || is(prev[1], "drop") || is(prev[1], "alter")):
			return i - 1
		case is(w, "set") && is(prev[0], "update"):
			return i - 2
		}
		prev[0], prev[1] = prev[1], w
	}
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// isDecimal: digits, a dot, digits, optionally signed ("48.8584", "-2.29"); a trailing
// comma is allowed, as is a comma between two of them ("48.85,2.29").
func isDecimal(s string) bool {
	s = strings.TrimSuffix(s, ",")
	if a, b, ok := strings.Cut(s, ","); ok {
		return isDecimal(a) && isDecimal(b)
	}
	s = strings.TrimPrefix(s, "-")
	a, b, ok := strings.Cut(s, ".")
	return ok && isDigits(a) && isDigits(b)
}

// isVersion: "1.2", "1.2.3", "v2", "v1.4".
func isVersion(s string) bool {
	if len(s) > 1 && (s[0] == 'v' || s[0] == 'V') {
		s = s[1:]
	}
	n := 1
	for {
		part, more, ok := strings.Cut(s, ".")
		if !isDigits(part) {
			return false
		}
		if !ok {
			return n <= 4
		}
		s = more
		n++
	}
}

// isDate: 2024-05-01, 2024/05/01, 1/5/2024, 01-05-24.
func isDate(s string) bool {
	return isDateSep(s, "-") || isDateSep(s, "/")
}

func isDateSep(s, sep string) bool {
	a, rest, ok1 := strings.Cut(s, sep)
	b, c, ok2 := strings.Cut(rest, sep)
	if !ok1 || !ok2 || !isDigits(a) || !isDigits(b) || !isDigits(c) || len(a) > 4 || len(b) > 2 || len(c) > 4 {
		return false
	}
	return len(a) == 4 || len(c) == 4 || len(c) == 2
}

// isClock: 14:30, 9:05, 9:05pm.
func isClock(s string) bool {
	if n := len(s); n > 2 && (s[n-1] == 'm' || s[n-1] == 'M') && strings.ContainsRune("aApP", rune(s[n-2])) {
		s = s[:n-2]
	}
	h, m, ok := strings.Cut(s, ":")
	return ok && isDigits(h) && len(h) <= 2 && isDigits(m) && len(m) == 2
}

// isHexID: seven or more hexadecimal digits with at least one letter and one digit (a
// commit, an object id), or a UUID.
func isHexID(s string) bool {
	uuid := len(s) == 36 && strings.Count(s, "-") == 4
	if len(s) < 7 {
		return false
	}
	letter, digit := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '-' && uuid:
		case isDigit(c):
			digit = true
		case 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
			letter = true
		default:
			return false
		}
	}
	return letter && digit
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}
