package config_test

import (
	"fmt"

	"github.com/mcp-proxy/mcp-proxy/config"
)

func ExampleParse() {
	src := []byte(`
proxy {
  separator = "."
}

upstream "github" {
  command = ["npx", "-y", "@modelcontextprotocol/server-github"]
  env     = { GITHUB_TOKEN = env("MCP_PROXY_EXAMPLE_UNSET_TOKEN", "none") }
  timeout = "90s"
}

upstream "files" {
  command   = ["mcp-files"]
  cwd       = "data"
  namespace = ""
}
`)
	cfg, diags := config.Parse(src, "proxy.hcl", "/etc/mcp-proxy")
	if diags.HasErrors() {
		fmt.Print(config.FormatDiagnostics(diags))
		return
	}
	fmt.Printf("proxy %s, separator %q, page size %d\n", cfg.Proxy.Name, cfg.Proxy.Separator, cfg.Proxy.PageSize)
	for _, u := range cfg.Upstreams {
		fmt.Printf("%s: %v in %s, namespace %q, timeout %s, token %q\n",
			u.Name, u.Command, u.Cwd, u.Namespace, u.Timeout, u.Env["GITHUB_TOKEN"])
	}
	// Output:
	// proxy mcp-proxy, separator ".", page size 100
	// github: [npx -y @modelcontextprotocol/server-github] in /etc/mcp-proxy, namespace "github", timeout 1m30s, token "none"
	// files: [mcp-files] in /etc/mcp-proxy/data, namespace "", timeout 1m0s, token ""
}

func ExampleFormatDiagnostics() {
	src := []byte(`upstream "github" {
  comand  = ["npx"]
  timeout = 60
}
`)
	_, diags := config.Parse(src, "proxy.hcl", "/etc/mcp-proxy")
	fmt.Print(config.FormatDiagnostics(diags)) // each line ends with a newline
	// Output:
	// proxy.hcl:1:1: error: Missing required argument; The argument "command" is required in upstream "github": a list of strings such as ["npx", "-y", "@modelcontextprotocol/server-github"].
	// proxy.hcl:2:3: error: Unsupported argument; An argument named "comand" is not expected here. Did you mean "command"?
	// proxy.hcl:3:13: error: Invalid duration; "timeout" must be a duration string, not a number; use a duration string such as "60s", "1m30s" or "500ms".
}
