package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// clientFile writes the template testdata/import/name into dir at rel (such as
// .vscode/mcp.json), with each {{KEY}} replaced, and returns its path. The templates
// follow each client's documented format; only the paths of the test servers, known
// once they are built, are filled in.
func clientFile(t *testing.T, dir, rel, name string, vals map[string]string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "import", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	vals["EVERYTHING"], vals["TESTSERVER"], vals["NPM_EVERYTHING"] = everythingBin, testserverBin, npmEverything
	for k, v := range vals {
		s = strings.ReplaceAll(s, "{{"+k+"}}", v)
	}
	if i := strings.Index(s, "{{"); i >= 0 {
		t.Fatalf("%s: placeholder left at %q", name, s[i:min(len(s), i+20)])
	}
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// proxyOut runs a one-shot proxy command with extra environment variables and returns
// its stdout and stderr.
func proxyOut(t *testing.T, env []string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(proxyBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// toolsJSON is `mcp-proxy tools --json` on cfg.
func toolsJSON(t *testing.T, env []string, cfg string) []map[string]string {
	t.Helper()
	out, stderr, err := proxyOut(t, env, "tools", "--config", cfg, "--json", "--log-level", "debug") // the log is shown only on failure
	if err != nil {
		t.Fatalf("tools --config %s: %v\n%s", cfg, err, stderr)
	}
	var rows []map[string]string
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("tools --json: %v\n%s", err, out)
	}
	return rows
}

// startAuthFront puts a reverse proxy in front of the HTTP server at target that
// refuses (403, so that no OAuth starts) every request whose Authorization header is
// not want, and counts them.
func startAuthFront(t *testing.T, target, want string) (string, *atomic.Int32) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.FlushInterval = -1 // event streams as they come
	var refused atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want || r.Header.Get("X-Team") != "platform" {
			refused.Add(1)
			http.Error(w, "wrong credentials", http.StatusForbidden)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + u.Path, &refused
}

// TestImportClientFiles imports a file of each client's format (Claude Desktop, Cursor,
// VS Code with inputs and comments, Claude Code with a remote server and headers)
// whose servers are the real test servers: the written configuration must pass
// validate, hold none of the fake secrets put in the JSON, and list exactly the tools
// of the same servers configured by hand, namespaced by server name; calls through it
// reach the servers with the environment, working directory and headers the JSON
// gave them.
func TestImportClientFiles(t *testing.T) {
	t.Parallel()
	type tc struct {
		name, template, rel string
		vals                map[string]string
		secret              string   // the fake secret placed in the JSON
		env                 []string // what the imported configuration reads
		hand                func(dir string) string
		check               func(t *testing.T, dir, cfg, jsonPath string, env []string)
	}
	call := func(t *testing.T, env []string, cfg, tool, args, want string) {
		t.Helper()
		out, stderr, err := proxyOut(t, env, "call", "--config", cfg, "--log-level", "debug", tool, args) // the log is shown only on failure
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("call %s %s: %v, want %q in\n%s\n%s", tool, args, err, want, out, stderr)
		}
	}
	const desktopToken = "ghp_e2eFAKE0123456789abcdefABCDEF"
	const remoteToken = "sk-e2e-FAKE0123456789abcdefABCD"
	cases := []tc{
		{
			name: "claude desktop", template: "claude_desktop_config.json", rel: "Claude/claude_desktop_config.json",
			vals: map[string]string{"TOKEN": desktopToken}, secret: desktopToken,
			env: []string{"GITHUB_TOKEN=" + desktopToken},
			hand: func(string) string {
				return everythingUpstream("everything", "everything") + testUpstream("misbehave", "misbehave", []string{"-name", "desktop"}, "")
			},
			check: func(t *testing.T, _, cfg, _ string, env []string) {
				call(t, env, cfg, "misbehave__env", `{"name":"GITHUB_TOKEN"}`, desktopToken)
				call(t, env, cfg, "misbehave__env", `{"name":"LOG_LEVEL"}`, "debug")
			},
		},
		{
			name: "cursor", template: "cursor-mcp.json", rel: "project/.cursor/mcp.json",
			vals: map[string]string{}, env: []string{"E2E_NOTES_TOKEN=notes-e2e"},
			hand: func(dir string) string {
				return npmUpstream("npm-everything", "npm-everything") +
					testUpstream("files", "files", []string{"-name", "cursor", "-files", filepath.Join(dir, "project", "docs")}, "")
			},
			check: func(t *testing.T, dir, cfg, _ string, env []string) {
				call(t, env, cfg, "files__env", `{"name":"NOTES_TOKEN"}`, "notes-e2e")
				call(t, env, cfg, "files__cwd", `{}`, filepath.Join(dir, "project")) // a project's servers run in its folder
			},
		},
		{
			name: "vscode", template: "vscode-mcp.json", rel: "ws/.vscode/mcp.json",
			vals: map[string]string{}, env: []string{"API_TOKEN=typed-into-vscode"},
			hand: func(string) string {
				return everythingUpstream("everything", "everything") + testUpstream("misbehave", "misbehave", []string{"-name", "vscode"}, "")
			},
			check: func(t *testing.T, dir, cfg, jsonPath string, env []string) {
				call(t, env, cfg, "misbehave__env", `{"name":"API_TOKEN"}`, "typed-into-vscode")
				call(t, env, cfg, "misbehave__env", `{"name":"USER_HOME"}`, os.Getenv("HOME"))
				call(t, env, cfg, "misbehave__cwd", `{}`, filepath.Join(dir, "ws", "sub"))
				// The JSON file itself as --config, imported in memory.
				call(t, env, jsonPath, "misbehave__env", `{"name":"API_TOKEN"}`, "typed-into-vscode")
			},
		},
		{
			name: "claude code", template: "claude-code-mcp.json", rel: "repo/.mcp.json",
			secret: remoteToken, env: []string{"REMOTE_AUTHORIZATION=" + remoteToken},
		},
	}
	// The Claude Code file's remote server: the everything-server over HTTP behind a
	// front that checks the headers the JSON gives.
	remote, refused := startAuthFront(t, startHTTPEverything(t, false), "Bearer "+remoteToken)
	cc := &cases[3]
	cc.vals = map[string]string{"HTTP_URL": remote, "TOKEN": remoteToken}
	cc.hand = func(string) string {
		return fmt.Sprintf("upstream \"remote\" {\n  url = %s\n  headers = { Authorization = %s, X-Team = \"platform\" }\n}\n", q(remote), q("Bearer "+remoteToken)) +
			testUpstream("local", "local", []string{"-name", "claude-code"}, "")
	}
	cc.check = func(t *testing.T, _, cfg, _ string, env []string) {
		call(t, env, cfg, "remote__test_simple_text", `{}`, "simple text")
		if n := refused.Load(); n != 0 {
			t.Errorf("the remote server refused %d requests for their headers", n)
		}
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"project/docs", "ws/sub"} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			os.WriteFile(filepath.Join(dir, "project", "docs", "readme.txt"), []byte("notes"), 0o644)
			jsonPath := clientFile(t, dir, c.rel, c.template, c.vals)
			cfg := filepath.Join(dir, "proxy.hcl")
			_, stderr, err := proxyOut(t, nil, "import", "-o", cfg, jsonPath)
			if err != nil {
				t.Fatalf("import: %v\n%s", err, stderr)
			}
			written, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if c.secret != "" && strings.Contains(string(written)+stderr, c.secret) {
				t.Errorf("the secret of the JSON file was copied:\n%s\n%s", written, stderr)
			}
			if out, stderr, err := proxyOut(t, c.env, "validate", "--config", cfg); err != nil || !strings.Contains(out, "OK") {
				t.Fatalf("validate: %v\n%s%s\n%s", err, out, stderr, written)
			}

			got := toolsJSON(t, c.env, cfg)
			want := toolsJSON(t, nil, writeConfig(t, c.hand(dir)))
			if len(want) == 0 || !slices.EqualFunc(got, want, func(a, b map[string]string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
				t.Errorf("tools of the imported configuration differ from the hand-written one:\ngot  %v\nwant %v\n%s", got, want, written)
			}
			for _, r := range got {
				if !strings.HasPrefix(r["name"], r["upstream"]+"__") {
					t.Errorf("tool %q of upstream %q is not namespaced by its name", r["name"], r["upstream"])
				}
			}
			c.check(t, dir, cfg, jsonPath, c.env)
		})
	}
}

