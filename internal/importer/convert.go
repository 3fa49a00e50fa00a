package importer

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/lazyre"
)

// upstream is one upstream block of the generated file.
type upstream struct {
	label     string
	origin    string // where the server came from, for a comment
	command   []value
	cwd       *value
	env       []entry
	url       *value
	transport string // "" (auto), "streamable-http" or "sse"
	headers   []entry
	disabled  bool
}

// entry is one member of an env or headers object.
type entry struct {
	key     string
	val     value
	comment string
}

// HTTP upstream transports, as the proxy's "transport" argument spells them.
const (
	transportStreamable = "streamable-http"
	transportSSE        = "sse"
)

// convert turns one server into an upstream block, or records why it cannot.
func (c *converter) convert(s *rawServer) *upstream {
	f := s.file
	c.at = s.keyOff
	defer func() { c.at = -1 }()
	u := &upstream{label: c.label(s.name), disabled: s.disabled}
	u.origin = fmt.Sprintf("%s %q in %s", f.format, s.name, f.path)
	where := fmt.Sprintf("upstream %q", u.label)
	if u.label != s.name {
		f.warnf(s.keyOff, "server %q becomes upstream %q (labels and namespaces take letters, digits, '_' and '-', and are unique)", s.name, u.label)
	}

	remote := false
	switch typ := strings.ToLower(s.typ); typ {
	case "", "stdio":
		remote = typ == "" && s.command == "" && s.url != ""
		if s.command == "" && !remote {
			f.errorf(s.keyOff, "server %q has neither \"command\" nor \"url\"", s.name)
			return nil
		}
		if s.command != "" && s.url != "" {
			f.errorf(s.keyOff, "server %q has both \"command\" and \"url\"; a server is either a process or an address", s.name)
			return nil
		}
	case "http", "streamable-http", "streamablehttp", "streamable_http":
		remote, u.transport = true, transportStreamable
	case "sse":
		remote, u.transport = true, transportSSE
	default:
		f.errorf(s.keyOff, "server %q has type %q; the proxy knows \"stdio\", \"http\" and \"sse\"", s.name, s.typ)
		return nil
	}

	var ignored []string
	if remote {
		if s.url == "" {
			f.errorf(s.keyOff, "server %q (type %q) needs a \"url\"", s.name, s.typ)
			return nil
		}
		for _, x := range []struct {
			name string
			set  bool
		}{{"command", s.command != ""}, {"args", len(s.args) > 0}, {"env", len(s.env) > 0}, {"envFile", s.envFile != ""}, {"cwd", s.cwd != ""}} {
			if x.set {
				ignored = append(ignored, x.name)
			}
		}
		url := c.urlValue(c.interpolate(f, s.url, where+" url"), u.label, where+" url")
		u.url = &url
		for _, h := range s.headers {
			hw := fmt.Sprintf("%s header %s", where, h.key)
			u.headers = append(u.headers, c.headerEntry(u.label, h.key, c.interpolate(f, h.value, hw), hw))
		}
	} else {
		if len(s.headers) > 0 {
			ignored = append(ignored, "headers")
		}
		u.command = append(u.command, c.interpolate(f, s.command, where+" command"))
		u.command = append(u.command, c.args(f, u.label, s.args, where)...)
		u.env = c.envEntries(s, u.label, where)
		switch {
		case s.cwd != "":
			cwd := c.interpolate(f, s.cwd, where+" cwd")
			if cwd.plain() && !filepath.IsAbs(cwd.text()) {
				cwd = literal(filepath.Join(f.workspace, cwd.text()))
			}
			u.cwd = &cwd
		case f.project:
			cwd := literal(f.workspace)
			u.cwd = &cwd
		}
	}
	ignored = append(ignored, s.ignored...)
	if len(ignored) > 0 {
		f.warnf(s.keyOff, "server %q: ignoring %s, which the proxy has no use for", s.name, strings.Join(ignored, ", "))
	}
	return u
}

