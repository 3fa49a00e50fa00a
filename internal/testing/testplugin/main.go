// Command testplugin is a plugin of mcp-proxy whose behaviour the end-to-end tests choose
// in its config block: deny, rewrite, annotate, hide, crash, hang, answer badly, rank
// (with -hooks rank: every tool in reverse order of name, whatever the query). It is a
// test fixture, built by the tests; it is not shipped. Flags choose what must happen
// before a config exists (-describe, -protocol).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcp-proxy/mcp-proxy/plugins/sdk"
)

type config struct {
	Tag       string            `json:"tag"`        // appended to text results, and to notes
	Deny      string            `json:"deny"`       // deny calls whose name contains this
	SetArgs   map[string]string `json:"set_args"`   // before: set these arguments
	Crash     string            `json:"crash"`      // "before", "after" or "rank": exit in that hook
	Hang      string            `json:"hang"`       // "before", "after" or "rank": never answer in that hook
	Bad       string            `json:"bad"`        // "args": rewrite to invalid arguments; "result": rewrite to a non-object
	ErrorOut  bool              `json:"error_out"`  // after: replace the result with an error
	Hide      []string          `json:"hide"`       // catalogue: hide items whose name contains one of these
	Describe  string            `json:"describe"`   // catalogue: set this description on every item it sees
	CallsFile string            `json:"calls_file"` // append "hook name pid principal groups arguments meta" lines for every hook call
	Limit     int               `json:"limit"`      // must be at most 10 (a plugin's own configuration check)
	Structure bool              `json:"structure"`  // after: also tag structuredContent.tag
}

type plugin struct {
	sdk.Base
	hooks []sdk.Hook
	cfg   config

	mu      sync.Mutex          // guards indexes
	indexes map[string][]string // Index's documents' names, in reverse order, by id
}

func (p *plugin) Describe() sdk.Description {
	return sdk.Description{Name: "testplugin", Version: "0.1.0", Hooks: p.hooks, Config: []sdk.Attribute{
		{Name: "tag", Type: "string"},
		{Name: "deny", Type: "string"},
		{Name: "set_args", Type: "map(string)"},
		{Name: "crash", Type: "string"},
		{Name: "hang", Type: "string"},
		{Name: "bad", Type: "string"},
		{Name: "error_out", Type: "bool"},
		{Name: "hide", Type: "list(string)"},
		{Name: "describe", Type: "string"},
		{Name: "calls_file", Type: "string"},
		{Name: "limit", Type: "number"},
		{Name: "structure", Type: "bool"},
	}}
}

func (p *plugin) Configure(_ context.Context, _ string, raw json.RawMessage) error {
	if err := sdk.Decode(raw, &p.cfg); err != nil {
		return err
	}
	if p.cfg.Limit > 10 {
		return sdk.Diagnostics{{Summary: "Limit too high", Detail: fmt.Sprintf("limit is %d; at most 10", p.cfg.Limit), Attribute: "limit"}}
	}
	return nil
}

func (p *plugin) record(hook string, c *sdk.Call) {
	p.recordLine(hook, c.Name, fmt.Sprintf(" %s %s %s %s", c.Principal.Name, strings.Join(c.Principal.Groups, ","), c.Arguments, c.Meta))
}

