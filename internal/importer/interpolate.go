package importer

import (
	"path/filepath"
	"strings"
	"unicode"

	"github.com/mcp-proxy/mcp-proxy/internal/lazyre"
)

// Variables the clients substitute in their files, and what each becomes:
//
//	${env:NAME}              VS Code, Cursor        env("NAME")
//	${input:ID}              VS Code                env("ID" in upper snake case), the input's default if it has one
//	${NAME}, ${NAME:-dflt}   Claude Code            env("NAME"), env("NAME", "dflt") (mcpServers files only)
//	${workspaceFolder}       VS Code, Cursor        the workspace folder, written out
//	${workspaceFolderBasename}                      its last element
//	${userHome}              VS Code, Cursor        env("HOME")
//	${pathSeparator}, ${/}   VS Code, Cursor        the path separator
//
// Anything else (${config:…}, ${command:…}, a VS Code ${file}) is kept as literal text,
// with a warning. An unset variable is an error when the proxy loads the file, where
// VS Code and Cursor would substitute an empty string: a missing token should stop the
// start, not surface later as a failed call.

var envNameRE = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// interpolate turns s, a string of the source file, into a value of the generated one;
// where says what s is (`upstream "x" env Y`) for the list of variables.
func (c *converter) interpolate(f *file, s, where string) value {
	var v value
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			break
		}
		end := closingBrace(s, i+2)
		if end < 0 {
			break
		}
		if i > 0 {
			v = append(v, part{lit: s[:i]})
		}
		v = append(v, c.variable(f, s[i+2:end], s[i:end+1], where)...)
		s = s[end+1:]
	}
	if s != "" || len(v) == 0 {
		v = append(v, part{lit: s})
	}
	return v.merge()
}

// closingBrace returns the index of the } that closes a ${ whose content starts at i,
// counting nested ${…} (Claude Code's ${A:-${B}}), or -1.
func closingBrace(s string, i int) int {
	depth := 1
	for ; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// variable is what one ${inner} becomes.
func (c *converter) variable(f *file, inner, raw, where string) value {
	name, rest, hasColon := strings.Cut(inner, ":")
	switch {
	case inner == "workspaceFolder" || inner == "workspaceRoot":
		return literal(f.workspace)
	case inner == "workspaceFolderBasename":
		return literal(filepath.Base(f.workspace))
	case inner == "userHome":
		return expression(envCall("HOME", nil))
	case inner == "pathSeparator" || inner == "/":
		return literal(string(filepath.Separator))
	case hasColon && name == "env" && envNameRE.MatchString(rest):
		c.useVar(rest, where, nil)
		return expression(envCall(rest, nil))
	case hasColon && name == "input" && rest != "":
		return c.inputVar(f, rest, where)
	case f.format == FormatMCPServers && envNameRE.MatchString(inner):
		c.useVar(inner, where, nil)
		return expression(envCall(inner, nil))
	case f.format == FormatMCPServers && hasColon && envNameRE.MatchString(name) && strings.HasPrefix(rest, "-"):
		def := c.interpolate(f, rest[1:], where)
		c.useVar(name, where, nil).Optional = true
		return expression(envCall(name, &def))
	}
	c.warnOnce(f, "%s: %s is not a variable the proxy can substitute; it is kept as literal text", where, raw)
	return literal(raw)
}

// inputVar is what ${input:ID} becomes: the environment variable named after the input.
func (c *converter) inputVar(f *file, id, where string) value {
	in := f.inputs[id]
	name := inputEnvName(id)
	if in == nil {
		c.warnOnce(f, "%s: ${input:%s} refers to an input the file does not declare; it becomes env(%q)", where, id, name)
		in = &input{ID: id}
	}
	if in.Type != "" && in.Type != "promptString" && in.Type != "pickString" {
		c.warnOnce(f, "input %q has type %q; the proxy reads it from the environment variable %s", id, in.Type, name)
	}
	vr := c.useVar(name, where, &Input{ID: in.ID, Description: in.Description, Password: in.Password, Type: in.Type, Default: in.Default})
	if in.Default != nil && !in.Password {
		def := literal(*in.Default)
		vr.Optional = true
		return expression(envCall(name, &def))
	}
	return expression(envCall(name, nil))
}

// inputEnvName turns an input id into an environment variable name: upper snake case,
// with a word break where a lower-case letter meets an upper-case one ("github-token"
// and "githubToken" both become GITHUB_TOKEN).
func inputEnvName(id string) string {
	var b strings.Builder
	prevLower := false
	for _, r := range id {
		switch {
		case r < unicode.MaxASCII && unicode.IsUpper(r) && prevLower:
			b.WriteByte('_')
			b.WriteRune(r)
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(unicode.ToUpper(r))
		default:
			b.WriteByte('_')
		}
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
	}
	name := strings.Trim(b.String(), "_")
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		name = "INPUT_" + name
	}
	return name
}

// merge joins adjacent literal parts.
func (v value) merge() value {
	out := v[:0:0]
	for _, p := range v {
		if n := len(out); n > 0 && p.expr == "" && out[n-1].expr == "" {
			out[n-1].lit += p.lit
			continue
		}
		out = append(out, p)
	}
	return out
}
