package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// TestImportCommand runs `import` through run: the configuration on stdout (or -o) and
// nothing else there, the snippet and the variables on stderr, no secret anywhere,
// an existing -o file kept unless --force, and problems reported with file:line:col.
func TestImportCommand(t *testing.T) {
	dir := t.TempDir()
	const token = "ghp_cmdFAKE0123456789abcdefABCDEF"
	desktop := filepath.Join(dir, "claude_desktop_config.json")
	os.WriteFile(desktop, []byte(`{"mcpServers": {"gh": {"command": "npx", "args": ["-y", "server-github"], "env": {"GITHUB_TOKEN": "`+token+`"}}}}`), 0o644)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{\n  \"mcpServers\": {\"a\": {\"url\": 7}}\n}\n"), 0o644)

	exec := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		code := 0
		if err != nil {
			code = 1
			var ex exitError
			if errors.As(err, &ex) {
				code = ex.code
			}
			reportError(&stderr, err)
		}
		return stdout.String(), stderr.String(), code
	}

	stdout, stderr, code := exec("import", desktop)
	if code != 0 {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	if _, diags := config.ParseWithOptions([]byte(stdout), "out.hcl", dir, config.Options{
		LookupEnv: func(string) (string, bool) { return "x", true },
	}); diags.HasErrors() {
		t.Errorf("stdout is not a configuration the proxy loads:\n%s\n%s", config.FormatDiagnostics(diags), stdout)
	}
	for _, want := range []string{`upstream "gh"`, `GITHUB_TOKEN = env("GITHUB_TOKEN")`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %s:\n%s", want, stdout)
		}
	}
	for _, want := range []string{"GITHUB_TOKEN", `"mcpServers"`, `"--config"`, "/absolute/path/to/proxy.hcl"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %s:\n%s", want, stderr)
		}
	}
	if strings.Contains(stdout+stderr, token) {
		t.Errorf("the token was copied:\n%s\n%s", stdout, stderr)
	}

	out := filepath.Join(dir, "proxy.hcl")
	if stdout, stderr, code := exec("import", "-o", out, desktop); code != 0 || stdout != "" || !strings.Contains(stderr, `"`+out+`"`) {
		t.Errorf("import -o: exit %d, stdout %q, stderr lacks the written path:\n%s", code, stdout, stderr)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("written file: %v %v", st, err)
	}
	if _, stderr, code := exec("import", "-o", out, desktop); code != 1 || !strings.Contains(stderr, "--force") {
		t.Errorf("import -o over an existing file: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := exec("import", "-o", out, "--force", desktop); code != 0 {
		t.Errorf("import -o --force: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := exec("validate", "--config", out); code != 1 || !strings.Contains(stderr, `"GITHUB_TOKEN" is not set`) {
		t.Errorf("validate without GITHUB_TOKEN: exit %d\n%s", code, stderr)
	}

	if _, stderr, code := exec("import", bad); code != 1 || !strings.Contains(stderr, bad+`:2:31: error: server "a": "url" must be a string`) {
		t.Errorf("import of a bad file: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := exec("import"); code != 2 || !strings.Contains(stderr, "usage: mcp-proxy import") {
		t.Errorf("import without files: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := exec("import", filepath.Join(dir, "missing.json")); code != 1 || !strings.Contains(stderr, "missing.json") {
		t.Errorf("import of a missing file: exit %d\n%s", code, stderr)
	}

	// The JSON file itself as --config: imported in memory, secrets used as they are.
	if stdout, stderr, code := exec("validate", "--config", desktop); code != 0 || !strings.Contains(stdout, "OK (1 upstreams)") {
		t.Errorf("validate --config claude_desktop_config.json: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, stderr, code := exec("validate", "--config", bad); code != 1 || !strings.Contains(stderr, bad+`: invalid configuration`) {
		t.Errorf("validate --config bad.json: exit %d\n%s", code, stderr)
	}
	badHost := filepath.Join(dir, "badurl.json")
	os.WriteFile(badHost, []byte(`{"mcpServers": {"a": {"url": "ftp://h/x"}}}`), 0o644)
	if _, stderr, code := exec("validate", "--config", badHost); code != 1 || !strings.Contains(stderr, `Invalid url`) || !strings.Contains(stderr, "mcp-proxy import "+badHost) {
		t.Errorf("validate --config with a bad url: exit %d\n%s", code, stderr)
	}
}
