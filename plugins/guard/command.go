package guard

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxCommand is the longest command line the guard reads.
const maxCommand = 64 << 10

// CheckCommand accepts a command line only if a POSIX shell would run it as one simple
// command of an allowed program with literal arguments: no expansion of any kind, so the
// words the guard splits are exactly the words the program gets.
//
// The line is split into words with POSIX quoting (single quotes, double quotes,
// backslash). Refused outside single quotes: ; & | (lists, pipes, background), ` and
// every $ (command substitution, parameter and arithmetic expansion, $'...' quoting —
// write a literal $ as '$' or \$), < > (redirection), ( ) { } anywhere (subshells, groups,
// brace expansion), the glob characters * ? [ (pathname expansion depends on the files
// present and can turn into options; quote them), # at the start of a word (a comment),
// ~ at the start of a word or after an unquoted = or : (tilde expansion), and a leading
// NAME=value (an environment assignment). Refused anywhere, even quoted: control
// characters (newline, carriage return and NUL among them), invalid UTF-8, and Unicode
// spaces and format characters (invisible, and not word separators to a shell).
//
// The first word is the program: its name must be in Commands; given as a path, the path
// must be absolute and clean (no "..", ".", "//") and its base name in Commands. Wrappers
// such as env, sh, bash, xargs, sudo or nice are ordinary programs: refused unless
// allowed, and if allowed they can run anything. What an allowed program does with its
// arguments is out of scope: with "git" allowed, "git -c core.pager=sh log" passes.
func (g *Guard) CheckCommand(cmd string) error {
	words, err := splitCommand(cmd)
	if err != nil {
		return err
	}
	prog := words[0]
	base := prog
	if strings.Contains(prog, "/") {
		if !strings.HasPrefix(prog, "/") {
			return fmt.Errorf("program %s is a relative path; give its name or an absolute path", excerpt(prog))
		}
		if path.Clean(prog) != prog {
			return fmt.Errorf("program path %s is not clean (no .., ., // or trailing /)", excerpt(prog))
		}
		base = path.Base(prog)
	}
	if g == nil || !g.commands[base] {
		return fmt.Errorf("program %s is not allowed (allowed: %s)", excerpt(base), g.allowedCommands())
	}
	return nil
}

// allowedCommands lists the allowed programs for a message, at most ten of them.
func (g *Guard) allowedCommands() string {
	if g == nil || len(g.commands) == 0 {
		return "none"
	}
	names := make([]string, 0, len(g.commands))
	for n := range g.commands {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + ", ..."
	}
	return strings.Join(names, ", ")
}

// cmdErr is a refusal of a command line at byte pos.
func cmdErr(s string, pos int, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if pos >= 0 {
		msg += fmt.Sprintf(" at byte %d near %s", pos, excerpt(s[pos:]))
	}
	return errors.New(msg + "; send one simple command with literal, quoted arguments")
}

// commandText refuses what a command line may not contain even quoted.
func commandText(s string) error {
	if len(s) > maxCommand {
		return cmdErr(s, -1, "command line longer than %d bytes", maxCommand)
	}
	if !utf8.ValidString(s) {
		return cmdErr(s, -1, "command line is not valid UTF-8")
	}
	for i, r := range s {
		switch {
		case r == '\n' || r == '\r':
			return cmdErr(s, i, "line break (a second command)")
		case r == 0:
			return cmdErr(s, i, "NUL character")
		case r == '\t':
		case unicode.IsControl(r):
			return cmdErr(s, i, "control character %U", r)
		case r >= 0x80 && (unicode.IsSpace(r) || unicode.Is(unicode.Cf, r)):
			return cmdErr(s, i, "invisible or space character %U", r)
		}
	}
	return nil
}