// TestRunClientJSONConfig serves a Claude Desktop file given directly as --config to
// the Go SDK client: its servers' tools are listed and called, the JSON's token reaches
// its server as it is (the configuration stays in memory), and the log never shows it.
func TestRunClientJSONConfig(t *testing.T) {
	t.Parallel()
	const token = "ghp_runFAKE0123456789abcdefABCDEF"
	path := clientFile(t, t.TempDir(), "claude_desktop_config.json", "claude_desktop_config.json", map[string]string{"TOKEN": token})
	cs, stderr := connectSDK(t, path, nil, "")
	names := toolNames(t, cs)
	for _, want := range []string{"everything__test_simple_text", "misbehave__env", "misbehave__echo"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools lack %s: %v\n%s", want, names, stderr)
		}
	}
	ctx := ctxT(t, 60*time.Second)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__test_simple_text"})
	if err != nil || !strings.Contains(textOf(res), "simple text") {
		t.Errorf("everything__test_simple_text: %v %q", err, textOf(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "misbehave__env", Arguments: map[string]any{"name": "GITHUB_TOKEN"}})
	if err != nil || textOf(res) != token {
		t.Errorf("misbehave__env GITHUB_TOKEN: %v %q, want the JSON's token", err, textOf(res))
	}
	if strings.Contains(stderr.String(), token) {
		t.Errorf("the proxy logged the token:\n%s", stderr)
	}
}
