// Command mcp-proxy-redact is the proxy's shipped redact plugin: it masks secrets and
// personal data (provider API keys and tokens, private keys, JWTs, e-mail addresses,
// card numbers, your own expressions) in tool results, prompt messages and resource
// contents, and optionally in arguments before they go upstream. It reports how many
// of each it masked, never the values. The proxy starts it; `-list` prints the detectors.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/mcp-proxy/mcp-proxy/plugins/redact"
	"github.com/mcp-proxy/mcp-proxy/plugins/sdk"
)

// metaKey is the _meta member of a result that says what was masked.
const metaKey = "dev.mcp-proxy/redact"

type config struct {
	redact.Config
	Arguments bool `json:"arguments"`
}

type plugin struct {
	sdk.Base
	r         *redact.Redactor
	arguments bool
}

var _ sdk.HookSelector = (*plugin)(nil)

func (p *plugin) Describe() sdk.Description {
	return sdk.Description{Name: "redact", Version: "1.0.0", Hooks: []sdk.Hook{sdk.HookBefore, sdk.HookAfter},
		Config: []sdk.Attribute{
			{Name: "patterns", Type: "list(string)", Description: "built-in detectors to use (default: all; mcp-proxy-redact -list)"},
			{Name: "custom", Type: "map(string)", Description: "your own detectors: name = RE2 expression"},
			{Name: "replacement", Type: "string", Description: `the mask; {name} is the detector (default "[REDACTED:{name}]")`},
			{Name: "arguments", Type: "bool", Description: "also mask the arguments before they go upstream"},
		}}
}

func (p *plugin) Configure(_ context.Context, _ string, raw json.RawMessage) error {
	var c config
	if err := sdk.Decode(raw, &c); err != nil {
		return err
	}
	r, err := redact.New(c.Config)
	if err != nil {
		return sdk.ConfigError("Invalid redact configuration", err, "patterns", "custom", "replacement")
	}
	p.r, p.arguments = r, c.Arguments
	return nil
}

// Hooks: the before hook only when arguments are masked.
func (p *plugin) Hooks() []sdk.Hook {
	if p.arguments {
		return []sdk.Hook{sdk.HookBefore, sdk.HookAfter}
	}
	return []sdk.Hook{sdk.HookAfter}
}

func (p *plugin) Before(_ context.Context, c *sdk.Call) (*sdk.Verdict, error) {
	if !p.arguments || len(c.Arguments) == 0 {
		return nil, nil
	}
	out, counts, err := p.r.JSON(c.Arguments)
	if err != nil || counts == nil {
		return nil, err
	}
	return &sdk.Verdict{Arguments: out, Notes: map[string]any{"masked": counts}}, nil
}

func (p *plugin) After(_ context.Context, _ *sdk.Call, o *sdk.Outcome) (*sdk.Replacement, error) {
	if o.Error != nil {
		msg, counts := p.r.String(o.Error.Message)
		data, dcounts, err := p.maskOptional(o.Error.Data)
		if err != nil || counts == nil && dcounts == nil {
			return nil, err
		}
		return &sdk.Replacement{Error: &sdk.Error{Code: o.Error.Code, Message: msg, Data: data},
			Notes: map[string]any{"masked": merge(counts, dcounts)}}, nil
	}
	out, counts, err := p.r.JSON(o.Result)
	if err != nil || counts == nil {
		return nil, err
	}
	out, err = withMeta(out, counts)
	if err != nil {
		return nil, err
	}
	return &sdk.Replacement{Result: out, Notes: map[string]any{"masked": counts}}, nil
}

func (p *plugin) maskOptional(doc json.RawMessage) (json.RawMessage, map[string]int, error) {
	if len(doc) == 0 {
		return doc, nil, nil
	}
	return p.r.JSON(doc)
}

func merge(a, b map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range a {
		out[k] += v
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

// withMeta adds what was masked to the result's _meta, keeping what is there.
func withMeta(result json.RawMessage, counts map[string]int) (json.RawMessage, error) {
	var res map[string]json.RawMessage
	if err := json.Unmarshal(result, &res); err != nil {
		return nil, fmt.Errorf("the result is not a JSON object: %w", err)
	}
	meta := map[string]json.RawMessage{}
	if m, ok := res["_meta"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, fmt.Errorf("the result's _meta is not an object: %w", err)
		}
	}
	b, err := json.Marshal(map[string]any{"masked": counts})
	if err != nil {
		return nil, err
	}
	meta[metaKey] = b
	if res["_meta"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-proxy-redact:", err)
		os.Exit(2)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("mcp-proxy-redact", flag.ContinueOnError)
	list := fs.Bool("list", false, "print the built-in detectors and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *list {
		for _, d := range redact.Detectors() {
			fmt.Fprintf(stdout, "%-16s %s\n", d.Name, d.Description)
		}
		return nil
	}
	sdk.Serve(&plugin{})
	return nil
}
