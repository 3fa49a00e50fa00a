package config

import (
	"reflect"
	"strings"
	"testing"
)

const endpointUpstreams = `
upstream "github" {
  command = ["gh-mcp"]
}
upstream "fs" {
  command = ["fs-mcp"]
}
upstream "old" {
  command  = ["old-mcp"]
  disabled = true
}
`

func TestEndpointDecode(t *testing.T) {
	cfg := mustParse(t, endpointUpstreams+`
listen "http" {
  path = "/api"
}
endpoint "review" {
  path      = "/mcp/review/"
  upstreams = ["github", "fs"]
  tools {
    include = ["github__*_pull_request*", "fs__read_*"]
    exclude = ["*delete*"]
  }
  resources {
    include = ["file:///src/*"]
  }
  mode         = "search"
  always       = ["fs__read_file"]
  instructions = "Review code."
  search {
    limit                  = 8
    max_active             = 10
    tool_reference_clients = ["claude-code"]
    tool_reference_prefix  = "mcp__proxy__"
  }
}
endpoint "ide" {
}
`, Options{})
	if len(cfg.Endpoints) != 2 {
		t.Fatalf("%d endpoints", len(cfg.Endpoints))
	}
	r := cfg.Endpoints[0]
	ins := "Review code."
	want := Endpoint{Name: "review", Path: "/mcp/review", Upstreams: []string{"github", "fs"},
		Tools:     Patterns{Include: []string{"github__*_pull_request*", "fs__read_*"}, Exclude: []string{"*delete*"}},
		Resources: Patterns{Include: []string{"file:///src/*"}},
		Mode:      ModeSearch, Always: []string{"fs__read_file"}, Instructions: &ins,
		Search: EndpointSearch{Limit: 8, MaxLimit: DefaultSearchMaxLimit, MaxActive: 10,
			ToolReferenceClients: []string{"claude-code"}, ToolReferencePrefix: "mcp__proxy__"}}
	r.Ranges, r.DeclRange = nil, want.DeclRange
	if !reflect.DeepEqual(r, want) {
		t.Errorf("review:\n got %+v\nwant %+v", r, want)
	}
	ide := cfg.Endpoints[1]
	if ide.Path != "/api/ide" || ide.Mode != ModeAll || ide.Upstreams != nil || ide.Search.Limit != DefaultSearchLimit ||
		ide.Search.MaxActive != DefaultSearchMaxActive || ide.Instructions != nil {
		t.Errorf("defaults: %+v", ide)
	}
}

func TestEndpointErrors(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"unknown upstream", `endpoint "e" { upstreams = ["gihub"] }`, []string{`p.hcl:12:28`, `Endpoint "e" names upstream "gihub", which is not configured (upstreams: github, fs, old)`}},
		{"reserved name", `endpoint "default" {}`, []string{"Reserved endpoint name"}},
		{"bad name", `endpoint "a b" {}`, []string{"Invalid endpoint name"}},
		{"duplicate", "endpoint \"e\" {}\nendpoint \"e\" {}", []string{"Duplicate endpoint"}},
		{"path of listen", `endpoint "e" { path = "/mcp" }`, []string{"Path collision", "/mcp is already the listen block's path"}},
		{"path of sse", `endpoint "e" { path = "/sse" }`, []string{"/sse is already the legacy HTTP+SSE stream"}},
		{"paths of two", "endpoint \"a\" { path = \"/x\" }\nendpoint \"b\" { path = \"/x/sse\" }", []string{`/x/sse is already endpoint "a"'s`}},
		{"relative path", `endpoint "e" { path = "x" }`, []string{"Invalid path"}},
		{"mode", `endpoint "e" { mode = "find" }`, []string{`"mode" must be one of "all", "search"`}},
		{"always excluded", `endpoint "e" {
  mode   = "search"
  always = ["fs__write_file"]
  tools { exclude = ["*write*"] }
}`, []string{"Tool not in the endpoint", "its tools block leaves that name out"}},
		{"always of another upstream", `endpoint "e" {
  upstreams = ["fs"]
  mode      = "search"
  always    = ["github__list_issues"]
}`, []string{"Tool not in the endpoint", "start with fs__"}},
		{"limits", `endpoint "e" {
  search {
    limit     = 30
    max_limit = 10
  }
}`, []string{`"limit" (30) must not exceed "max_limit" (10)`}},
		{"zero active", `endpoint "e" {
  search { max_active = 0 }
}`, []string{`"max_active" must be between 1 and 1000`}},
		{"unknown ranker", `endpoint "e" {
  search { ranker = "embed" }
}`, []string{`names plugin "embed", which is not configured`}},
		{"empty upstreams", `endpoint "e" { upstreams = [] }`, []string{"Empty upstream list"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := mustFail(t, endpointUpstreams+c.src+"\n", Options{})
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("diagnostics lack %q:\n%s", w, got)
				}
			}
		})
	}
}

func TestEndpointWarnings(t *testing.T) {
	for _, c := range []struct {
		name, src, want string
	}{
		{"pattern of no upstream", `endpoint "e" {
  upstreams = ["github"]
  tools { include = ["gihub__*"] }
}`, `includes tools "gihub__*", but the names of its upstreams' tools start with github__`},
		{"disabled upstream", `endpoint "e" { upstreams = ["old", "fs"] }`, `names upstream "old", which is disabled`},
		{"always in mode all", `endpoint "e" { always = ["fs__read_file"] }`, `lists every tool (mode = "all")`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, diags := ParseWithOptions([]byte(endpointUpstreams+c.src+"\n"), "p.hcl", "/base", Options{})
			if cfg == nil || diags.HasErrors() || !strings.Contains(FormatDiagnostics(diags), c.want) {
				t.Errorf("diagnostics (want a warning %q):\n%s", c.want, FormatDiagnostics(diags))
			}
		})
	}
	// A pattern over an upstream with an empty namespace can match anything: no warning.
	cfg, diags := ParseWithOptions([]byte(`
upstream "fs" {
  command   = ["fs"]
  namespace = ""
}
endpoint "e" {
  tools { include = ["anything*"] }
}
`), "p.hcl", "/base", Options{})
	if cfg == nil || len(diags) > 0 {
		t.Errorf("unprefixed names: %s", FormatDiagnostics(diags))
	}
}

func TestCanMatchPrefix(t *testing.T) {
	pre := []string{"github__", "fs__"}
	for p, want := range map[string]bool{
		"github__*": true, "git*": true, "*read*": true, "fs__read_file": true, "f?__x": true,
		"gitlab__*": false, "fs_read": false, "x*": false,
	} {
		if got := canMatchPrefix(p, pre); got != want {
			t.Errorf("canMatchPrefix(%q) = %v, want %v", p, got, want)
		}
	}
}