// splitCommand splits a command line into words with POSIX quoting, refusing everything
// CheckCommand documents. It returns at least one word.
func splitCommand(s string) ([]string, error) {
	if err := commandText(s); err != nil {
		return nil, err
	}
	var (
		words []string
		cur   strings.Builder
		// inWord: a word has started (possibly empty, as in ''); lastUnq: the last
		// character of the current word when it was unquoted, else 0; name: the word so far
		// is an unquoted shell name (for NAME=value).
		inWord  bool
		lastUnq byte
		name    bool
	)
	endWord := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord, lastUnq, name = false, 0, false
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case ' ', '\t':
			endWord()
			i++
			continue
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, cmdErr(s, i, "unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord, lastUnq, name = true, 0, false
			i += j + 2
			continue
		case '"':
			end, err := doubleQuoted(s, i, &cur)
			if err != nil {
				return nil, err
			}
			inWord, lastUnq, name = true, 0, false
			i = end
			continue
		case '\\':
			if i+1 >= len(s) {
				return nil, cmdErr(s, i, "trailing backslash")
			}
			_, size := utf8.DecodeRuneInString(s[i+1:])
			cur.WriteString(s[i+1 : i+1+size])
			inWord, lastUnq, name = true, 0, false
			i += 1 + size
			continue
		case ';':
			return nil, cmdErr(s, i, "';' separates commands")
		case '&':
			return nil, cmdErr(s, i, "'&' (background job or &&)")
		case '|':
			return nil, cmdErr(s, i, "'|' (pipe or ||)")
		case '`':
			return nil, cmdErr(s, i, "'`' (command substitution)")
		case '$':
			return nil, cmdErr(s, i, "'$' (expansion or substitution); write a literal $ as '$'")
		case '<', '>':
			return nil, cmdErr(s, i, "%q (redirection)", c)
		case '(', ')':
			return nil, cmdErr(s, i, "%q (subshell or grouping)", c)
		case '{', '}':
			return nil, cmdErr(s, i, "%q (brace group or expansion); quote it", c)
		case '*', '?', '[':
			return nil, cmdErr(s, i, "%q (pathname expansion); quote it", c)
		case '#':
			if !inWord {
				return nil, cmdErr(s, i, "'#' starts a comment; quote it")
			}
		case '~':
			if !inWord || lastUnq == '=' || lastUnq == ':' {
				return nil, cmdErr(s, i, "'~' (tilde expansion); quote it")
			}
		case '=':
			if len(words) == 0 && name {
				return nil, cmdErr(s, 0, "leading NAME=value (an environment assignment)")
			}
		}
		// An unquoted ordinary character (or the start of a multi-byte one).
		isName := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || inWord && c >= '0' && c <= '9'
		name = isName && (!inWord || name)
		cur.WriteByte(c)
		inWord, lastUnq = true, c
		i++
	}
	endWord()
	if len(words) == 0 {
		return nil, cmdErr(s, -1, "empty command")
	}
	return words, nil
}

// doubleQuoted reads a "..." word part starting at i into cur and returns where it ends.
// Inside, a backslash escapes only $ ` " and \; an unescaped $ or ` is refused.
func doubleQuoted(s string, i int, cur *strings.Builder) (int, error) {
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; c {
		case '"':
			return j + 1, nil
		case '\\':
			if j+1 < len(s) && strings.IndexByte("$`\"\\", s[j+1]) >= 0 {
				j++
				cur.WriteByte(s[j])
				continue
			}
			cur.WriteByte(c)
		case '$':
			return 0, cmdErr(s, j, "'$' inside double quotes (expansion); use single quotes")
		case '`':
			return 0, cmdErr(s, j, "'`' inside double quotes (command substitution); use single quotes")
		default:
			cur.WriteByte(c)
		}
	}
	return 0, cmdErr(s, i, "unterminated double quote")
}

// shellReserved are words a shell treats as syntax, not programs.
var shellReserved = wordSet(`if then else elif fi do done case esac while until for in function select time coproc ! [[ ]] { }`)

// validCommandName checks a configured program name.
func validCommandName(n string) error {
	switch {
	case n == "":
		return errors.New("empty program name")
	case n == "." || n == "..":
		return fmt.Errorf("%q is not a program name", n)
	case strings.Contains(n, "/"):
		return fmt.Errorf("program %q: give the name without a path", n)
	case shellReserved[n]:
		return fmt.Errorf("program %q is a shell reserved word", n)
	case strings.HasPrefix(n, "-"):
		return fmt.Errorf("program %q starts with '-'", n)
	case !utf8.ValidString(n):
		return fmt.Errorf("program %q is not valid UTF-8", n)
	}
	for _, r := range n {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || strings.ContainsRune(";&|`$<>(){}*?[]#~='\"\\!", r) {
			return fmt.Errorf("program %q contains %q", n, r)
		}
	}
	return nil
}
