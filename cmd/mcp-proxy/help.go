package main

import (
	"errors"
	"flag"
	"fmt"
	"reflect"
	"strings"
)

// One mechanism for every command's help. A command's flags are defined where it parses
// them (newFlagSet, then parseFlags); what is said about the command is in commands
// below. From the two, parseFlags answers --help with the full help (on stdout, exit 0)
// and a usage mistake with the short usage (on stderr, exit 2); the top-level usage and
// the completion scripts are built from the same table.

// use is one way to call a command.
type use struct {
	args    string // after "mcp-proxy NAME"
	summary string // what it does, one line
}

// cmdHelp is what is said about one command.
type cmdHelp struct {
	name    string
	uses    []use
	desc    string // paragraphs, wrapped by hand
	example string // command lines, one per line
	// args is what the positional arguments complete to: "files", a list of words, or
	// "" for nothing.
	args string
}

// commands is every command, in the order the top-level usage lists them.
var commands = []cmdHelp{
	{
		name: "run",
		uses: []use{{"[--config FILE] [--endpoint NAME]", "serve the merged servers on stdin/stdout (or HTTP)"}},
		desc: `Start the configured upstreams and serve their merged tools, prompts and resources:
to one client on stdin/stdout, or over Streamable HTTP when the configuration has a
listen "http" block. stdout carries only the protocol; logs go to stderr. With
--endpoint (stdio only), the client is served the endpoint block NAME: its upstreams,
its filters, its mode; over HTTP every endpoint has its own path.`,
		example: `mcp-proxy run --config ~/.config/mcp-proxy/proxy.hcl --log-format console`,
	},
	{
		name: "validate",
		uses: []use{{"[--config FILE | FILE] [--skip-plugins]", "check a config file; exit 1 with diagnostics"}},
		desc: `Check a configuration file without starting upstreams. Every problem is printed at
once on stderr, one per line as file:line:col: message; the exit status is 1 if there
are errors, 0 otherwise (warnings are printed too). Each plugin is started (and
stopped) to check its sha256 and its config block against the schema it describes;
--skip-plugins checks the file alone, where the plugin programs are not installed.`,
		example: `mcp-proxy validate proxy.hcl`,
		args:    "files",
	},
	{
		name: "tools",
		uses: []use{{"[--config FILE] [--json] [--endpoint NAME] [--as PRINCIPAL [--groups G,..]]",
			"start the upstreams, print the merged tools (those PRINCIPAL may see)"}},
		desc: `Start the upstreams, wait for their first handshake, print the merged tool catalogue
(exposed name, upstream, description) and stop them again. The exit status is 1 if an
upstream failed to start; the others' tools are printed all the same. With --as, only
the tools the policy lets that principal see are listed (an api_key's groups are
added to --groups). With --endpoint, the catalogue of that endpoint block: in search
mode, every tool its search may find (clients list search_tools and call_tool).`,
		example: `mcp-proxy tools --config proxy.hcl --as alice --groups dev,ops`,
	},
	{
		name: "call",
		uses: []use{{"[--config FILE] TOOL [JSON]", "call one tool through the proxy, print the result"}},
		desc: `Start the upstreams, call one tool by its exposed name with the JSON object given as
its arguments (default {}), and print the result. The exit status is 1 when the call
fails or the tool reports an error (isError). Progress goes to stderr.`,
		example: `mcp-proxy call --config proxy.hcl github__search_issues '{"q": "is:open label:bug"}'`,
	},
	{
		name: "lock",
		uses: []use{{"[--config FILE] [--update] [--upstream NAME]...", "write or check the lock file of approved tool definitions"}},
		desc: `Start the upstreams and compare what they list (tools, prompts, resource templates)
with the lock file (proxy { lock_file }, default proxy.lock beside the configuration).
Without a lock file, write it. With one, print every definition that is new, changed
(field by field) or removed, and exit 1 if there is any; --update approves them: the
lock file is written with what the upstreams list now (only the --upstream ones when
given; the others keep their entries). Under proxy { pin = "enforce" } a running proxy
serves only what the lock file approves; reload it (or POST /lock on its admin
listener) after an update.`,
		example: `mcp-proxy lock --config proxy.hcl --update --upstream github`,
	},
	{
		name: "screen",
		uses: []use{{"[--config FILE] [--json]", "start the upstreams, print the poisoning findings in their definitions"}},
		desc: `Start the upstreams and screen every tool, prompt and resource template definition for
text aimed at the model rather than its user: invisible Unicode (tag characters, bidi
controls, zero-width characters), instruction markup, directives to hide things from
the user or to ignore instructions, credential files, other upstreams' tool names,
outlying description lengths. Each finding has a check name and a severity; the exit
status is 1 if any has a severity that screen = "withhold" withholds (medium, high).`,
		example: `mcp-proxy screen --config proxy.hcl --json`,
	},
	{
		name: "status",
		uses: []use{{"[--admin URL | --config FILE] [--json]", "show a running proxy's upstreams and sessions; exit 1 if not ready"}},
		desc: `Ask a running proxy's admin listener for its status and print it: each upstream's
state, transport, era, catalogue, restarts, calls and p50/p99 latency of the last five
minutes and last error; the client sessions; the configuration it runs. The URL is
--admin, else the admin block of --config (or of ./proxy.hcl when it exists), else
http://127.0.0.1:9090. An admin listener behind the auth block takes the API key (or
JWT) in the MCP_PROXY_API_KEY environment variable. The exit status is 1 when the proxy
is not ready (a required upstream is not up) or cannot be reached.`,
		example: `mcp-proxy status --admin http://127.0.0.1:9090 --json`,
	},
	{
		name: "reload",
		uses: []use{{"[--admin URL | --config FILE] [--json]", "make a running proxy reload its configuration file"}},
		desc: `Ask a running proxy's admin listener to read its configuration file again and apply
what changed (as SIGHUP does): upstreams added, removed or changed, the policy, limits,
audit, auth keys and plugins, without dropping a client session. A file with errors is
refused and the running configuration stays; the errors are printed at file:line and
the exit status is 1. Settings that cannot change while the proxy runs (listen, admin,
telemetry, the proxy block) are listed as needing a restart. The admin listener is
found as for status; MCP_PROXY_API_KEY carries its key behind the auth block.`,
		example: `mcp-proxy reload --config proxy.hcl`,
	},
	{
		name: "credentials",
		uses: []use{
			{"list [--upstream NAME] [--principal NAME] [--admin URL | --config FILE] [--json]", "show the principals' per-user grants, never a token"},
			{"revoke --principal NAME [--upstream NAME] [--admin URL | --config FILE] [--json]", "end a principal's grants and close its upstream sessions"},
			{"set-secret --upstream NAME --principal NAME --name SECRET [--admin URL | --config FILE]", "store a principal's secret (read from stdin) in the token store"},
		},
		desc: `Ask a running proxy's admin listener for the per-user credentials of its upstreams
(docs/credentials.md): list prints each grant's upstream, principal, mode, the subject
the upstream knows it as, when it expires, whether it can be refreshed, and its scopes
(or the names of a principal's secrets); never a token or a secret's value. revoke ends
a principal's grants (with one upstream, or all): the authorization server is asked to
revoke them where it offers revocation, the store forgets them, and the principal's
upstream sessions close; its next call starts afresh (in mode "oauth", with a new link
to authorize). set-secret stores the principal's secret NAME, read from stdin, for an
upstream in mode "secret" without a secrets_file (its next session uses it). The admin
listener is found as for status; MCP_PROXY_API_KEY carries its key behind the auth
block.`,
		example: `mcp-proxy credentials list --upstream jira
mcp-proxy credentials revoke --principal alice@example.com --upstream jira`,
		args: "list revoke set-secret",
	},
	{
		name: "import",
		uses: []use{{"[-o FILE [--force]] [--workspace DIR] FILE...", "convert IDE server lists (JSON) into a config"}},
		desc: `Convert the MCP server lists of client configuration files into one mcp-proxy
configuration: Claude Desktop's claude_desktop_config.json, Cursor's mcp.json and
Claude Code's .mcp.json ("mcpServers"), VS Code's .vscode/mcp.json ("servers",
"inputs"). Several files are merged; a server name already imported from an earlier
file is skipped with a warning. Values that look like credentials are not copied: they
become env("NAME") references, listed at the top of the file.

The configuration goes to stdout (or FILE); warnings, the variables to set and the
snippet that replaces the client's list with one entry for the proxy go to stderr.
run, tools and call also take such a JSON file directly as --config.`,
		example: `mcp-proxy import -o proxy.hcl ~/.cursor/mcp.json .vscode/mcp.json`,
		args:    "files",
	},
	{
		name: "bridge",
		uses: []use{
			{"--url URL [--header NAME=VALUE]...", "expose one remote (Streamable HTTP) server on stdin/stdout"},
			{"--listen HOST:PORT [--path PATH] [--insecure-no-auth] -- CMD ARGS...", "serve one stdio server over Streamable HTTP"},
		},
		desc: `Bridge one server without a configuration file, names unprefixed. With --url, a
remote Streamable HTTP (or legacy HTTP+SSE) server is served on stdin/stdout; a server
that asks for OAuth is authorized (a browser opens for approval). With --listen, the
command after -- is run and served over Streamable HTTP; a non-loopback address needs
--insecure-no-auth, since a bridge has no authentication of its own.`,
		example: `mcp-proxy bridge --url https://mcp.example.com/mcp --header "Authorization=Bearer $TOKEN"
mcp-proxy bridge --listen 127.0.0.1:8080 -- npx -y @modelcontextprotocol/server-everything`,
	},
	{
		name: "hash-key",
		uses: []use{{"", "read an API key on stdin, print its sha256 for auth.api_key"}},
		desc: `Read an API key (at least 16 characters) from the first line of stdin and print the
sha256 an api_key block takes, so that the configuration never holds the key itself.`,
		example: `openssl rand -hex 32 | tee key | mcp-proxy hash-key`,
	},
	{
		name: "completion",
		uses: []use{{"bash|zsh|fish", "print a shell completion script"}},
		desc: `Print a script that completes mcp-proxy's commands, their flags, and file names for
--config, for the given shell.`,
		example: `source <(mcp-proxy completion bash)                # bash, e.g. in ~/.bashrc
mcp-proxy completion zsh > "${fpath[1]}/_mcp-proxy"  # zsh
mcp-proxy completion fish > ~/.config/fish/completions/mcp-proxy.fish`,
		args: "bash zsh fish",
	},
	{
		name:    "version",
		uses:    []use{{"", "print the version (also --version, -v)"}},
		desc:    `Print the version: the release it was built as, or the revision it was built from.`,
		example: `mcp-proxy --version`,
	},
}

