package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseAdmin(t *testing.T) {
	const up = "upstream \"a\" {\n  command = [\"a\"]\n}\n"
	const auth = "auth {\n  api_key \"ops\" {\n    token = \"0123456789abcdef0123\"\n  }\n}\n"
	tests := []struct {
		name string
		src  string
		want *Admin // DeclRange not compared
	}{
		{"no block: no listener", up, nil},
		{"defaults", "admin {}\n" + up, &Admin{Address: DefaultAdminAddress}},
		{"loopback address", "admin {\n  address = \"127.0.0.1:0\"\n}\n" + up, &Admin{Address: "127.0.0.1:0"}},
		{"localhost", "admin {\n  address = \"localhost:9100\"\n}\n" + up, &Admin{Address: "localhost:9100"}},
		{"ipv6 loopback", "admin {\n  address = \"[::1]:9100\"\n}\n" + up, &Admin{Address: "[::1]:9100"}},
		{"all interfaces with auth", "admin {\n  address = \"0.0.0.0:9090\"\n}\n" + auth + up, &Admin{Address: "0.0.0.0:9090"}},
		{"all interfaces, insecure", "admin {\n  address = \":9090\"\n  insecure_no_auth = true\n}\n" + up,
			&Admin{Address: ":9090", InsecureNoAuth: true}},
		{"admin groups", "admin {\n  groups = [\"ops\", \"sre\"]\n}\n" + strings.Replace(auth, "token", "groups = [\"sre\"]\n    token", 1) + up,
			&Admin{Address: DefaultAdminAddress, Groups: []string{"ops", "sre"}}},
		{"admin groups with a jwt block", "admin {\n  groups = [\"ops\"]\n}\n" + `auth {
  resource = "https://mcp.example.com/mcp"
  jwt {
    issuer   = "https://idp.example.com"
    jwks_url = "https://idp.example.com/jwks"
  }
}
` + up, &Admin{Address: DefaultAdminAddress, Groups: []string{"ops"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tt.src, fakeEnv(nil))
			if tt.want == nil {
				if cfg.Admin != nil {
					t.Fatalf("admin = %+v, want nil", cfg.Admin)
				}
				return
			}
			if cfg.Admin == nil {
				t.Fatal("admin = nil")
			}
			if cfg.Admin.DeclRange.Start.Line != 1 {
				t.Errorf("DeclRange = %v", cfg.Admin.DeclRange)
			}
			got := *cfg.Admin
			got.DeclRange = tt.want.DeclRange
			if !reflect.DeepEqual(got, *tt.want) {
				t.Errorf("admin = %+v, want %+v", got, *tt.want)
			}
		})
	}
}

func TestParseRequired(t *testing.T) {
	cfg := mustParse(t, `
upstream "a" {
  command = ["a"]
}
upstream "b" {
  command  = ["b"]
  required = false
}
upstream "c" {
  command  = ["c"]
  required = true
}
upstream "d" {
  command  = ["d"]
  disabled = true
}
upstream "e" {
  command  = ["e"]
  disabled = true
  required = false
}
`, fakeEnv(nil))
	want := map[string]bool{"a": true, "b": false, "c": true, "d": false, "e": false}
	for _, u := range cfg.Upstreams {
		if u.Required != want[u.Name] {
			t.Errorf("upstream %s: Required = %v, want %v", u.Name, u.Required, want[u.Name])
		}
	}
}

// TestAdminGroupsErrors: admin groups name groups of authenticated principals: none
// without an auth block, none empty, and with API keys only, one key must be in one.
func TestAdminGroupsErrors(t *testing.T) {
	const up = "upstream \"a\" {\n  command = [\"a\"]\n}\n"
	for _, tt := range []struct{ src, want string }{
		{"admin {\n  groups = [\"ops\"]\n}\n" + up,
			`p.hcl:2:12: error: Admin groups without authentication; "groups" names groups of the principals the auth block authenticates, and there is no auth block: without one, whoever reaches the admin listener is its operator. Add an auth block or remove groups.`},
		{"admin {\n  groups = []\n}\n" + up,
			`p.hcl:2:12: error: Invalid admin groups; "groups" must name at least one group, and no empty one: remove it to let every authenticated principal operate the proxy (each still manages only its own credentials).`},
		{"admin {\n  groups = [\"ops\"]\n}\nauth {\n  api_key \"alice\" {\n    token  = \"0123456789abcdef0123\"\n    groups = [\"dev\"]\n  }\n}\n" + up,
			`p.hcl:2:12: error: Nobody may administer; No api_key is in one of the admin groups ["ops"], and no jwt block may bring a principal in: nobody could reload, lock or manage another principal's credentials. Give an api_key groups = ["ops"].`},
	} {
		if got := mustFail(t, tt.src, fakeEnv(nil)); got != tt.want+"\n" {
			t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
		}
	}
}

// TestAdminErrors: every mistake in the admin block and in required is reported at its
// file:line, all in one run.
func TestAdminErrors(t *testing.T) {
	src := `admin {
  address = "nowhere"
}
admin {
  address = "0.0.0.0:9090"
  insecure_no_auth = "yes"
}
admin {
  adress = "127.0.0.1:1"
}
upstream "a" {
  command  = ["a"]
  disabled = true
  required = true
}
upstream "b" {
  command  = ["b"]
  required = "no"
}
`
	got := mustFail(t, src, fakeEnv(nil))
	want := strings.Join([]string{
		`p.hcl:2:13: error: Invalid address; "address" must be host:port, such as "127.0.0.1:9090": address nowhere: missing port in address.`,
		`p.hcl:4:1: error: Duplicate admin block; Only one admin block is allowed; the first one is at p.hcl:1:1.`,
		`p.hcl:5:13: error: Admin listener without authentication; The admin listener at "0.0.0.0:9090" would serve metrics and status beyond this machine without authentication: bind it to 127.0.0.1, add an auth block (its API keys and JWTs then guard the admin endpoints too), or set insecure_no_auth = true if something in front authenticates.`,
		`p.hcl:6:22: error: Invalid value; "insecure_no_auth" must be true or false, not a string; write true or false without quotes.`,
		`p.hcl:8:1: error: Duplicate admin block; Only one admin block is allowed; the first one is at p.hcl:1:1.`,
		`p.hcl:9:3: error: Unsupported argument; An argument named "adress" is not expected here. Did you mean "address"?`,
		`p.hcl:14:14: error: Required upstream is disabled; A disabled upstream is never started, so it cannot be required for readiness: drop required = true or disabled = true.`,
		`p.hcl:18:14: error: Invalid value; "required" must be true or false, not a string; write true or false without quotes.`,
	}, "\n") + "\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
