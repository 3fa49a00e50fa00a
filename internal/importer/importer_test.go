package importer

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/config"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// workspace is the ${workspaceFolder} of the golden tests, so that their output does not
// depend on where the repository is.
const workspace = "/home/me/project"

// fakeFiles stands in for the disk when a server has an envFile.
func fakeFiles(files map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
}

// TestConvertGolden converts each client's file (and a merge of two) and compares the
// configuration, the warnings and the snippets with testdata/golden. Every output must
// load with the proxy's own loader, and no secret of the inputs may appear in any of
// it.
func TestConvertGolden(t *testing.T) {
	dotenv := "# shared settings\nexport FETCH_TIMEOUT=30\nFETCH_SECRET=\"dotenv-Secret-0123456789\"\nREGION=us-east-1\n"
	tests := []struct {
		name     string
		files    []string
		secrets  []string // literal values that must not be written
		upstream []string
	}{
		{
			name:     "claude_desktop",
			files:    []string{"testdata/claude_desktop_config.json"},
			secrets:  []string{"ghp_FAKEexample0123456789abcdefABCDEF", "BSAfake1234567890abcdefgh", "abc123SECRETvalue999", "sk-live-FAKE0123456789abcdef"},
			upstream: []string{"github", "filesystem", "brave-search", "remote-via-mcp-remote"},
		},
		{
			name:     "cursor",
			files:    []string{"testdata/cursor/.cursor/mcp.json"},
			secrets:  []string{"lin_api_FAKE0123456789abcdefghij", "Zx9fake0Key8Value7Here6", "not-a-prefix-but-named", "ghp_FAKEexample0123456789abcdefABCD", "correct horse", "s3cret"},
			upstream: []string{"notes", "linear", "search", "docker"},
		},
		{
			name:     "vscode",
			files:    []string{"testdata/vscode/.vscode/mcp.json"},
			secrets:  []string{"dotenv-Secret-0123456789"},
			upstream: []string{"github", "fetch", "legacy"},
		},
		{
			name:     "claude_code",
			files:    []string{"testdata/claude-code/.mcp.json"},
			secrets:  []string{"sk-ant-FAKE0123456789abcdefABCDEF"},
			upstream: []string{"api", "events", "local"},
		},
		{
			name:     "merged",
			files:    []string{"testdata/claude_desktop_config.json", "testdata/vscode/.vscode/mcp.json"},
			secrets:  []string{"ghp_FAKEexample0123456789abcdefABCDEF", "dotenv-Secret-0123456789"},
			upstream: []string{"github", "filesystem", "brave-search", "remote-via-mcp-remote", "fetch", "legacy"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var srcs []Source
			for _, p := range tt.files {
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				srcs = append(srcs, Source{Path: p, Data: data})
			}
			res, err := Convert(srcs, Options{Workspace: workspace, ReadFile: fakeFiles(map[string]string{workspace + "/.env": dotenv})})
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			if !slices.Equal(res.Upstreams, tt.upstream) {
				t.Errorf("upstreams %q, want %q", res.Upstreams, tt.upstream)
			}
			var out strings.Builder
			out.Write(res.HCL)
			out.WriteString("\n# ---- warnings\n")
			for _, w := range res.Warnings {
				fmt.Fprintf(&out, "# %s\n", w)
			}
			for _, f := range res.Formats {
				s, err := Snippet(f, "mcp-proxy", "/usr/local/bin/mcp-proxy", []string{"run", "--config", "/home/me/proxy.hcl"}, res.Vars)
				if err != nil {
					t.Fatal(err)
				}
				if !json.Valid(s) {
					t.Errorf("snippet for %s is not JSON:\n%s", f, s)
				}
				fmt.Fprintf(&out, "# ---- snippet for %s\n", f)
				for _, line := range strings.SplitAfter(strings.TrimSuffix(string(s), "\n"), "\n") {
					out.WriteString("# " + line)
				}
				out.WriteString("\n")
			}
			for _, s := range tt.secrets {
				if strings.Contains(out.String(), s) {
					t.Errorf("the output contains the secret %q:\n%s", s, out.String())
				}
			}
			checkGolden(t, filepath.Join("testdata", "golden", tt.name+".hcl"), out.String())

			// The proxy loads it, every variable it reads being set.
			cfg, diags := config.ParseWithOptions(res.HCL, tt.name+".hcl", t.TempDir(), config.Options{
				LookupEnv: func(name string) (string, bool) { return "https://set-" + strings.ToLower(name), true },
			})
			if diags.HasErrors() {
				t.Fatalf("the proxy does not load the configuration:\n%s", config.FormatDiagnostics(diags))
			}
			for i, u := range cfg.Upstreams {
				if u.Name != tt.upstream[i] || u.Namespace != u.Name {
					t.Errorf("upstream %d: %q with namespace %q, want %q with its name", i, u.Name, u.Namespace, tt.upstream[i])
				}
			}
		})
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s differs (go test -update rewrites it); got:\n%s", path, got)
	}
}