// helpFor is what is said about the command name; a command missing from commands gets
// a generic synopsis, so that its --help still lists its flags.
func helpFor(name string) cmdHelp {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return cmdHelp{name: name, uses: []use{{"[flags]", ""}}}
}

// helpError is what parseFlags returns for --help: run prints the command's help on
// stdout and exits 0.
type helpError struct{ fs *flag.FlagSet }

func (h helpError) Error() string { return "help requested" }

// usageErrorf is a usage mistake in command name: the message, then the short usage,
// exit status 2.
func usageErrorf(name, format string, args ...any) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", name, fmt.Sprintf(format, args...))
	for i, u := range helpFor(name).uses {
		lead := "usage:"
		if i > 0 {
			lead = "   or:"
		}
		fmt.Fprintf(&b, "%s %s\n", lead, strings.TrimSpace("mcp-proxy "+name+" "+u.args))
	}
	fmt.Fprintf(&b, "Run 'mcp-proxy %s --help' for more.", name)
	return exitError{code: 2, msg: b.String()}
}

// usageColumn is where the top-level usage starts a command's summary.
const usageColumn = 51

// topUsage is the top-level usage.
func topUsage() string {
	var b strings.Builder
	b.WriteString("mcp-proxy: one MCP server in front of many.\n\nUsage:\n")
	for _, c := range commands {
		for _, u := range c.uses {
			line := strings.TrimRight(fmt.Sprintf("  mcp-proxy %-8s %s", c.name, u.args), " ")
			if len(line) >= usageColumn-1 {
				b.WriteString(line + "\n")
				line = ""
			}
			fmt.Fprintf(&b, "%-*s%s\n", usageColumn, line, u.summary)
		}
	}
	b.WriteString(`
Common flags (after the command; each command's --help lists its own):
  --config FILE        configuration file (default ./proxy.hcl)
  --log-level LEVEL    trace, debug, info, warn, error (default info)
  --log-format FORMAT  json or console (default json); logs always go to stderr

Run 'mcp-proxy COMMAND --help' for a command's flags and an example.
`)
	return b.String()
}

