// Package importer turns the MCP server lists of client configuration files into an
// mcp-proxy HCL configuration: Claude Desktop's claude_desktop_config.json, Cursor's
// mcp.json and Claude Code's .mcp.json (a top-level "mcpServers" object) and VS Code's
// .vscode/mcp.json (a top-level "servers" object and an "inputs" array). The format is
// told from the content; comments and trailing commas, which VS Code allows, are
// accepted in every file. It also writes the snippet that replaces such a list by one
// entry running the proxy (Snippet).
//
// The generated file never holds a credential the source had in clear: such values
// become env("NAME") references, listed in the file's header comment and in
// Result.Vars (see secrets.go for the rules), unless Options.KeepSecrets asks for a
// configuration that stays in memory.
//
// This package converts bytes to bytes. It must not start processes, open network
// connections, write files or print; the only file it reads beyond its input is a
// server's envFile, through Options.ReadFile.
package importer

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Format is the shape of a client's file.
type Format string

const (
	// FormatMCPServers is a top-level "mcpServers" object: Claude Desktop, Cursor,
	// Claude Code (and many others).
	FormatMCPServers Format = "mcpServers"
	// FormatVSCode is VS Code's mcp.json: a top-level "servers" object and "inputs".
	FormatVSCode Format = "servers"
)

// Clients names the clients that read f.
func (f Format) Clients() string {
	if f == FormatVSCode {
		return "VS Code"
	}
	return "Claude Desktop, Cursor or Claude Code"
}

// Source is one file to import.
type Source struct {
	Path string // named in messages and comments; locates the workspace folder
	Data []byte
}

// Options adjusts a conversion. The zero value is what `mcp-proxy import` does.
type Options struct {
	// Workspace is what ${workspaceFolder} stands for, and where stdio servers of a
	// project's file (.vscode/mcp.json, .cursor/mcp.json, .mcp.json) run. "" means the
	// folder holding the file's .vscode or .cursor folder, else the file's own folder.
	Workspace string

	// KeepSecrets copies values that look like credentials as they are, instead of
	// replacing them with env() references: for a configuration that is only ever held
	// in memory (`mcp-proxy run --config mcp.json`).
	KeepSecrets bool

	// ReadFile reads a server's envFile; nil means os.ReadFile.
	ReadFile func(path string) ([]byte, error)
}

// Input is a VS Code input: a value VS Code prompts for, which the proxy reads from an
// environment variable instead.
type Input struct {
	ID          string
	Type        string
	Description string
	Password    bool
	Default     *string
}

// Var is an environment variable the generated configuration reads.
type Var struct {
	Name     string
	Secret   bool     // stands for a value the source file had in clear, which was not copied
	Input    *Input   // stands for this VS Code input
	Optional bool     // read with a default
	Uses     []string // where the configuration reads it, such as `upstream "github" env GITHUB_TOKEN`
}

// Result is a successful conversion.
type Result struct {
	HCL       []byte    // the configuration file
	Formats   []Format  // the formats read, each once, in order
	Upstreams []string  // the upstream labels, in order
	Vars      []Var     // sorted by name
	Warnings  []Problem // what was left out or changed
}

// Problem is an error or a warning about a place in a source file.
type Problem struct {
	File      string
	Line, Col int // 0 when the problem concerns the whole file
	Warning   bool
	Msg       string
}