func (p *plugin) recordLine(hook, name, extra string) {
	if p.cfg.CallsFile == "" {
		return
	}
	f, err := os.OpenFile(p.cfg.CallsFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s %s %d%s\n", hook, name, os.Getpid(), extra)
	f.Close()
}

func (p *plugin) misbehave(hook string) {
	if p.cfg.Crash == hook {
		os.Exit(3)
	}
	if p.cfg.Hang == hook {
		time.Sleep(time.Hour)
	}
}

func (p *plugin) Before(_ context.Context, c *sdk.Call) (*sdk.Verdict, error) {
	p.record("before", c)
	p.misbehave("before")
	if p.cfg.Deny != "" && strings.Contains(c.Name, p.cfg.Deny) {
		return &sdk.Verdict{Deny: "calls of " + c.Name + " are not allowed by testplugin", Notes: map[string]any{"tag": p.cfg.Tag}}, nil
	}
	if p.cfg.Bad == "args" {
		return sdk.Rewrite(json.RawMessage(`[1,2]`)), nil
	}
	if len(p.cfg.SetArgs) > 0 {
		args := map[string]any{}
		if len(c.Arguments) > 0 {
			if err := json.Unmarshal(c.Arguments, &args); err != nil {
				return nil, err
			}
		}
		for k, v := range p.cfg.SetArgs {
			args[k] = v
		}
		b, _ := json.Marshal(args)
		return &sdk.Verdict{Arguments: b, Notes: map[string]any{"set": len(p.cfg.SetArgs)}}, nil
	}
	return nil, nil
}

func (p *plugin) After(_ context.Context, c *sdk.Call, o *sdk.Outcome) (*sdk.Replacement, error) {
	p.record("after", c)
	p.misbehave("after")
	if p.cfg.ErrorOut {
		return &sdk.Replacement{Error: &sdk.Error{Code: -32000, Message: "testplugin replaced the result"}}, nil
	}
	if p.cfg.Bad == "result" {
		return &sdk.Replacement{Result: json.RawMessage(`"not an object"`)}, nil
	}
	if o.Result == nil || p.cfg.Tag == "" {
		return nil, nil
	}
	var res map[string]any
	if err := json.Unmarshal(o.Result, &res); err != nil {
		return nil, err
	}
	content, _ := res["content"].([]any)
	for _, c := range content {
		if m, ok := c.(map[string]any); ok && m["type"] == "text" {
			m["text"] = fmt.Sprint(m["text"]) + p.cfg.Tag
		}
	}
	if p.cfg.Structure {
		sc, _ := res["structuredContent"].(map[string]any)
		if sc == nil {
			sc = map[string]any{}
		}
		sc["tag"] = p.cfg.Tag
		res["structuredContent"] = sc
	}
	res["_meta"] = map[string]any{"testplugin": p.cfg.Tag}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	return &sdk.Replacement{Result: b, Notes: map[string]any{"tag": p.cfg.Tag}}, nil
}

func (p *plugin) Catalogue(_ context.Context, items []sdk.Item) ([]sdk.Change, error) {
	p.recordLine("catalogue", fmt.Sprint(len(items)), "")
	var out []sdk.Change
	for i, it := range items {
		hide := false
		for _, h := range p.cfg.Hide {
			if strings.Contains(it.Name, h) {
				hide = true
			}
		}
		switch {
		case hide:
			out = append(out, sdk.Change{Index: i, Hide: true})
		case p.cfg.Describe != "":
			var m map[string]any
			if err := json.Unmarshal(it.Raw, &m); err != nil {
				return nil, err
			}
			m["description"] = p.cfg.Describe
			b, _ := json.Marshal(m)
			out = append(out, sdk.Change{Index: i, Raw: b})
		}
	}
	return out, nil
}

// Index keeps the names of the documents, in reverse order.
func (p *plugin) Index(_ context.Context, id, previous string, docs []sdk.Document) error {
	p.recordLine("index", id, fmt.Sprintf(" %d %s", len(docs), previous))
	names := make([]string, len(docs))
	for i, d := range docs {
		names[i] = d.Name
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.indexes == nil {
		p.indexes = map[string][]string{}
	}
	delete(p.indexes, previous)
	p.indexes[id] = names
	return nil
}

// Rank ranks every document of the index in reverse order of name.
func (p *plugin) Rank(_ context.Context, id, query string, limit int) ([]sdk.Ranked, error) {
	p.recordLine("rank", id, " "+query)
	p.misbehave("rank")
	p.mu.Lock()
	names, ok := p.indexes[id]
	p.mu.Unlock()
	if !ok {
		return nil, status.Error(codes.NotFound, "no index "+id)
	}
	out := make([]sdk.Ranked, 0, limit)
	for i, n := range names[:min(limit, len(names))] {
		out = append(out, sdk.Ranked{Name: n, Score: float64(len(names) - i)})
	}
	return out, nil
}

func main() {
	hooks := flag.String("hooks", "before,after", "the hooks to describe")
	describe := flag.String("describe", "", `"noname": describe without a name; "badschema": a schema type the proxy cannot parse`)
	protocol := flag.Int("protocol", sdk.ProtocolVersion, "the handshake's protocol version")
	flag.Parse()
	p := &plugin{}
	for _, h := range strings.Split(*hooks, ",") {
		p.hooks = append(p.hooks, sdk.Hook(h))
	}
	switch *describe {
	case "noname":
		sdk.Serve(&noName{p})
		return
	case "badschema":
		sdk.Serve(&badSchema{p})
		return
	}
	if *protocol != sdk.ProtocolVersion {
		hs := sdk.Handshake
		hs.ProtocolVersion = uint(*protocol)
		goplugin.Serve(&goplugin.ServeConfig{HandshakeConfig: hs, Plugins: goplugin.PluginSet{sdk.PluginKey: &sdk.GRPC{Impl: p}},
			GRPCServer: goplugin.DefaultGRPCServer})
		return
	}
	sdk.Serve(p)
}

type noName struct{ *plugin }

func (n *noName) Describe() sdk.Description {
	d := n.plugin.Describe()
	d.Name = ""
	return d
}

type badSchema struct{ *plugin }

func (b *badSchema) Describe() sdk.Description {
	d := b.plugin.Describe()
	d.Config = append(d.Config, sdk.Attribute{Name: "broken", Type: "list(strin"})
	return d
}