// commandHelp is the full help of the command whose flags fs holds.
func commandHelp(fs *flag.FlagSet) string {
	c := helpFor(fs.Name())
	var b strings.Builder
	if len(c.uses) > 0 && c.uses[0].summary != "" {
		fmt.Fprintf(&b, "mcp-proxy %s: %s.\n\n", c.name, c.uses[0].summary)
	}
	b.WriteString("Usage:\n")
	for _, u := range c.uses {
		fmt.Fprintf(&b, "  %s\n", strings.TrimSpace("mcp-proxy "+c.name+" "+u.args))
	}
	if c.desc != "" {
		fmt.Fprintf(&b, "\n%s\n", c.desc)
	}
	var flags []string
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		left := "  " + dashed(f.Name)
		if v := valueName(f); v != "" {
			left += " " + v
		}
		flags = append(flags, left)
		width = max(width, len(left))
	})
	if len(flags) > 0 {
		b.WriteString("\nFlags:\n")
		i := 0
		fs.VisitAll(func(f *flag.Flag) {
			_, usage := flag.UnquoteUsage(f)
			if !isZeroValue(f) {
				usage += fmt.Sprintf(" (default %s)", f.DefValue)
			}
			for j, line := range wrap(usage, 78-width-2) {
				left := ""
				if j == 0 {
					left = flags[i]
				}
				fmt.Fprintf(&b, "%-*s  %s\n", width, left, line)
			}
			i++
		})
	}
	if c.example != "" {
		b.WriteString("\nExample:\n")
		for _, line := range strings.Split(c.example, "\n") {
			fmt.Fprintf(&b, "  %s\n", line)
		}
	}
	return b.String()
}

// dashed is how help and completion spell a flag: -o for a one-letter name, --name
// otherwise (the flag package takes either).
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// valueName is what a flag's value is called in help (FILE in "--config FILE"): the
// back-quoted word of its usage; "" for a boolean flag.
func valueName(f *flag.Flag) string {
	if isBoolFlag(f) {
		return ""
	}
	name, _ := flag.UnquoteUsage(f)
	return strings.ToUpper(name)
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// isZeroValue reports whether f's default is its type's zero value, which help does not
// show (as the flag package decides).
func isZeroValue(f *flag.Flag) (zero bool) {
	defer func() {
		if recover() != nil {
			zero = false
		}
	}()
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	return f.DefValue == z.Interface().(flag.Value).String()
}

// wrap breaks s into lines of at most width characters, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

// isHelp reports whether err asks for a command's help.
func isHelp(err error) (helpError, bool) {
	var h helpError
	ok := errors.As(err, &h)
	return h, ok
}