// envEntries converts a server's envFile and env, env winning over envFile as it does in
// VS Code.
func (c *converter) envEntries(s *rawServer, label, where string) []entry {
	f := s.file
	kvs := slices.Clone(s.env)
	if s.envFile != "" {
		path := c.interpolate(f, s.envFile, where+" envFile")
		switch {
		case !path.plain():
			f.warnf(s.keyOff, "server %q: envFile %q names environment variables; it is not read", s.name, s.envFile)
		default:
			p := path.text()
			if !filepath.IsAbs(p) {
				p = filepath.Join(f.workspace, p)
			}
			data, err := c.opts.ReadFile(p)
			if err != nil {
				f.warnf(s.keyOff, "server %q: reading its envFile: %v; its variables are left out", s.name, err)
				break
			}
			fromFile := parseDotenv(data)
			if !c.opts.KeepSecrets {
				f.warnf(s.keyOff, "server %q: the %d variables of its envFile %s are copied as they are now (secrets as env() references); the file is not read again", s.name, len(fromFile), p)
			}
			for _, kv := range fromFile {
				if !slices.ContainsFunc(kvs, func(e keyValue) bool { return e.key == kv.key }) {
					kvs = append(kvs, kv)
				}
			}
		}
	}
	var out []entry
	for _, kv := range kvs {
		w := fmt.Sprintf("%s env %s", where, kv.key)
		out = append(out, c.envEntry(label, kv.key, c.interpolate(f, kv.value, w), w))
	}
	return out
}

// envEntry is what environment variable key = v becomes: v, or an env() reference when
// v holds a secret in clear.
func (c *converter) envEntry(label, key string, v value, where string) entry {
	if c.opts.KeepSecrets || !suspicious(v, secretName(key), credential) {
		return entry{key: key, val: v}
	}
	name := c.secretVar(v.hcl(), where, envVarName(key), envVarName(label+"_"+key))
	return entry{key: key, val: expression(envCall(name, nil)), comment: "not copied: set " + name}
}

// headerEntry is what header key: v becomes; an Authorization scheme stays in the clear
// ("Bearer ${env("X")}").
func (c *converter) headerEntry(label, key string, v value, where string) entry {
	if c.opts.KeepSecrets || !suspicious(v, sensitiveHeader(key), credential) {
		return entry{key: key, val: v}
	}
	name := envVarName(label + "_" + key)
	if m := authScheme.FindStringSubmatch(v.text()); m != nil && v.plain() {
		name = c.secretVar(m[3], where, name)
		return entry{key: key, val: value{{lit: m[1] + m[2]}, {expr: envCall(name, nil)}}, comment: "not copied: set " + name}
	}
	name = c.secretVar(v.hcl(), where, name)
	return entry{key: key, val: expression(envCall(name, nil)), comment: "not copied: set " + name}
}

var (
	flagRE       = lazyre.New(`^--?([A-Za-z][A-Za-z0-9_.-]*)$`)
	flagValueRE  = lazyre.New(`^(--?([A-Za-z][A-Za-z0-9_.-]*)=)(.+)$`)
	headerArgRE  = lazyre.New(`^([A-Za-z0-9-]+)(:\s*)(.+)$`)
	headerFlagRE = lazyre.New(`^(--header|-H|--headers)$`)
	assignRE     = lazyre.New(`^([A-Za-z_][A-Za-z0-9_]*)=(.+)$`)
)

