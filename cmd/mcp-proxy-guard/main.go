// Command mcp-proxy-guard is the proxy's shipped guard plugin: it refuses tool calls
// whose arguments fail checks that policy conditions cannot express well — SQL that is
// not one read-only statement, a command line that is not one allowed program, a URL
// whose host is not allowed — by parsing them, not by matching text. The proxy starts
// it; its plugin block's matchers choose the tools it guards.
package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcp-proxy/mcp-proxy/plugins/guard"
	"github.com/mcp-proxy/mcp-proxy/plugins/sdk"
)

type plugin struct {
	sdk.Base
	g *guard.Guard
}

func (p *plugin) Describe() sdk.Description {
	return sdk.Description{Name: "guard", Version: "1.0.0", Hooks: []sdk.Hook{sdk.HookBefore},
		Config: []sdk.Attribute{
			{Name: "sql_arguments", Type: "list(string)", Description: "arguments holding SQL: one read-only statement each"},
			{Name: "sql_dialect", Type: "string", Description: `postgres, mysql, sqlite or sqlserver (default: read-only in every one of them)`},
			{Name: "command_arguments", Type: "list(string)", Description: "arguments holding a command line"},
			{Name: "commands", Type: "list(string)", Description: "the programs a command line may run"},
			{Name: "url_arguments", Type: "list(string)", Description: "arguments holding a URL (or a list of URLs)"},
			{Name: "hosts", Type: "list(string)", Description: "allowed hosts: names, *.suffix, IP addresses, CIDR ranges"},
			{Name: "schemes", Type: "list(string)", Description: `allowed URL schemes (default ["https", "http"])`},
		}}
}

func (p *plugin) Configure(_ context.Context, _ string, raw json.RawMessage) error {
	var c guard.Config
	if err := sdk.Decode(raw, &c); err != nil {
		return err
	}
	g, err := guard.New(c)
	if err != nil {
		return sdk.ConfigError("Invalid guard configuration", err, "sql_arguments", "sql_dialect", "command_arguments", "commands", "url_arguments", "hosts", "schemes")
	}
	p.g = g
	return nil
}

func (p *plugin) Before(_ context.Context, c *sdk.Call) (*sdk.Verdict, error) {
	if c.Method != "tools/call" {
		return nil, nil
	}
	err := p.g.Check(c.Arguments)
	if err == nil {
		return nil, nil
	}
	var v *guard.Violation
	if errors.As(err, &v) {
		return &sdk.Verdict{Deny: err.Error(), Notes: map[string]any{"argument": v.Argument}}, nil
	}
	return sdk.Deny(err.Error()), nil
}

func main() { sdk.Serve(&plugin{}) }