// TestConvertValues checks what single values become, one server each.
func TestConvertValues(t *testing.T) {
	tests := []struct {
		name, json string
		keep       bool
		want       []string // lines (or fragments) of the upstream block
		absent     []string
	}{
		{
			name:   "secret env by name, plain values kept",
			json:   `{"mcpServers":{"s":{"command":"x","env":{"API_KEY":"hunter2","MAX_TOKENS":"4096","AUTH_URL":"https://auth.example.com","KEY_FILE":"/etc/key.pem","DEBUG_AUTH":"false","GIT_AUTHOR_NAME":"Ada Lovelace"}}}}`,
			want:   []string{`API_KEY = env("API_KEY") # not copied: set API_KEY`, `MAX_TOKENS = "4096"`, `AUTH_URL = "https://auth.example.com"`, `KEY_FILE = "/etc/key.pem"`, `DEBUG_AUTH = "false"`, `GIT_AUTHOR_NAME = "Ada Lovelace"`},
			absent: []string{"hunter2"},
		},
		{
			name:   "secret env by value",
			json:   `{"mcpServers":{"s":{"command":"x","env":{"SETTING":"Ab3dEf6hIj9kLm2nOp5qRs8t","MODEL":"claude-3-5-sonnet-20241022","HEX":"0123456789abcdef0123456789abcdef"}}}}`,
			want:   []string{`SETTING = env("SETTING")`, `MODEL = "claude-3-5-sonnet-20241022"`, `HEX = env("HEX")`},
			absent: []string{"Ab3dEf6hIj9kLm2nOp5qRs8t", "0123456789abcdef0123456789abcdef"},
		},
		{
			name:   "docker -e NAME=VALUE",
			json:   `{"mcpServers":{"gh":{"command":"docker","args":["run","-e","GITHUB_PERSONAL_ACCESS_TOKEN=gh-secret-value","-e","LOG=debug","-e","DSN=postgres://u:pw9@db/x","img"]}}}`,
			want:   []string{`"GITHUB_PERSONAL_ACCESS_TOKEN=${env("GITHUB_PERSONAL_ACCESS_TOKEN")}"`, `"LOG=debug"`, `"DSN=${env("DSN")}"`},
			absent: []string{"gh-secret-value", "pw9"},
		},
		{
			name: "kept in memory",
			json: `{"mcpServers":{"s":{"command":"x","args":["--token","ghp_0123456789abcdefghij"],"env":{"API_KEY":"hunter2"}}}}`,
			keep: true,
			want: []string{`API_KEY = "hunter2"`, `"ghp_0123456789abcdefghij"`},
		},
		{
			name: "template sequences are escaped",
			json: `{"mcpServers":{"s":{"command":"x","args":["%{if}","$${x}","cost: $${PRICE}","a\"b\\c\nd"]}}}`,
			want: []string{`"%%{if}"`, `"${"$"}${env("x")}"`, `"a\"b\\c\nd"`},
		},
		{
			name: "dollar before an interpolation",
			json: `{"mcpServers":{"s":{"command":"x","args":["$${PRICE}","100%${UNIT}"]}}}`,
			want: []string{`"${"$"}${env("PRICE")}"`, `"100${"%"}${env("UNIT")}"`},
		},
		{
			name: "claude code defaults, nested",
			json: `{"mcpServers":{"s":{"command":"x","args":["${A:-${B:-b}}"]}}}`,
			want: []string{`env("A", env("B", "b"))`},
		},
		{
			name: "inputs without default, camelCase id",
			json: `{"inputs":[{"type":"promptString","id":"apiKey","password":true,"default":"no"}],"servers":{"s":{"type":"stdio","command":"x","env":{"K":"${input:apiKey}"}}}}`,
			want: []string{`K = env("API_KEY")`},
		},
		{
			name: "env names that are not identifiers are quoted",
			json: `{"mcpServers":{"s":{"command":"x","env":{"my.var":"1","true":"2"}}}}`,
			want: []string{`"my.var" = "1"`, `"true" = "2"`},
		},
		{
			name: "numbers in args",
			json: `{"mcpServers":{"s":{"command":"x","args":["--port",8080,true]}}}`,
			want: []string{`["x", "--port", "8080", "true"]`},
		},
		{
			name:   "two servers with the same secret name and different values",
			json:   `{"mcpServers":{"a":{"command":"x","env":{"TOKEN":"first-secret"}},"b":{"command":"x","env":{"TOKEN":"second-secret"}},"c":{"command":"x","env":{"TOKEN":"first-secret"}}}}`,
			want:   []string{`TOKEN = env("TOKEN")`, `TOKEN = env("B_TOKEN")`},
			absent: []string{"first-secret", "second-secret", "C_TOKEN"},
		},
		{
			name:   "header without scheme and URL password",
			json:   `{"mcpServers":{"s":{"url":"https://u:pw-123@h.example/mcp?x=1&token=abc","headers":{"X-Api-Key":"abc","Accept":"text/plain"}}}}`,
			want:   []string{`url = "https://u:${env("S_URL_PASSWORD")}@h.example/mcp?x=1&token=${env("S_TOKEN")}"`, `X-Api-Key = env("S_X_API_KEY")`, `Accept = "text/plain"`},
			absent: []string{"pw-123", "=abc", `"abc"`},
		},
		{
			name: "streamable http aliases",
			json: `{"mcpServers":{"s":{"type":"streamableHttp","url":"http://localhost:1/mcp"}}}`,
			want: []string{`transport = "streamable-http"`},
		},
		{
			name: "project file runs servers in the workspace",
			json: `{"mcpServers":{"s":{"command":"x"}}}`,
			want: []string{`cwd = "/home/me/project"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "a.json"
			if strings.HasPrefix(tt.name, "project") {
				path = "/somewhere/.mcp.json"
			}
			res, err := Convert([]Source{{Path: path, Data: []byte(tt.json)}}, Options{Workspace: workspace, KeepSecrets: tt.keep})
			if err != nil {
				t.Fatal(err)
			}
			got := string(res.HCL)
			norm := strings.Join(strings.Fields(got), " ")
			for _, w := range tt.want {
				if !strings.Contains(norm, strings.Join(strings.Fields(w), " ")) {
					t.Errorf("output lacks %s:\n%s", w, got)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(got, a) {
					t.Errorf("output contains %s:\n%s", a, got)
				}
			}
			_, diags := config.ParseWithOptions(res.HCL, "x.hcl", "/", config.Options{LookupEnv: func(string) (string, bool) { return "v", true }})
			if diags.HasErrors() {
				t.Errorf("the proxy does not load it:\n%s%s", config.FormatDiagnostics(diags), got)
			}
		})
	}
}

// TestConvertErrors checks that every problem is reported with the file and position.
func TestConvertErrors(t *testing.T) {
	tests := []struct {
		name, json string
		want       []string
	}{
		{"syntax", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",,}\n  }\n}", []string{"bad.json:3:27: error: invalid JSON: invalid character '}'"}},
		{"not an object", `["x"]`, []string{"bad.json:1:1: error: expected a JSON object"}},
		{"no servers", `{"globalShortcut": "x"}`, []string{`bad.json: error: no "mcpServers" object`}},
		{"both formats", `{"mcpServers": {}, "servers": {}}`, []string{`bad.json:1:20: error: the file has both`}},
		{"neither command nor url", "{\"mcpServers\": {\n\"a\": {\"args\": []}}}", []string{`bad.json:2:1: error: server "a" has neither "command" nor "url"`}},
		{"both command and url", `{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}`, []string{`server "a" has both "command" and "url"`}},
		{"unknown type", `{"servers": {"a": {"type": "websocket", "url": "ws://h"}}}`, []string{`server "a" has type "websocket"`}},
		{"http without url", `{"servers": {"a": {"type": "http"}}}`, []string{`server "a" (type "http") needs a "url"`}},
		{"args of objects", `{"mcpServers": {"a": {"command": "x", "args": [{"k": 1}]}, "b": {"command": 1}}}`,
			[]string{`bad.json:1:47: error: server "a": "args" must be an array of strings`, `bad.json:1:77: error: server "b": "command" must be a string`}},
		{"server not an object", `{"mcpServers": {"a": "x"}}`, []string{`server "a": expected a JSON object`}},
		{"empty", `{"mcpServers": {}}`, []string{"bad.json: error: no MCP servers found"}},
		{"empty file", "", []string{"bad.json: error: invalid JSON: unexpected end of JSON input"}},
		{"unclosed", `{"servers": {"a": {"command": "x"}}`, []string{"bad.json:1:35: error: invalid JSON: unexpected end of JSON input"}},
		{"inputs not an array", `{"inputs": {}, "servers": {"a": {"command": "x"}}}`, []string{`bad.json:1:12: error: "inputs" must be an array of objects`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert([]Source{{Path: "bad.json", Data: []byte(tt.json)}}, Options{})
			var ie *Error
			if !errors.As(err, &ie) {
				t.Fatalf("Convert: %v, want an *Error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestConvertDuplicates: a name already imported from an earlier file is skipped with
// a warning naming both; within a file the later definition wins; names that become
// the same label are numbered.
func TestConvertDuplicates(t *testing.T) {
	a := Source{Path: "a.json", Data: []byte(`{"mcpServers": {"gh": {"command": "from-a"}, "my server": {"command": "x"}}}`)}
	b := Source{Path: "b.json", Data: []byte("{\"servers\": {\n\"gh\": {\"command\": \"from-b\"}, \"my-server\": {\"command\": \"y\"}, \"z\": {\"command\": \"z1\"}, \"z\": {\"command\": \"z2\"}}}")}
	res, err := Convert([]Source{a, b}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"gh", "my-server", "my-server-2", "z"}; !slices.Equal(res.Upstreams, want) {
		t.Errorf("upstreams %q, want %q", res.Upstreams, want)
	}
	got := string(res.HCL)
	for _, w := range []string{`["from-a"]`, `["z2"]`} {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %s:\n%s", w, got)
		}
	}
	for _, a := range []string{"from-b", "z1"} {
		if strings.Contains(got, a) {
			t.Errorf("output has %s:\n%s", a, got)
		}
	}
	var warnings []string
	for _, w := range res.Warnings {
		warnings = append(warnings, w.String())
	}
	all := strings.Join(warnings, "\n")
	for _, w := range []string{
		`b.json:2:1: warning: server "gh" is also defined in a.json; keeping that one`,
		`a.json:1:46: warning: server "my server" becomes upstream "my-server"`,
		`b.json: warning: server "my-server" becomes upstream "my-server-2"`,
		`warning: server "z" is defined twice in this file; the later definition wins`,
	} {
		if !strings.Contains(all, strings.TrimPrefix(w, "b.json: ")) {
			t.Errorf("warnings lack %q:\n%s", w, all)
		}
	}
}

func TestIsClientFile(t *testing.T) {
	tests := []struct {
		path, data string
		want       bool
	}{
		{"claude_desktop_config.json", "", true},
		{"MCP.JSON", "", true},
		{"proxy.hcl", "upstream \"a\" {}", false},
		{"proxy.hcl", "# comment\n{", false},
		{"mcp", "\ufeff  // c\n {\"servers\": {}}", true},
		{"mcp", "/* c */{}", true},
	}
	for _, tt := range tests {
		if got := IsClientFile(tt.path, []byte(tt.data)); got != tt.want {
			t.Errorf("IsClientFile(%q, %q) = %v", tt.path, tt.data, got)
		}
	}
}

func TestSnippetFormats(t *testing.T) {
	vars := []Var{
		{Name: "GH", Input: &Input{ID: "gh", Description: "GitHub", Password: true}},
		{Name: "OPT", Input: &Input{ID: "opt"}, Optional: true},
		{Name: "TOKEN", Secret: true, Uses: []string{`upstream "a" env TOKEN`}},
		{Name: "HOME", Uses: []string{`upstream "a" cwd`}},
	}
	desk, err := Snippet(FormatMCPServers, "mcp-proxy", "/bin/mcp-proxy", []string{"run", "--config", "/p.hcl"}, vars)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		MCPServers map[string]struct {
			Type    string
			Command string
			Args    []string
			Env     map[string]string
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(desk, &d); err != nil {
		t.Fatal(err)
	}
	e := d.MCPServers["mcp-proxy"]
	if e.Command != "/bin/mcp-proxy" || !slices.Equal(e.Args, []string{"run", "--config", "/p.hcl"}) || e.Type != "" {
		t.Errorf("mcpServers entry %+v", e)
	}
	if len(e.Env) != 2 || !strings.Contains(e.Env["TOKEN"], "TOKEN") || !strings.Contains(e.Env["GH"], "GH") {
		t.Errorf("mcpServers env %q, want placeholders for GH and TOKEN only", e.Env)
	}

	vs, err := Snippet(FormatVSCode, "mcp-proxy", "/bin/mcp-proxy", []string{"run"}, vars)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Servers map[string]struct {
			Type string
			Env  map[string]string
		}
		Inputs []struct {
			ID       string
			Password bool
		}
	}
	if err := json.Unmarshal(vs, &v); err != nil {
		t.Fatal(err)
	}
	s := v.Servers["mcp-proxy"]
	if s.Type != "stdio" || s.Env["GH"] != "${input:gh}" || s.Env["OPT"] != "${input:opt}" || s.Env["TOKEN"] != "${input:token}" || len(s.Env) != 3 {
		t.Errorf("VS Code entry %+v", s)
	}
	if len(v.Inputs) != 3 || v.Inputs[2].ID != "token" || !v.Inputs[2].Password {
		t.Errorf("VS Code inputs %+v", v.Inputs)
	}
}
