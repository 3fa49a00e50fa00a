package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseErrors(t *testing.T) {
	const cmd = `command = ["a"]`
	tests := []struct {
		name string
		src  string
		want []string // each must appear in the formatted diagnostics
		only bool     // want is the whole output, one line per element
	}{
		{
			name: "unknown attribute suggests command",
			src:  "upstream \"a\" {\n  comand = [\"a\"]\n}\n",
			want: []string{`p.hcl:2:3: error: Unsupported argument; An argument named "comand" is not expected here. Did you mean "command"?`},
		},
		{
			name: "unknown block suggests upstream",
			src:  "upstreams \"a\" {\n  " + cmd + "\n}\n",
			want: []string{`p.hcl:1:1: error: Unsupported block type; Blocks of type "upstreams" are not expected here. Did you mean "upstream"?`},
		},
		{
			name: "unknown proxy attribute suggests",
			src:  "proxy {\n  seperator = \"-\"\n}\nupstream \"a\" { " + cmd + " }\n",
			want: []string{`p.hcl:2:3: error: Unsupported argument;`, `Did you mean "separator"?`},
		},
		{
			name: "block written for an argument suggests the argument",
			src:  "upstream \"a\" {\n  " + cmd + "\n  envs {\n    A = \"b\"\n  }\n}\n",
			want: []string{`p.hcl:3:3: error: Unsupported block type;`, `Did you mean the argument "env"?`},
		},
		{
			name: "argument written for a block suggests the block",
			src:  "proxi = {}\nupstream \"a\" { " + cmd + " }\n",
			want: []string{`p.hcl:1:1: error: Unsupported argument;`, `Did you mean a block of type "proxy"`},
		},
		{
			name: "duplicate label",
			src:  "upstream \"a\" {\n  " + cmd + "\n}\n\nupstream \"a\" {\n  " + cmd + "\n}\n",
			want: []string{`p.hcl:5:10: error: Duplicate upstream name; An upstream named "a" is already defined at p.hcl:1:10`},
		},
		{
			name: "bad label chars",
			src:  "upstream \"my server\" {\n  " + cmd + "\n}\n",
			want: []string{`p.hcl:1:10: error: Invalid upstream name; Upstream name "my server"`},
		},
		{
			name: "empty label",
			src:  "upstream \"\" {\n  " + cmd + "\n}\n",
			want: []string{`p.hcl:1:10: error: Invalid upstream name;`},
		},
		{
			name: "missing label",
			src:  "upstream {\n  " + cmd + "\n}\n",
			want: []string{`p.hcl:1:10: error: Missing name for upstream; All upstream blocks must have 1 labels (name).`},
			only: true,
		},
		{
			name: "bad duration",
			src:  "upstream \"a\" {\n  " + cmd + "\n  startup_timeout = \"30\"\n}\n",
			want: []string{`p.hcl:3:21: error: Invalid duration; "30" is not a valid duration for "startup_timeout"; use a duration string such as "60s"`},
		},
		{
			name: "numeric duration",
			src:  "upstream \"a\" {\n  " + cmd + "\n  timeout = 5\n}\n",
			want: []string{`p.hcl:3:13: error: Invalid duration; "timeout" must be a duration string, not a number; use a duration string such as "60s"`},
		},
		{
			name: "zero duration",
			src:  "upstream \"a\" {\n  " + cmd + "\n  timeout = \"0s\"\n}\n",
			want: []string{`p.hcl:3:13: error: Invalid duration; "timeout" must be greater than zero`},
		},
		{
			name: "negative duration",
			src:  "upstream \"a\" {\n  " + cmd + "\n  startup_timeout = \"-5s\"\n}\n",
			want: []string{`p.hcl:3:21: error: Invalid duration; "startup_timeout" must be greater than zero`},
		},
		{
			name: "bad session",
			src:  "upstream \"a\" {\n  " + cmd + "\n  session = \"each\"\n}\n",
			want: []string{`p.hcl:3:13: error: Invalid session; "session" must be "shared", "per-client" or "per-principal", got "each".`},
		},
		{
			name: "bad max_sessions",
			src:  "upstream \"a\" {\n  " + cmd + "\n  session = \"per-client\"\n  max_sessions = 0\n}\n",
			want: []string{`p.hcl:4:18: error: Invalid max_sessions; "max_sessions" must be at least 1, got 0.`},
		},
		{
			name: "empty command",
			src:  "upstream \"a\" {\n  command = []\n}\n",
			want: []string{`p.hcl:2:13: error: Invalid command; "command" must not be empty`},
		},
		{
			name: "empty program name",
			src:  "upstream \"a\" {\n  command = [\"\", \"x\"]\n}\n",
			want: []string{`p.hcl:2:13: error: Invalid command; The program name`},
		},
		{
			name: "null command",
			src:  "upstream \"a\" {\n  command = null\n}\n",
			want: []string{`p.hcl:2:13: error: Invalid command; "command" must be a non-empty list of strings`},
		},
		{
			name: "command is a string",
			src:  "upstream \"a\" {\n  command = \"npx server\"\n}\n",
			want: []string{`p.hcl:2:13: error: Invalid value; "command" must be a list of strings`},
		},
		{
			name: "null command element",
			src:  "upstream \"a\" {\n  command = [\"a\", null]\n}\n",
			want: []string{`p.hcl:2:13: error: Invalid value; Element 1 of "command" is null`},
		},
		{
			name: "missing command",
			src:  "upstream \"a\" {\n}\n",
			want: []string{`p.hcl:1:1: error: Missing required argument; The argument "command" is required in upstream "a"`},
		},
		{
			name: "bad separator chars",
			src:  "proxy {\n  separator = \"::\"\n}\nupstream \"a\" { " + cmd + " }\n",
			want: []string{`p.hcl:2:15: error: Invalid separator; "separator" may only contain letters, digits, '_', '.' and '-'; "::" contains ':'.`},
		},
		{
			name: "separator too long",
			src:  "proxy {\n  separator = \"_____\"\n}\nupstream \"a\" { " + cmd + " }\n",
			want: []string{`p.hcl:2:15: error: Invalid separator; "separator" must be 1 to 4 characters long`},
		},
		{
			name: "empty separator",
			src:  "proxy {\n  separator = \"\"\n}\nupstream \"a\" { " + cmd + " }\n",
			want: []string{`p.hcl:2:15: error: Invalid separator;`},
		},
		{
			name: "bad namespace chars",
			src:  "upstream \"a\" {\n  " + cmd + "\n  namespace = \"a/b\"\n}\n",
			want: []string{`p.hcl:3:15: error: Invalid namespace; Namespace "a/b" may only contain`},
		},
		{
			name: "two proxy blocks",
			src:  "proxy {\n}\nproxy {\n  page_size = -1\n}\nupstream \"a\" { " + cmd + " }\n",
			want: []string{
				`p.hcl:3:1: error: Duplicate proxy block; Only one proxy block is allowed; the first one is at p.hcl:1:1.`,
				`p.hcl:4:15: error: Invalid page_size;`,
			},
		},
		{
			name: "no upstreams",
			src:  "proxy {\n  name = \"x\"\n}\n",
			want: []string{`p.hcl:1:1: error: No upstream blocks; The file has no upstream blocks`},
		},
		{
			name: "empty file",
			src:  "",
			want: []string{`error: No upstream blocks;`},
		},
		{
			name: "page_size too small",
			src:  "proxy {\n  page_size = 0\n}\nupstream \"a\" { " + cmd + " }\n",
			want: []string{`p.hcl:2:15: error: Invalid page_size; "page_size" must be between 1 and 10000, got 0.`},
		},
		{
			name: "page_size too large",
			src:  "proxy {\n  page_size = 10001\n}\nupstream \"a\" { " + cmd + " }\n",
			want: []string{`p.hcl:2:15: error: Invalid page_size; "page_size" must be between 1 and 10000, got 10001.`},
		},
		{
			name: "page_size not whole",
			src:  "proxy {\n  page_size = 1.5\n}\nupstream \"a\" { " + cmd + " }\n",
			want: []string{`p.hcl:2:15: error: Invalid value; Unusable value for "page_size"`},
		},
		{
			name: "max_name_length out of range",
			src:  "proxy {\n  max_name_length = 15\n}\nupstream \"a\" { " + cmd + " }\n",
			want: []string{`p.hcl:2:21: error: Invalid max_name_length; "max_name_length" must be between 16 and 128, got 15.`},
		},
		{
			name: "max_client_buffer and max_client_in_flight too small",
			src:  "proxy {\n  max_client_buffer = 1000\n  max_client_in_flight = 0\n}\nupstream \"a\" { " + cmd + " }\n",
			want: []string{
				`p.hcl:2:23: error: Invalid max_client_buffer; "max_client_buffer" must be at least 65536 bytes, got 1000.`,
				`p.hcl:3:26: error: Invalid max_client_in_flight; "max_client_in_flight" must be at least 1, got 0.`,
			},
		},
		{
			name: "ready_grace negative or a number",
			src:  "proxy {\n  ready_grace = \"-1s\"\n}\nproxy {\n  ready_grace = 5\n}\nupstream \"a\" { " + cmd + " }\n",
			want: []string{
				`p.hcl:4:1: error: Duplicate proxy block; Only one proxy block is allowed; the first one is at p.hcl:1:1.`,
				`p.hcl:2:17: error: Invalid duration; "ready_grace" must be zero or more, got "-1s"; use a duration string such as "60s", "1m30s" or "500ms".`,
				`p.hcl:5:17: error: Invalid duration; "ready_grace" must be a duration string, not a number; use a duration string such as "60s", "1m30s" or "500ms".`,
			},
		},
		{
			name: "max_message_size too small",
			src:  "upstream \"a\" {\n  " + cmd + "\n  max_message_size = 1023\n}\n",
			want: []string{`p.hcl:3:22: error: Invalid max_message_size; "max_message_size" must be at least 1024 bytes, got 1023.`},
		},
		{
			name: "empty proxy name",
			src:  "proxy {\n  name = \"\"\n}\nupstream \"a\" { " + cmd + " }\n",
			want: []string{`p.hcl:2:10: error: Invalid proxy name;`},
		},
		{
			name: "disabled not a bool",
			src:  "upstream \"a\" {\n  " + cmd + "\n  disabled = \"maybe\"\n}\n",
			want: []string{`p.hcl:3:14: error: Invalid value; "disabled" must be true or false`},
		},
		{
			name: "empty cwd",
			src:  "upstream \"a\" {\n  " + cmd + "\n  cwd = \"\"\n}\n",
			want: []string{`p.hcl:3:9: error: Invalid cwd;`},
		},
		{
			name: "env name with equals sign",
			src:  "upstream \"a\" {\n  " + cmd + "\n  env = { \"A=B\" = \"x\" }\n}\n",
			want: []string{`p.hcl:3:9: error: Invalid environment variable name; Environment variable name "A=B"`},
		},
		{
			name: "env not a map",
			src:  "upstream \"a\" {\n  " + cmd + "\n  env = [\"A=B\"]\n}\n",
			want: []string{`p.hcl:3:9: error: Invalid value; "env" must be a map of strings`},
		},
		{
			name: "same explicit namespace",
			src:  "upstream \"a\" {\n  " + cmd + "\n  namespace = \"x\"\n}\nupstream \"b\" {\n  " + cmd + "\n  namespace = \"x\"\n}\n",
			want: []string{`p.hcl:7:15: error: Duplicate namespace; Upstream "b" uses namespace "x" (from its namespace argument), which upstream "a" at p.hcl:1:1 already uses`},
		},
		{
			name: "explicit namespace equal to another label",
			src:  "upstream \"a\" {\n  " + cmd + "\n}\nupstream \"b\" {\n  " + cmd + "\n  namespace = \"a\"\n}\n",
			want: []string{`p.hcl:6:15: error: Duplicate namespace; Upstream "b" uses namespace "a"`},
		},
		{
			name: "label equal to earlier explicit namespace",
			src:  "upstream \"a\" {\n  " + cmd + "\n  namespace = \"b\"\n}\nupstream \"b\" {\n  " + cmd + "\n}\n",
			want: []string{`p.hcl:5:10: error: Duplicate namespace; Upstream "b" uses namespace "b" (from its name`},
		},
		{
			name: "syntax error",
			src:  "upstream \"a\" {\n  command = [\"a\"\n}\n",
			want: []string{`p.hcl:3:1: error: Missing item separator;`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustFail(t, tt.src, Options{})
			if tt.only {
				if want := strings.Join(tt.want, "\n") + "\n"; got != want {
					t.Errorf("got:\n%s\nwant:\n%s", got, want)
				}
				return
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("diagnostics do not contain\n  %s\ngot:\n%s", w, got)
				}
			}
		})
	}
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		check func(t *testing.T, cfg *Config)
	}{
		{
			name: "namespace absent defaults to label",
			src:  `upstream "gh" { command = ["a"] }`,
			check: func(t *testing.T, cfg *Config) {
				if got := cfg.Upstreams[0].Namespace; got != "gh" {
					t.Errorf("Namespace = %q, want %q", got, "gh")
				}
			},
		},
		{
			name: "explicit empty namespace is kept",
			src:  "upstream \"gh\" {\n  command = [\"a\"]\n  namespace = \"\"\n}\n",
			check: func(t *testing.T, cfg *Config) {
				if got := cfg.Upstreams[0].Namespace; got != "" {
					t.Errorf("Namespace = %q, want empty", got)
				}
			},
		},
		{
			name: "null namespace is absent",
			src:  "upstream \"gh\" {\n  command = [\"a\"]\n  namespace = null\n}\n",
			check: func(t *testing.T, cfg *Config) {
				if got := cfg.Upstreams[0].Namespace; got != "gh" {
					t.Errorf("Namespace = %q, want %q", got, "gh")
				}
			},
		},
		{
			name: "several empty namespaces are allowed",
			src:  "upstream \"a\" {\n  command = [\"a\"]\n  namespace = \"\"\n}\nupstream \"b\" {\n  command = [\"a\"]\n  namespace = \"\"\n}\n",
			check: func(t *testing.T, cfg *Config) {
				if len(cfg.Upstreams) != 2 {
					t.Errorf("got %d upstreams, want 2", len(cfg.Upstreams))
				}
			},
		},
		{
			name: "disabled upstream may share a namespace",
			src:  "upstream \"a\" {\n  command = [\"a\"]\n}\nupstream \"a2\" {\n  command = [\"a\"]\n  namespace = \"a\"\n  disabled = true\n}\n",
			check: func(t *testing.T, cfg *Config) {
				if !cfg.Upstreams[1].Disabled || cfg.Upstreams[1].Namespace != "a" {
					t.Errorf("second upstream = %+v, want disabled with namespace a", cfg.Upstreams[1])
				}
			},
		},
		{
			name: "a number written as a string is a namespace",
			src:  "upstream \"a\" {\n  command = [\"a\"]\n  namespace = \"42\"\n}\n",
			check: func(t *testing.T, cfg *Config) {
				if got := cfg.Upstreams[0].Namespace; got != "42" {
					t.Errorf("Namespace = %q, want %q", got, "42")
				}
			},
		},
		{
			name: "boundary values",
			src:  "proxy {\n  page_size = 10000\n  max_name_length = 16\n  separator = \"-._a\"\n}\nupstream \"a\" {\n  command = [\"a\"]\n  max_message_size = 1024\n  timeout = \"1ns\"\n}\n",
			check: func(t *testing.T, cfg *Config) {
				p, u := cfg.Proxy, cfg.Upstreams[0]
				if p.PageSize != 10000 || p.MaxNameLength != 16 || p.Separator != "-._a" || u.MaxMessageSize != 1024 || u.Timeout != time.Nanosecond {
					t.Errorf("got %+v %+v", p, u)
				}
			},
		},
		{
			name: "upstreams keep file order",
			src:  "upstream \"z\" { command = [\"a\"] }\nupstream \"a\" { command = [\"a\"] }\nupstream \"m\" { command = [\"a\"] }\n",
			check: func(t *testing.T, cfg *Config) {
				var names []string
				for _, u := range cfg.Upstreams {
					names = append(names, u.Name)
				}
				if got := strings.Join(names, ","); got != "z,a,m" {
					t.Errorf("order = %s, want z,a,m", got)
				}
			},
		},
		{
			name: "cwd is cleaned",
			src:  "upstream \"a\" {\n  command = [\"a\"]\n  cwd = \"x/../y/.\"\n}\n",
			check: func(t *testing.T, cfg *Config) {
				if got := cfg.Upstreams[0].Cwd; got != "/base/y" {
					t.Errorf("Cwd = %q, want /base/y", got)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustParse(t, tt.src, Options{}))
		})
	}
}
