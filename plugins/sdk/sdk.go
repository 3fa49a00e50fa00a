// Package sdk is what a plugin author needs to extend mcp-proxy: the Plugin interface,
// Base (no-op defaults to embed), and Serve, which makes the program a plugin that the
// proxy starts, checks and talks to over gRPC. A plugin is a small Go program:
//
//	type upper struct{ sdk.Base }
//
//	func (upper) Describe() sdk.Description {
//		return sdk.Description{Name: "upper", Version: "1.0.0", Hooks: []sdk.Hook{sdk.HookAfter}}
//	}
//
//	func (upper) After(ctx context.Context, c *sdk.Call, o *sdk.Outcome) (*sdk.Replacement, error) { ... }
//
//	func main() { sdk.Serve(upper{}) }
//
// The package is the plugin's side of the interface only: it never sees the client's
// credentials, and what a plugin returns is checked by the proxy (a malformed answer is
// the plugin's failure, not the client's).
package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// ProtocolVersion is the version of the interface between the proxy and its plugins
// (go-plugin's handshake). A plugin built against another version is refused at start.
const ProtocolVersion = 1

// Hook is a kind of hook a plugin implements.
type Hook string

const (
	// HookBefore: Plugin.Before runs before a routed call goes upstream.
	HookBefore Hook = "before"
	// HookAfter: Plugin.After runs on the upstream's answer.
	HookAfter Hook = "after"
	// HookCatalogue: Plugin.Catalogue runs when the merged catalogue changes.
	HookCatalogue Hook = "catalogue"
	// HookRank: the plugin is a Ranker, which ranks the tools of the endpoints whose
	// search block names it (an embedding ranker, say).
	HookRank Hook = "rank"
)

// Description is who the plugin is, what it hooks, and its configuration's schema.
type Description struct {
	Name    string
	Version string
	Hooks   []Hook
	// Config is the schema of the plugin's config block in the proxy's file. The proxy
	// decodes the block against it (unknown attributes and wrong types are reported at
	// their file:line by `mcp-proxy validate`) and passes it to Configure as JSON.
	Config []Attribute
}

// Attribute is one attribute of the config block.
type Attribute struct {
	Name string
	// Type is an HCL type constraint: "string", "number", "bool", "list(string)",
	// "map(string)", "object({pattern = string, flags = list(string)})", "any".
	Type        string
	Required    bool
	Description string
}

// Principal is who made a call, as the proxy authenticated it.
type Principal struct {
	Name   string
	Groups []string
}

// Call is one routed request (tools/call, prompts/get or resources/read).
type Call struct {
	Method       string // "tools/call", "prompts/get", "resources/read"
	Kind         string // "tool", "prompt", "resource"
	Upstream     string // the configured name of the upstream that serves it
	Name         string // the name (or URI) the client used
	OriginalName string // the upstream's own name (or URI)
	Principal    Principal
	ClientName   string          // the client's clientInfo.name, when it gave one
	Arguments    json.RawMessage // a JSON object, or nil (resources/read)
	Meta         json.RawMessage // the request's _meta, or nil
}

// Verdict is what a before hook decided. nil (or the zero Verdict) allows the call
// unchanged.
type Verdict struct {
	// Deny refuses the call with this message (the client reads it).
	Deny string
	// Arguments, when not nil, replace the call's arguments (a JSON object).
	Arguments json.RawMessage
	// Notes go into the proxy's audit record for the call (never put secrets here).
	Notes map[string]any
}

// Allow is the verdict that lets a call through unchanged.
func Allow() *Verdict { return nil }

// Deny refuses a call; the client reads msg.
func Deny(msg string) *Verdict { return &Verdict{Deny: msg} }

// Rewrite lets the call through with other arguments.
func Rewrite(arguments json.RawMessage) *Verdict { return &Verdict{Arguments: arguments} }

