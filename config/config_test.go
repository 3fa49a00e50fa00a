package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// fakeEnv is a LookupEnv over a fixed map.
func fakeEnv(vars map[string]string) Options {
	return Options{LookupEnv: func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}}
}

// mustParse parses src as p.hcl in /base and fails the test on any diagnostic.
func mustParse(t *testing.T, src string, opts Options) *Config {
	t.Helper()
	cfg, diags := ParseWithOptions([]byte(src), "p.hcl", "/base", opts)
	if len(diags) > 0 || cfg == nil {
		t.Fatalf("unexpected diagnostics:\n%s", FormatDiagnostics(diags))
	}
	return cfg
}

// mustFail parses src as p.hcl and returns the formatted diagnostics, failing
// the test unless parsing failed with a nil config.
func mustFail(t *testing.T, src string, opts Options) string {
	t.Helper()
	cfg, diags := ParseWithOptions([]byte(src), "p.hcl", "/base", opts)
	if !diags.HasErrors() {
		t.Fatalf("expected errors, got none (diagnostics: %q)", FormatDiagnostics(diags))
	}
	if cfg != nil {
		t.Fatalf("got a non-nil config alongside errors")
	}
	return FormatDiagnostics(diags)
}

func TestParseFullFile(t *testing.T) {
	src := `# a complete file
proxy {
  name            = "my-proxy"
  version         = "1.2.3"
  separator       = "."
  page_size       = 50
  max_name_length = 64
  instructions    = "Use the tools."
}

upstream "github" {
  command          = ["npx", "-y", "@modelcontextprotocol/server-github"]
  env              = { GITHUB_TOKEN = env("GITHUB_TOKEN"), MODE = "ro" }
  cwd              = "servers/gh"
  namespace        = "gh"
  timeout          = "90s"
  startup_timeout  = "1m"
  max_message_size = 2048
  disabled         = true
  protocol         = "modern"
  session          = "per-client"
  max_sessions     = 8
  idle_timeout     = "2m"
}

upstream "fs" {
  command = ["mcp-fs", "/data"]
  cwd     = "/srv/fs"
}

upstream "defaults" {
  command = ["srv"]
}
`
	cfg := mustParse(t, src, fakeEnv(map[string]string{"GITHUB_TOKEN": "tok"}))

	wantLines := []int{11, 26, 31}
	for i, u := range cfg.Upstreams {
		if u.DeclRange.Filename != "p.hcl" || u.DeclRange.Start.Line != wantLines[i] || u.DeclRange.Start.Column != 1 {
			t.Errorf("upstream %d DeclRange = %v, want p.hcl line %d col 1", i, u.DeclRange, wantLines[i])
		}
		cfg.Upstreams[i].DeclRange = hcl.Range{}
	}

	want := &Config{
		Filename: "p.hcl",
		Proxy: Proxy{
			Name:          "my-proxy",
			Version:       "1.2.3",
			Separator:     ".",
			PageSize:      50,
			MaxNameLength: 64,
			Instructions:  "Use the tools.",

			MaxClientBuffer:   DefaultMaxClientBuffer,
			MaxClientInFlight: DefaultMaxClientInFlight, ReadyGrace: DefaultReadyGrace,
			Pin: PinOff, LockFile: "/base/proxy.lock", Screen: ScreenFlag,
		},
		Upstreams: []Upstream{
			{
				Name:           "github",
				Command:        []string{"npx", "-y", "@modelcontextprotocol/server-github"},
				Env:            map[string]string{"GITHUB_TOKEN": "tok", "MODE": "ro"},
				Cwd:            "/base/servers/gh",
				Namespace:      "gh",
				Timeout:        90 * time.Second,
				StartupTimeout: time.Minute,
				MaxMessageSize: 2048,
				Disabled:       true,
				Protocol:       ProtocolModern,
				Session:        SessionPerClient,
				MaxSessions:    8,
				IdleTimeout:    2 * time.Minute,
			},
			{
				Name:           "fs",
				Command:        []string{"mcp-fs", "/data"},
				Cwd:            "/srv/fs",
				Namespace:      "fs",
				Timeout:        DefaultTimeout,
				StartupTimeout: DefaultStartupTimeout,
				MaxMessageSize: DefaultMaxMessageSize,
				Protocol:       ProtocolAuto,
				Session:        SessionShared,
				MaxSessions:    DefaultMaxSessions,
				IdleTimeout:    DefaultIdleTimeout,
				Required:       true,
			},
			{
				Name:           "defaults",
				Command:        []string{"srv"},
				Cwd:            "/base",
				Namespace:      "defaults",
				Timeout:        60 * time.Second,
				StartupTimeout: 30 * time.Second,
				MaxMessageSize: 64 << 20,
				Protocol:       ProtocolAuto,
				Session:        SessionShared,
				MaxSessions:    64,
				IdleTimeout:    10 * time.Minute,
				Required:       true,
			},
		},
	}
	if string(cfg.Source) != src {
		t.Errorf("Source is not the file's bytes")
	}
	want.Source = cfg.Source
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("decoded config mismatch\n got: %+v\nwant: %+v", cfg, want)
	}
}

