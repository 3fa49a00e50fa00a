package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestInstallPrefixAndNodeModules(t *testing.T) {
	for _, tc := range []struct{ prog, prefix, nm string }{
		{"/usr/bin/node", "/usr", ""},
		{"/bin/sh", "", ""}, // never "/"
		{"/home/me/venv/bin/python3", "/home/me/venv", ""},
		{"/srv/app/node_modules/@scope/pkg/dist/index.js", "", "/srv/app/node_modules"},
		{"/srv/app/node_modules/a/node_modules/b/bin/x.js", "/srv/app/node_modules/a/node_modules/b", "/srv/app/node_modules"},
	} {
		if got := installPrefix(tc.prog); got != tc.prefix {
			t.Errorf("installPrefix(%s) = %q, want %q", tc.prog, got, tc.prefix)
		}
		if got := outerNodeModules(tc.prog); got != tc.nm {
			t.Errorf("outerNodeModules(%s) = %q, want %q", tc.prog, got, tc.nm)
		}
	}
}

// A #!/usr/bin/env script is followed to the interpreter on the child's PATH, and an
// interpreter's script argument is part of the chain.
func TestProgramChain(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	interp := filepath.Join(bin, "node")
	if err := os.WriteFile(interp, []byte("\x7fELF"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "server.js")
	if err := os.WriteFile(script, []byte("#!/usr/bin/env node\nconsole.log(1)\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(bin, "server")
	if err := os.Symlink(script, link); err != nil {
		t.Fatal(err)
	}
	paths := func(ps []program) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.path+" "+p.why)
		}
		return out
	}
	env := []string{"PATH=" + bin}
	got := paths(programChain(link, []string{link}, env))
	want := []string{link + " executable (link)", script + " executable", "/usr/bin/env interpreter", interp + " interpreter"}
	if !slices.Equal(got, want) {
		t.Errorf("chain of a #!/usr/bin/env script:\n got %q\nwant %q", got, want)
	}
	got = paths(programChain(interp, []string{"node", "--no-warnings", script, "stdio"}, env))
	want = []string{interp + " executable", script + " script"}
	if !slices.Equal(got, want) {
		t.Errorf("chain of node on a script:\n got %q\nwant %q", got, want)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		p  Policy
		ok bool
	}{
		{Policy{}, true},
		{Policy{Read: []string{"/srv"}, Network: NetworkLoopback}, true},
		{Policy{Network: NetworkPorts, Ports: []uint16{443}}, true},
		{Policy{Network: NetworkPorts}, false},
		{Policy{Network: NetworkAny, Ports: []uint16{443}}, false},
		{Policy{Write: []string{"rel"}}, false},
		{Policy{Network: "lan"}, false},
	} {
		if err := tc.p.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v, want ok %v", tc.p, err, tc.ok)
		}
	}
}