// String renders p as "file:line:col: error: msg", as the proxy's diagnostics are.
func (p Problem) String() string {
	sev := "error"
	if p.Warning {
		sev = "warning"
	}
	if p.Line == 0 {
		return fmt.Sprintf("%s: %s: %s", p.File, sev, p.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s: %s", p.File, p.Line, p.Col, sev, p.Msg)
}

// Error is a failed conversion: every problem found, warnings included, in order.
type Error struct{ Problems []Problem }

func (e *Error) Error() string {
	var lines []string
	for _, p := range e.Problems {
		if !p.Warning {
			lines = append(lines, p.String())
		}
	}
	return strings.Join(lines, "\n")
}

// file is one source being read.
type file struct {
	path      string
	data      []byte // comment-stripped, same length as the source
	format    Format
	workspace string
	project   bool // a project's file: its stdio servers run in the workspace folder
	inputs    map[string]*input
	c         *converter
}

func (f *file) problem(off int, warning bool, format string, args ...any) {
	p := Problem{File: f.path, Warning: warning, Msg: fmt.Sprintf(format, args...)}
	if off >= 0 {
		p.Line, p.Col = lineCol(f.data, off)
	}
	f.c.problems = append(f.c.problems, p)
}

func (f *file) errorf(off int, format string, args ...any) { f.problem(off, false, format, args...) }
func (f *file) warnf(off int, format string, args ...any)  { f.problem(off, true, format, args...) }

// converter holds the state of one Convert call.
type converter struct {
	opts     Options
	problems []Problem
	warned   map[string]bool
	vars     map[string]*Var
	secrets  map[string]string // secret variable name -> the value it stands for (in memory only)
	labels   map[string]bool
	at       int // offset of the server being converted, for warnings about its values
}

// Convert reads every source and returns one configuration with an upstream block per
// server, in order. A server name found in an earlier source wins over the same name
// in a later one (with a warning), as the first file named is taken to be the one that
// matters; within one file the last definition wins, as it does for the clients'
// JSON parsers. Any error fails the whole conversion with an *Error listing every
// problem.
func Convert(srcs []Source, opts Options) (*Result, error) {
	if opts.ReadFile == nil {
		opts.ReadFile = os.ReadFile
	}
	c := &converter{opts: opts, warned: map[string]bool{}, vars: map[string]*Var{}, secrets: map[string]string{}, labels: map[string]bool{}, at: -1}
	res := &Result{}
	var ups []*upstream
	first := map[string]*rawServer{}
	for _, src := range srcs {
		f, servers := c.read(src)
		if f == nil {
			continue
		}
		if !slices.Contains(res.Formats, f.format) {
			res.Formats = append(res.Formats, f.format)
		}
		for _, s := range servers {
			if prev, dup := first[s.name]; dup {
				f.warnf(s.keyOff, "server %q is also defined in %s; keeping that one", s.name, prev.file.path)
				continue
			}
			first[s.name] = s
			if u := c.convert(s); u != nil {
				ups = append(ups, u)
				res.Upstreams = append(res.Upstreams, u.label)
			}
		}
	}
	if len(ups) == 0 && !hasErrors(c.problems) {
		c.problems = append(c.problems, Problem{File: names(srcs), Msg: "no MCP servers found"})
	}
	if hasErrors(c.problems) {
		return nil, &Error{Problems: c.problems}
	}
	for _, name := range slices.Sorted(maps.Keys(c.vars)) {
		res.Vars = append(res.Vars, *c.vars[name])
	}
	res.HCL = render(srcs, res.Formats, res.Vars, ups, opts.KeepSecrets)
	res.Warnings = c.problems
	return res, nil
}

func hasErrors(ps []Problem) bool {
	return slices.ContainsFunc(ps, func(p Problem) bool { return !p.Warning })
}

func names(srcs []Source) string {
	var n []string
	for _, s := range srcs {
		n = append(n, s.Path)
	}
	return strings.Join(n, ", ")
}

// warnOnce records a warning about f that is not already recorded.
func (c *converter) warnOnce(f *file, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if c.warned[f.path+"\x00"+msg] {
		return
	}
	c.warned[f.path+"\x00"+msg] = true
	f.warnf(c.at, "%s", msg)
}

// read parses one source: its format, inputs and servers in file order.
func (c *converter) read(src Source) (*file, []*rawServer) {
	f := &file{path: src.Path, data: stripJSONC(src.Data), c: c}
	start := skipSpace(f.data, 0, "")
	var top json.RawMessage
	if err := json.Unmarshal(f.data, &top); err != nil {
		off, msg := jsonError(f.data, 0, err)
		f.errorf(off, "%s", msg)
		return nil, nil
	}
	ms, err := members(f.data, start, len(top))
	if err != nil {
		off, msg := jsonError(f.data, start, err)
		f.errorf(off, "%s (an MCP client configuration is a JSON object)", msg)
		return nil, nil
	}
	var servers, inputs *member
	var vscode *member
	for i := range ms {
		switch ms[i].key {
		case "mcpServers":
			servers = &ms[i]
		case "servers":
			vscode = &ms[i]
		case "inputs":
			inputs = &ms[i]
		}
	}
	switch {
	case servers != nil && vscode != nil:
		f.errorf(vscode.keyOff, "the file has both \"mcpServers\" (Claude Desktop, Cursor, Claude Code) and \"servers\" (VS Code); import one of them")
		return nil, nil
	case servers != nil:
		f.format = FormatMCPServers
		if inputs != nil {
			f.warnf(inputs.keyOff, "\"inputs\" belongs to VS Code's \"servers\" format; it is used for ${input:…} all the same")
		}
	case vscode != nil:
		f.format, servers = FormatVSCode, vscode
	default:
		f.errorf(-1, "no \"mcpServers\" object (Claude Desktop, Cursor, Claude Code) or \"servers\" object (VS Code .vscode/mcp.json) at the top level")
		return nil, nil
	}
	f.workspace, f.project = workspaceOf(src.Path, c.opts.Workspace)
	if inputs != nil {
		f.inputs = readInputs(f, *inputs)
	}
	if string(servers.val) == "null" {
		f.warnf(servers.keyOff, "%q is null: no servers", servers.key)
		return f, nil
	}
	list, err := members(f.data, servers.valOff, len(servers.val))
	if err != nil {
		off, msg := jsonError(f.data, servers.valOff, err)
		f.errorf(off, "%q: %s", servers.key, msg)
		return nil, nil
	}
	var out []*rawServer
	index := map[string]int{}
	for _, m := range list {
		s := readServer(f, m)
		if s == nil {
			continue
		}
		if i, dup := index[m.key]; dup {
			f.warnf(m.keyOff, "server %q is defined twice in this file; the later definition wins", m.key)
			out[i] = s
			continue
		}
		index[m.key] = len(out)
		out = append(out, s)
	}
	return f, out
}

// workspaceOf returns the workspace folder for a file at path, and whether the file is
// a project's (.vscode/mcp.json, .cursor/mcp.json, .mcp.json).
func workspaceOf(path, given string) (string, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	dir := filepath.Dir(abs)
	project := filepath.Base(abs) == ".mcp.json"
	ws := dir
	if b := filepath.Base(dir); b == ".vscode" || b == ".cursor" {
		ws, project = filepath.Dir(dir), true
	}
	if given != "" {
		if a, err := filepath.Abs(given); err == nil {
			given = a
		}
		ws = given
	}
	return ws, project
}

// useVar records that the configuration reads the environment variable name at where.
func (c *converter) useVar(name, where string, in *Input) *Var {
	v := c.vars[name]
	if v == nil {
		v = &Var{Name: name}
		c.vars[name] = v
	}
	if in != nil && v.Input == nil {
		v.Input = in
	}
	if !slices.Contains(v.Uses, where) {
		v.Uses = append(v.Uses, where)
	}
	return v
}

// secretVar picks the environment variable that stands for secret, a value the source
// had in clear: the first candidate name not already standing for a different value,
// numbered if all are.
func (c *converter) secretVar(secret, where string, candidates ...string) string {
	pick := func(name string) bool {
		if name == "" {
			return false
		}
		if prev, taken := c.secrets[name]; taken && prev != secret {
			return false
		}
		c.secrets[name] = secret
		c.useVar(name, where, nil).Secret = true
		return true
	}
	for _, n := range candidates {
		if pick(n) {
			return n
		}
	}
	last := candidates[len(candidates)-1]
	for i := 2; ; i++ {
		if n := fmt.Sprintf("%s_%d", last, i); pick(n) {
			return n
		}
	}
}

// envVarName makes s an environment variable name: upper case, '_' for anything but
// letters and digits.
func envVarName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	n := strings.Trim(b.String(), "_")
	if n == "" || n[0] >= '0' && n[0] <= '9' {
		n = "V_" + n
	}
	return n
}

// label makes name a valid, unused upstream label (and namespace): letters, digits,
// '_' and '-', anything else replaced by '-'.
func (c *converter) label(name string) string {
	if validLabel(name) && !c.labels[name] {
		c.labels[name] = true
		return name
	}
	var b strings.Builder
	for _, r := range name {
		if (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	l := b.String()
	for strings.Contains(l, "--") {
		l = strings.ReplaceAll(l, "--", "-")
	}
	l = strings.Trim(l, "-")
	if l == "" {
		l = "server"
	}
	base := l
	for i := 2; c.labels[l]; i++ {
		l = fmt.Sprintf("%s-%d", base, i)
	}
	c.labels[l] = true
	return l
}

// validLabel reports whether s is a usable label as it is.
func validLabel(s string) bool {
	return s != "" && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == ""
}

// IsClientFile reports whether a file given as a configuration is a client's JSON file
// rather than HCL: its name ends in .json, or its first character (after white space
// and comments) is '{', which no HCL configuration starts with.
func IsClientFile(path string, data []byte) bool {
	if strings.EqualFold(filepath.Ext(path), ".json") {
		return true
	}
	d := stripJSONC(data)
	i := skipSpace(d, 0, "")
	return i < len(d) && d[i] == '{'
}
