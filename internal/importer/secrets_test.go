package importer

import (
	"encoding/json"
	"testing"
)

func TestSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"GITHUB_TOKEN": true, "api_key": true, "OPENAI_API_KEY": true, "DB_PASSWORD": true, "PGPASS": true,
		"CLIENT_SECRET": true, "GOOGLE_APPLICATION_CREDENTIALS": true, "AUTH": true, "Authorization": true,
		"X-Api-Key": true, "SESSION_COOKIE": true,
		"LOG_LEVEL": false, "PATH": false, "GIT_AUTHOR_NAME": false, "REGION": false, "Accept": false,
	} {
		if got := secretName(name); got != want {
			t.Errorf("secretName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestPlainValue(t *testing.T) {
	for v, want := range map[string]bool{
		"": true, "true": true, "OFF": true, "4096": true, "/etc/key.pem": true, "~/keys/a.json": true,
		`C:\keys\a.json`: true, "https://auth.example.com/oauth": true,
		"hunter2": false, "https://h/x?key=1": false, "https://u:p@h/": false, "/path with space": false, "oauth": false,
	} {
		if got := plainValue(v); got != want {
			t.Errorf("plainValue(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestTokenLooks(t *testing.T) {
	for v, want := range map[string]bool{
		"ghp_0123456789abcdefghijABCDEFGHIJ":       true,
		"github_pat_11AAAAAAA0123456789_abcd":      true,
		"sk-proj-abcdefghij0123456789":             true,
		"xoxb-1234-5678-abcdefghij":                true,
		"AKIAIOSFODNN7EXAMPLE":                     true,
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig": true,
		"Ab3dEf6hIj9kLm2nOp5qRs8t":                 true, // mixed case and digits
		"d41d8cd98f00b204e9800998ecf8427e":         true, // hex
		"claude-3-5-sonnet-20241022":               false,
		"@modelcontextprotocol/server-everything":  false,
		"server-everything-2025.11.25":             false,
		"/Users/Me/Projects/Thing2024":             false,
		"sk-short":                                 false,
		"MyConfigFile":                             false,
	} {
		if got := randomToken(v); got != want {
			t.Errorf("randomToken(%q) = %v, want %v", v, got, want)
		}
	}
	if prefixedToken("Ab3dEf6hIj9kLm2nOp5qRs8t") {
		t.Error("prefixedToken takes a random-looking word without a known prefix")
	}
	if !credential("postgres://app:s3cret@db:5432/app") || credential("postgres://app@db/app") {
		t.Error("credential: a URL is one exactly when it has a password")
	}
}

func TestStripJSONC(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a": 1, // c` + "\n" + `}`, `{"a": 1      ` + "\n" + `}`},
		{`{"a": "//not", "b": "/*x*/"}`, `{"a": "//not", "b": "/*x*/"}`},
		{`[1, 2, /* c */ ]`, `[1, 2          ]`},
		{`{"a": [1,2,],}`, `{"a": [1,2 ] }`},
		{`{"a": "x\",", }`, `{"a": "x\","  }`},
		{"/* a\nb */{}", "    \n    {}"},
		{"\ufeff{}", "   {}"},
		{`{"a": 1 /* open`, `{"a": 1        `},
	}
	for _, tt := range tests {
		got := string(stripJSONC([]byte(tt.in)))
		if got != tt.want {
			t.Errorf("stripJSONC(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if len(got) != len(tt.in) {
			t.Errorf("stripJSONC(%q) changed the length", tt.in)
		}
	}
	if !json.Valid(stripJSONC([]byte("// VS Code\n{\n  \"servers\": {\"a\": {\"args\": [\"x\",],},},\n}\n"))) {
		t.Error("a commented JSONC file is not valid JSON once stripped")
	}
}

func TestInputEnvName(t *testing.T) {
	for id, want := range map[string]string{
		"github-token": "GITHUB_TOKEN", "githubToken": "GITHUB_TOKEN", "api_key": "API_KEY", "perplexity-key": "PERPLEXITY_KEY",
		"APIKey": "APIKEY", "1pass": "INPUT_1PASS", "--": "INPUT_",
	} {
		if got := inputEnvName(id); got != want {
			t.Errorf("inputEnvName(%q) = %q, want %q", id, got, want)
		}
	}
}