// args converts a command's arguments. An argument holds a secret when it is a
// well-known token, the value of a secret-named flag (--api-key KEY, --token=KEY), a
// credential header after --header (as mcp-remote takes them), a variable assignment
// such as docker's -e NAME=VALUE that would be a secret in env, or a URL with one.
func (c *converter) args(f *file, label string, args []string, where string) []value {
	out := make([]value, 0, len(args))
	for i, a := range args {
		aw := fmt.Sprintf("%s argument %d", where, i+1)
		v := c.interpolate(f, a, aw)
		prev := ""
		if i > 0 {
			prev = args[i-1]
		}
		if c.opts.KeepSecrets || !v.plain() {
			out = append(out, v)
			continue
		}
		flagName := ""
		if m := flagRE.FindStringSubmatch(prev); m != nil {
			flagName = m[1]
		}
		switch m, h, e := flagValueRE.FindStringSubmatch(a), headerArgRE.FindStringSubmatch(a), assignRE.FindStringSubmatch(a); {
		case m != nil && suspicious(literal(m[3]), secretName(m[2]), prefixedToken):
			name := c.secretVar(m[3], aw, envVarName(label+"_"+m[2]))
			v = value{{lit: m[1]}, {expr: envCall(name, nil)}}
		case e != nil && suspicious(literal(e[2]), secretName(e[1]), credential):
			name := c.secretVar(e[2], aw, e[1], envVarName(label+"_"+e[1]))
			v = value{{lit: e[1] + "="}, {expr: envCall(name, nil)}}
		case h != nil && headerFlagRE.MatchString(prev):
			e := c.headerEntry(label, h[1], literal(h[3]), aw)
			v = append(value{{lit: h[1] + h[2]}}, e.val...).merge()
		case strings.Contains(a, "://"):
			v = c.urlValue(v, label, aw)
		case !strings.HasPrefix(a, "-") && suspicious(v, flagName != "" && secretName(flagName), prefixedToken):
			what := fmt.Sprintf("ARG%d", i+1)
			if flagName != "" {
				what = flagName
			}
			name := c.secretVar(a, aw, envVarName(label+"_"+what))
			v = expression(envCall(name, nil))
		}
		out = append(out, v)
	}
	return out
}

// urlValue replaces the secrets of a literal URL (a user-info password, a secret query
// parameter) with env() references.
func (c *converter) urlValue(v value, label, where string) value {
	if c.opts.KeepSecrets || !v.plain() {
		return v
	}
	s := v.text()
	var out value
	// user:password@ in the authority
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
			if colon := strings.IndexByte(rest[:at], ':'); colon >= 0 && colon+1 < at {
				pw := rest[colon+1 : at]
				name := c.secretVar(pw, where, envVarName(label+"_URL_PASSWORD"))
				out = append(out, part{lit: s[:i+3+colon+1]}, part{expr: envCall(name, nil)})
				s = rest[at:]
			}
		}
	}
	// secret query parameters
	q := strings.IndexByte(s, '?')
	if q < 0 {
		return append(out, part{lit: s}).merge()
	}
	out = append(out, part{lit: s[:q+1]})
	query, frag, hasFrag := strings.Cut(s[q+1:], "#")
	for j, kv := range strings.Split(query, "&") {
		if j > 0 {
			out = append(out, part{lit: "&"})
		}
		k, val, ok := strings.Cut(kv, "=")
		if ok && suspicious(literal(val), secretName(k), randomToken) {
			name := c.secretVar(val, where, envVarName(label+"_"+k))
			out = append(out, part{lit: k + "="}, part{expr: envCall(name, nil)})
			continue
		}
		out = append(out, part{lit: kv})
	}
	if hasFrag {
		out = append(out, part{lit: "#" + frag})
	}
	return out.merge()
}

// suspicious reports whether the literal text of v may hold a secret: byName when the
// name it is found under says so (and the text is not plainly harmless), or when a
// word of it passes isToken.
func suspicious(v value, byName bool, isToken func(string) bool) bool {
	for _, p := range v {
		t := strings.TrimSpace(p.lit)
		if p.expr != "" || t == "" {
			continue
		}
		if byName && hasAlnum(t) && !plainValue(t) && !authScheme.MatchString(t+" x") {
			return true
		}
		for _, w := range strings.Fields(t) {
			if isToken(w) {
				return true
			}
		}
	}
	return false
}

func hasAlnum(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
	})
}

// parseDotenv reads KEY=VALUE lines (export, comments, blank lines and quoted values as
// dotenv files have them), in order, the last of a repeated key winning.
func parseDotenv(data []byte) []keyValue {
	var out []keyValue
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			if v[0] == '"' {
				v = strings.ReplaceAll(v, `\n`, "\n")
			}
			v = v[1 : len(v)-1]
		} else if i := strings.Index(v, " #"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		if i := slices.IndexFunc(out, func(e keyValue) bool { return e.key == k }); i >= 0 {
			out[i].value = v
			continue
		}
		out = append(out, keyValue{k, v})
	}
	return out
}
