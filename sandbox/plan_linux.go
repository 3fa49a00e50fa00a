package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// A Rule grants access beneath one path.
type Rule struct {
	Path     string
	Access   uint64 // Landlock filesystem rights (before masking for a non-directory)
	Why      string // what asked for it: "read", "write", "executable", "shared libraries" …
	Optional bool   // skipped when the path does not exist (what the runtime might use)
}

// Write reports whether the rule grants more than reading.
func (r Rule) Write() bool { return r.Access&^uint64(accessRead) != 0 }

// runtimeRules returns what the command's runtime needs beyond the policy, found from
// the command itself rather than from a list per machine:
//
//   - the executable, and for a "#!" script its interpreter, followed through
//     "#!/usr/bin/env node" to the node on the child's PATH, up to four levels;
//   - each of those programs' installation prefix (/usr for /usr/bin/node, a virtual
//     environment for venv/bin/python, ~/.nvm/versions/node/v22 for nvm's node): the
//     directory above the bin directory it lives in, read-only, for the runtime's own
//     libraries (node's npm, Python's standard library);
//   - a script inside a node_modules tree: the outermost node_modules directory, where
//     its dependencies are;
//   - the shared libraries: the directories the dynamic loader searches (/lib, /lib64,
//     /usr/lib … and those /etc/ld.so.conf names);
//   - the /etc files a C library or runtime reads (ld.so.cache, passwd, group,
//     nsswitch.conf, localtime), and with a network the resolver's files and the
//     certificate stores;
//   - /dev/null, /dev/zero, /dev/full read-write, /dev/random and /dev/urandom read;
//   - for npm and npx: the npm cache (writable: npx installs into it), not ~/.npmrc
//     (registry tokens live there: list it in read to give it); for
//     uv and uvx: uv's cache (writable) and its Python installations.
func runtimeRules(path string, args, env []string, network string) []Rule {
	var rules []Rule
	add := func(p string, access uint64, why string) {
		rules = append(rules, Rule{Path: p, Access: access, Why: why, Optional: true})
	}
	progs := programChain(path, args, env)
	for _, prog := range progs {
		why := prog.why
		add(prog.path, accessRead, why)
		if pfx := installPrefix(prog.path); pfx != "" {
			add(pfx, accessRead, why+"'s prefix")
		}
		if nm := outerNodeModules(prog.path); nm != "" {
			add(nm, accessRead, "node_modules")
		}
	}
	for _, d := range libraryDirs() {
		add(d, accessRead, "shared libraries")
	}
	for _, f := range []string{"/etc/ld.so.cache", "/etc/ld.so.preload", "/etc/passwd", "/etc/group",
		"/etc/nsswitch.conf", "/etc/localtime", "/usr/share/zoneinfo", "/etc/ssl/openssl.cnf",
		"/usr/lib/ssl/openssl.cnf", "/etc/pki/tls/openssl.cnf",
		// The public certificate stores (a runtime loads them at start), never /etc/ssl/private.
		"/etc/ssl/certs", "/etc/pki/tls/certs", "/etc/pki/ca-trust", "/etc/ca-certificates",
		"/etc/ca-certificates.conf", "/usr/share/ca-certificates"} {
		add(f, accessRead, "runtime files")
	}
	// What the system tells every process about itself (memory, processors, limits):
	// node, libuv and V8 read these at start. Not /proc as a whole: other processes'
	// command lines are there.
	for _, f := range []string{"/proc/meminfo", "/proc/stat", "/proc/cpuinfo", "/proc/sys/vm/overcommit_memory",
		"/sys/devices/system/cpu", "/sys/kernel/mm/transparent_hugepage"} {
		add(f, accessRead, "system information")
	}
	if network != NetworkNone {
		for _, f := range []string{"/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf"} {
			add(f, accessRead, "network files")
		}
	}
	for _, f := range []string{"/dev/null", "/dev/zero", "/dev/full"} {
		add(f, accessDevice, "devices")
	}
	for _, f := range []string{"/dev/random", "/dev/urandom"} {
		add(f, unix.LANDLOCK_ACCESS_FS_READ_FILE, "devices")
	}
	home := lookupEnv(env, "HOME")
	for _, prog := range progs {
		switch base := filepath.Base(prog.path); {
		case base == "npm-cli.js" || base == "npx-cli.js" || base == "npm" || base == "npx":
			cache := lookupEnv(env, "npm_config_cache")
			if cache == "" && home != "" {
				cache = filepath.Join(home, ".npm")
			}
			if cache != "" {
				add(cache, fsRightsV1|fsReferV2|fsTruncateV3, "npm cache")
			}
		case base == "uv" || base == "uvx":
			cache := lookupEnv(env, "UV_CACHE_DIR")
			if cache == "" && home != "" {
				cache = filepath.Join(home, ".cache", "uv")
			}
			if cache != "" {
				add(cache, fsRightsV1|fsReferV2|fsTruncateV3, "uv cache")
			}
			if home != "" {
				add(filepath.Join(home, ".local", "share", "uv"), accessRead, "uv's Pythons")
			}
		}
	}
	return dedupe(rules)
}

// program is one file of the chain that runs: the executable, a link to it, its interpreter.
type program struct{ path, why string }

// usesNpm reports whether npm or npx is among the programs that run.
func usesNpm(progs []program) bool {
	for _, p := range progs {
		switch filepath.Base(p.path) {
		case "npm-cli.js", "npx-cli.js", "npm", "npx":
			return true
		}
	}
	return false
}