// Error is a JSON-RPC error.
type Error struct {
	Code    int64
	Message string
	Data    json.RawMessage
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

// Outcome is the upstream's answer: a result or an error.
type Outcome struct {
	Result json.RawMessage
	Error  *Error
}

// Replacement is what an after hook decided. nil keeps the answer.
type Replacement struct {
	// Result, when not nil, replaces the result. Only the result's content (tools:
	// content, structuredContent, isError; prompts: messages, description; resources:
	// contents) and _meta are taken from it; the rest stays the upstream's.
	Result json.RawMessage
	// Error, when not nil, replaces the answer with this error.
	Error *Error
	// Notes go into the audit record.
	Notes map[string]any
}

// Item is one listed tool, prompt, resource or resource template.
type Item struct {
	Kind         string // "tool", "prompt", "resource", "resource_template"
	Name         string // exposed name, URI or URI template
	Upstream     string
	OriginalName string
	Raw          json.RawMessage // the item as clients see it
}

// Change is what a catalogue hook does to one item: hide it, or replace it (its name,
// uri or uriTemplate must stay the same).
type Change struct {
	Index int // into the items the hook was given
	Hide  bool
	Raw   json.RawMessage
}

// Plugin is what a plugin implements. Embed Base for the hooks you do not need, and
// list the ones you implement in Description.Hooks: the proxy calls only those, and only
// for the calls that the plugin block's matchers select.
type Plugin interface {
	Describe() Description
	// Configure receives the plugin's config block as JSON (instance is the block's
	// label). An error refuses the configuration; return Diagnostics to point at
	// attributes.
	Configure(ctx context.Context, instance string, config json.RawMessage) error
	Before(ctx context.Context, call *Call) (*Verdict, error)
	After(ctx context.Context, call *Call, outcome *Outcome) (*Replacement, error)
	Catalogue(ctx context.Context, items []Item) ([]Change, error)
}

// Ranker is implemented by a plugin that ranks the tools of endpoints in search mode
// (and answers their tools/list queries): list HookRank in Description.Hooks. The proxy
// indexes with it when an endpoint's catalogue changes, and asks it for every search;
// while it has not answered Index, and whenever it fails or is slow (the plugin block's
// timeout), the proxy's built-in ranker answers instead. The proxy shows a principal
// only the tools it may see: a ranking may name any document of the index.
type Ranker interface {
	// Index prepares docs for ranking under the id that Rank will name; previous, when
	// not "", is the index this one replaces (of the same endpoint), which may be
	// dropped. It may take long (the proxy waits up to the block's start_timeout, without
	// holding anything up).
	Index(ctx context.Context, id, previous string, docs []Document) error
	// Rank returns at most limit documents of index id for query, best first. An id
	// it does not know (the plugin restarted) is an error: the proxy indexes again.
	Rank(ctx context.Context, id, query string, limit int) ([]Ranked, error)
}

// Document is one tool of an endpoint's catalogue, as a Ranker reads it.
type Document struct {
	Name        string // the exposed name
	Namespace   string // the part of Name that names the upstream ("" for none)
	Title       string
	Description string
	InputSchema json.RawMessage
}

// Ranked is one hit of a ranking.
type Ranked struct {
	Name  string // a document's Name
	Score float64
}

// HookSelector is implemented by a plugin whose configuration decides which of its
// described hooks it needs: after Configure, the proxy calls only the hooks Hooks
// returns (nil or empty: all described hooks). A hook that is not called costs a call
// no crossing to the plugin.
type HookSelector interface {
	Hooks() []Hook
}

// Base implements every hook as a no-op.
type Base struct{}

// Configure accepts any configuration.
func (Base) Configure(context.Context, string, json.RawMessage) error { return nil }

// Before allows the call.
func (Base) Before(context.Context, *Call) (*Verdict, error) { return nil, nil }

// After keeps the answer.
func (Base) After(context.Context, *Call, *Outcome) (*Replacement, error) { return nil, nil }

// Catalogue changes nothing.
func (Base) Catalogue(context.Context, []Item) ([]Change, error) { return nil, nil }

// Diagnostic is a problem with the configuration, at an attribute ("" for the block).
type Diagnostic struct {
	Warning   bool
	Summary   string
	Detail    string
	Attribute string
}

// Diagnostics is an error from Configure that points at attributes.
type Diagnostics []Diagnostic

func (d Diagnostics) Error() string {
	if len(d) == 0 {
		return "no diagnostics"
	}
	s := d[0].Summary
	if d[0].Detail != "" {
		s += ": " + d[0].Detail
	}
	if len(d) > 1 {
		s += fmt.Sprintf(" (and %d more)", len(d)-1)
	}
	return s
}

// ConfigError is the Diagnostics for an error found in a configuration: at the first of
// attrs whose name the error's text names as "name:" (so that validate points at that
// attribute's line), or at the config block when it names none.
func ConfigError(summary string, err error, attrs ...string) Diagnostics {
	msg, at, name := err.Error(), -1, ""
	for _, a := range attrs {
		if i := strings.Index(msg, a+":"); i >= 0 && (at < 0 || i < at) {
			at, name = i, a
		}
	}
	return Diagnostics{{Summary: summary, Detail: msg, Attribute: name}}
}

// Decode decodes a config (as Configure receives it) into v, refusing unknown fields.
func Decode(config json.RawMessage, v any) error {
	if len(config) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytesReader(config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding the configuration: %w", err)
	}
	return nil
}