func TestParseDefaultsWithoutProxyBlock(t *testing.T) {
	cfg := mustParse(t, `upstream "a" { command = ["a"] }`, Options{})
	want := Proxy{Name: "mcp-proxy", Separator: "__", PageSize: 100, MaxNameLength: 128,
		MaxClientBuffer: 16 << 20, MaxClientInFlight: 1024, ReadyGrace: time.Second,
		Pin: PinOff, LockFile: "/base/proxy.lock", Screen: ScreenFlag}
	if !reflect.DeepEqual(cfg.Proxy, want) {
		t.Errorf("Proxy = %+v, want %+v", cfg.Proxy, want)
	}
	if cfg.Upstreams[0].Env != nil {
		t.Errorf("Env = %#v, want nil when not set", cfg.Upstreams[0].Env)
	}
}

func TestEnvFunction(t *testing.T) {
	env := fakeEnv(map[string]string{"X": "secret", "EMPTY": ""})
	tests := []struct {
		name    string
		expr    string
		want    string
		wantErr []string // substrings of the formatted diagnostics
	}{
		{name: "set", expr: `env("X")`, want: "secret"},
		{name: "set to empty counts as set", expr: `env("EMPTY", "d")`, want: ""},
		{name: "set ignores default", expr: `env("X", "d")`, want: "secret"},
		{name: "unset with default", expr: `env("UNSET", "d")`, want: "d"},
		{name: "template", expr: `"Bearer ${env("X")}"`, want: "Bearer secret"},
		{name: "template with default", expr: `"Bearer ${env("UNSET", "none")}"`, want: "Bearer none"},
		{name: "format", expr: `format("%-4s|%3d|%.1f", "ab", 7, 2.25)`, want: "ab  |  7|2.2"},
		{name: "stdlib helpers", expr: `upper(join("-", [lower("A"), format("%d", 2), trimspace(" b ")]))`, want: "A-2-B"},
		{
			name: "unset", expr: `env("UNSET")`,
			wantErr: []string{`p.hcl:3:15: error: Error in function call;`, `"UNSET" is not set`, `env("UNSET", "default")`},
		},
		{
			name: "unset inside template", expr: `"Bearer ${env("UNSET")}"`,
			wantErr: []string{`p.hcl:3:25: error: Error in function call;`, `"UNSET" is not set`},
		},
		{
			name: "two defaults", expr: `env("X", "a", "b")`,
			wantErr: []string{`p.hcl:3:30: error: Invalid function argument;`, `at most one default`},
		},
		{
			name: "no arguments", expr: `env()`,
			wantErr: []string{`p.hcl:3:19: error: Not enough function arguments;`},
		},
		{
			name: "format width is bounded", expr: `format("%999999999s", "x")`,
			wantErr: []string{`p.hcl:3:23: error: Invalid function argument;`, `field width 999999999 is larger than the maximum of 1000`},
		},
		{
			name: "variables are not available", expr: `HOME`,
			wantErr: []string{`p.hcl:3:15: error: Variables not allowed;`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "upstream \"a\" {\n  command = [\"a\"]\n  env = { V = " + tt.expr + " }\n}\n"
			if tt.wantErr != nil {
				got := mustFail(t, src, env)
				for _, w := range tt.wantErr {
					if !strings.Contains(got, w) {
						t.Errorf("diagnostics do not contain %q:\n%s", w, got)
					}
				}
				return
			}
			cfg := mustParse(t, src, env)
			if got := cfg.Upstreams[0].Env["V"]; got != tt.want {
				t.Errorf("V = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEnvDefaultsToProcessEnvironment(t *testing.T) {
	t.Setenv("MCP_PROXY_CONFIG_TEST", "from-os")
	cfg, diags := Parse([]byte(`upstream "a" {
  command = [env("MCP_PROXY_CONFIG_TEST")]
}`), "p.hcl", "/base")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if got := cfg.Upstreams[0].Command[0]; got != "from-os" {
		t.Errorf("Command[0] = %q, want %q", got, "from-os")
	}
}

func TestAllProblemsReportedAtOnce(t *testing.T) {
	src := `proxy {
  page_size = 0
}

upstream "one" {
  command = ["a"]
  timeout = "soon"
}

upstream "two" {
  comand = ["b"]
}
`
	got := mustFail(t, src, Options{})
	want := strings.Join([]string{
		`p.hcl:2:15: error: Invalid page_size; "page_size" must be between 1 and 10000, got 0.`,
		`p.hcl:7:13: error: Invalid duration; "soon" is not a valid duration for "timeout"; use a duration string such as "60s", "1m30s" or "500ms".`,
		`p.hcl:10:1: error: Missing required argument; The argument "command" is required in upstream "two": a list of strings such as ["npx", "-y", "@modelcontextprotocol/server-github"].`,
		`p.hcl:11:3: error: Unsupported argument; An argument named "comand" is not expected here. Did you mean "command"?`,
	}, "\n") + "\n"
	if got != want {
		t.Errorf("FormatDiagnostics:\n got:\n%s\nwant:\n%s", got, want)
	}
}

func TestDiagnosticsAreDeterministic(t *testing.T) {
	src := `upstream "a" {
  command = []
  foo = 1
  bar = 2
  baz = 3
  timeout = 1
  startup_timeout = 2
  namespace = "a b"
}
`
	first := mustFail(t, src, Options{})
	for range 20 {
		if got := mustFail(t, src, Options{}); got != first {
			t.Fatalf("output changed between runs:\n%s\n---\n%s", first, got)
		}
	}
}

func TestParseResolvesRelativeBaseDir(t *testing.T) {
	cfg, diags := Parse([]byte(`upstream "a" { command = ["a"] }`), "p.hcl", "conf")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Upstreams[0].Cwd, filepath.Join(wd, "conf"); got != want {
		t.Errorf("Cwd = %q, want %q", got, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "proxy.hcl")
	if err := os.WriteFile(path, []byte("upstream \"a\" {\n  command = [\"a\"]\n  cwd = \"sub\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load(path)
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if cfg.Filename != path {
		t.Errorf("Filename = %q, want %q", cfg.Filename, path)
	}
	if got, want := cfg.Upstreams[0].Cwd, filepath.Join(dir, "sub"); got != want {
		t.Errorf("Cwd = %q, want %q", got, want)
	}

	// A fresh parser per call: rewriting the same file must not return the
	// old contents.
	if err := os.WriteFile(path, []byte("upstream \"b\" {\n  command = [\"b\"]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, diags = Load(path)
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if got := cfg.Upstreams[0].Name; got != "b" {
		t.Errorf("after rewrite, upstream = %q, want b", got)
	}
	if got := cfg.Upstreams[0].Cwd; got != dir {
		t.Errorf("default Cwd = %q, want %q", got, dir)
	}

	// Errors in a loaded file carry its path.
	if err := os.WriteFile(path, []byte("upstream \"b\" {\n  command = []\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, diags = Load(path)
	if cfg != nil || !strings.HasPrefix(FormatDiagnostics(diags), path+":2:13: error: ") {
		t.Errorf("Load of bad file = %v, %q", cfg, FormatDiagnostics(diags))
	}
}

func TestLoadMissingFile(t *testing.T) {
	cfg, diags := Load(filepath.Join(t.TempDir(), "nope.hcl"))
	if cfg != nil || !diags.HasErrors() {
		t.Fatalf("Load = %v, %v; want nil and an error", cfg, diags)
	}
	got := FormatDiagnostics(diags)
	if !strings.HasPrefix(got, "error: Failed to read configuration file; ") || !strings.Contains(got, "nope.hcl") {
		t.Errorf("FormatDiagnostics = %q", got)
	}
}

func FuzzParse(f *testing.F) {
	seeds := []string{
		"",
		`upstream "a" { command = ["a"] }`,
		"proxy {\n  name = \"p\"\n  separator = \".\"\n  page_size = 10\n}\nupstream \"gh\" {\n  command = [\"npx\", \"x\"]\n  env = { T = env(\"T\", \"d\") }\n  timeout = \"5s\"\n  namespace = \"\"\n}\n",
		"upstream \"a\" {\n  comand = [\"a\"]\n  timeout = 5\n}\nupstreams \"b\" {}\n",
		"proxy {}\nproxy {}\nupstream \"a\" { command = [format(\"%s\", upper(\"x\"))] }\n",
		`upstream "a" { command = ["Bearer ${env("X")}"] }`,
		"upstream \"a\" {\n  command = [\"a\"]\n  env { A = 1 }\n  max_message_size = 1e100\n}\n",
		"upstream \"gh\" { command = [\"a\"] }\nlisten \"http\" {}\nendpoint \"e\" {\n  path = \"/mcp/e\"\n  upstreams = [\"gh\", \"x\"]\n  mode = \"search\"\n  always = [\"gh__a\", \"zz__b\"]\n  tools { include = [\"gh__*\", \"q*\"] }\n  search {\n    limit = 3\n    max_limit = 2\n    ranker = \"p\"\n  }\n}\nendpoint \"default\" { path = \"/sse\" }\npolicy {\n  rule \"r\" {\n    effect = \"deny\"\n    endpoints = [\"e\", \"\"]\n  }\n}\n",
		"upstream \"a\" {\n  command = [\"a\"]\n  namespace = \"\"\n  tools {\n    include = [\"x*\", \"y\\\\\"]\n    exclude = []\n  }\n  tool \"x\" {\n    name = \"y\"\n    title = \"t\"\n  }\n  tool \"y\" {\n  }\n  prompt \"p\" { description = \"d\" }\n}\nupstream \"b\" {\n  command = [\"b\"]\n  namespace = \"\"\n  tool \"z\" { name = \"y\" }\n}\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	opts := fakeEnv(map[string]string{"X": "x"})
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, diags := ParseWithOptions(src, "fuzz.hcl", "/base", opts)
		if (cfg == nil) != diags.HasErrors() {
			t.Fatalf("cfg == nil is %v but HasErrors is %v:\n%s", cfg == nil, diags.HasErrors(), FormatDiagnostics(diags))
		}
		_ = FormatDiagnostics(diags)
	})
}

func TestProtocolAttribute(t *testing.T) {
	_, diags := Parse([]byte("upstream \"a\" {\n  command = [\"a\"]\n  protocol = \"newest\"\n}\n"), "p.hcl", "/base")
	if !diags.HasErrors() || !strings.Contains(FormatDiagnostics(diags), "p.hcl:3:") {
		t.Errorf("bad protocol not reported at its line: %s", FormatDiagnostics(diags))
	}
}

// TestReadyGrace: ready_grace defaults to 1s, and takes zero ("answer at once").
func TestReadyGrace(t *testing.T) {
	for _, tt := range []struct {
		block string
		want  time.Duration
	}{
		{"", DefaultReadyGrace},
		{"proxy {\n}\n", DefaultReadyGrace},
		{"proxy {\n  ready_grace = \"0s\"\n}\n", 0},
		{"proxy {\n  ready_grace = \"250ms\"\n}\n", 250 * time.Millisecond},
	} {
		cfg := mustParse(t, tt.block+"upstream \"a\" {\n  command = [\"srv\"]\n}\n", Options{})
		if cfg.Proxy.ReadyGrace != tt.want {
			t.Errorf("%q: ready_grace = %v, want %v", tt.block, cfg.Proxy.ReadyGrace, tt.want)
		}
	}
}