// programChain returns the executable (and the link it was found through) and, while it
// is a "#!" script, its interpreter, at most four levels deep; for an interpreter run on
// a script (node index.js, python server.py), the script.
func programChain(path string, args, env []string) []program {
	var chain []program
	why := "executable"
	for depth := 0; depth < 4 && path != ""; depth++ {
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			break
		}
		if path != real {
			chain = append(chain, program{path, why + " (link)"})
		}
		chain = append(chain, program{real, why})
		interp, arg := shebang(real)
		if interp == "" {
			if depth == 0 {
				if script := scriptArg(real, args); script != "" {
					if r, err := filepath.EvalSymlinks(script); err == nil {
						chain = append(chain, program{r, "script"})
					}
				}
			}
			break
		}
		why = "interpreter"
		if filepath.Base(interp) == "env" && arg != "" {
			// #!/usr/bin/env node: env is read and executed, then node from PATH.
			chain = append(chain, program{interp, why})
			name := strings.Fields(arg)
			if len(name) > 0 && name[0] == "-S" {
				name = name[1:]
			}
			if len(name) == 0 {
				break
			}
			interp = lookPath(name[0], lookupEnv(env, "PATH"))
		}
		path = interp
	}
	return chain
}

// scriptArg returns the script an interpreter (node, python, bun, deno, ruby, perl) is
// run on: its first argument that is not an option, when that is a file; else "".
func scriptArg(interp string, args []string) string {
	base := filepath.Base(interp)
	switch {
	case base == "node" || base == "nodejs" || base == "bun" || base == "deno" || base == "ruby" || base == "perl",
		strings.HasPrefix(base, "python"):
	default:
		return ""
	}
	for _, a := range args[min(1, len(args)):] {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if st, err := os.Stat(a); err == nil && st.Mode().IsRegular() {
			if abs, err := filepath.Abs(a); err == nil {
				return abs
			}
		}
		return ""
	}
	return ""
}

// shebang returns the interpreter and its argument of a "#!" script, or "".
func shebang(path string) (interp, arg string) {
	f, err := os.Open(path)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := f.Read(buf)
	buf = buf[:n]
	if !bytes.HasPrefix(buf, []byte("#!")) {
		return "", ""
	}
	line := buf[2:]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	fields := strings.SplitN(strings.TrimSpace(string(line)), " ", 2)
	if len(fields) == 0 || fields[0] == "" {
		return "", ""
	}
	if len(fields) == 2 {
		arg = strings.TrimSpace(fields[1])
	}
	return fields[0], arg
}

// lookPath finds name in the child's PATH (the proxy's own if the child's is unset).
func lookPath(name, path string) string {
	if strings.Contains(name, "/") {
		return name
	}
	if path == "" {
		p, err := exec.LookPath(name)
		if err != nil {
			return ""
		}
		return p
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// installPrefix returns the directory above the bin (or sbin) directory prog is in, or
// "" when it is not in one, or when that is the root (a program in /bin grants no "/").
func installPrefix(prog string) string {
	dir := filepath.Dir(prog)
	if b := filepath.Base(dir); b != "bin" && b != "sbin" {
		return ""
	}
	pfx := filepath.Dir(dir)
	if pfx == "/" {
		return ""
	}
	return pfx
}

// outerNodeModules returns the outermost node_modules directory above prog, or "".
func outerNodeModules(prog string) string {
	const nm = "/node_modules/"
	if i := strings.Index(prog, nm); i >= 0 {
		return prog[:i+len(nm)-1]
	}
	return ""
}

// libraryDirs returns the directories the dynamic loader searches: the standard ones and
// those listed in /etc/ld.so.conf and the files it includes.
func libraryDirs() []string {
	dirs := []string{"/lib", "/lib64", "/lib32", "/libx32", "/usr/lib", "/usr/lib64", "/usr/lib32",
		"/usr/libx32", "/usr/local/lib"}
	seen := map[string]bool{}
	var read func(file string, depth int)
	read = func(file string, depth int) {
		if depth > 3 || seen[file] {
			return
		}
		seen[file] = true
		f, err := os.Open(file)
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			switch {
			case strings.HasPrefix(line, "include "):
				pat := strings.TrimSpace(strings.TrimPrefix(line, "include "))
				if !filepath.IsAbs(pat) {
					pat = filepath.Join(filepath.Dir(file), pat)
				}
				matches, _ := filepath.Glob(pat)
				for _, m := range matches {
					read(m, depth+1)
				}
			case filepath.IsAbs(line):
				dirs = append(dirs, filepath.Clean(line))
			}
		}
	}
	read("/etc/ld.so.conf", 0)
	return dirs
}

// dedupe drops repeated paths, keeping the widest access and the first reason.
func dedupe(rules []Rule) []Rule {
	idx := map[string]int{}
	var out []Rule
	for _, r := range rules {
		r.Path = filepath.Clean(r.Path)
		if i, ok := idx[r.Path]; ok {
			out[i].Access |= r.Access
			out[i].Optional = out[i].Optional && r.Optional
			continue
		}
		idx[r.Path] = len(out)
		out = append(out, r)
	}
	return out
}

// lookupEnv returns the last value of key in a KEY=value list.
func lookupEnv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			v = kv[len(key)+1:]
		}
	}
	return v
}

// setEnv returns env with key set to value (replacing earlier settings).
func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// describeRules renders rules for validate, one per line, sorted by path.
func describeRules(rules []Rule) []string {
	var lines []string
	for _, r := range rules {
		if r.Optional {
			if _, err := os.Lstat(r.Path); err != nil {
				continue
			}
		}
		mode := "read"
		if r.Write() {
			mode = "write"
		}
		lines = append(lines, fmt.Sprintf("%-5s %s (%s)", mode, r.Path, r.Why))
	}
	sort.Strings(lines)
	return lines
}
