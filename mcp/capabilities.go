package mcp

import (
	"encoding/json"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
)

// clientFeatures are the client capabilities the proxy can relay to upstreams: an
// upstream may use them because the proxy forwards its requests to the client.
var clientFeatures = []string{"roots", "sampling", "elicitation"}

// NarrowClientCapabilities keeps, from a client's declared capabilities, only what the
// proxy relays (roots, sampling, elicitation), each exactly as the client declared it, so
// upstreams are never promised more than the client can do.
func NarrowClientCapabilities(caps json.RawMessage) json.RawMessage {
	out := []byte("{}")
	for _, k := range clientFeatures {
		if v, ok, err := jsonx.Get(caps, k); err == nil && ok && string(v) != "null" {
			if o, err := jsonx.Set(out, k, v); err == nil {
				out = o
			}
		}
	}
	return out
}

// ClientCapabilities is what the proxy checks before relaying a server-to-client request.
type ClientCapabilities struct {
	Roots       *struct{} `json:"roots"`
	Sampling    *struct{} `json:"sampling"`
	Elicitation *struct {
		Form *struct{} `json:"form"`
		URL  *struct{} `json:"url"`
	} `json:"elicitation"`
}

// Allows reports whether a client with these capabilities accepts a server-to-client
// request of method with params; the reason says what is missing.
func (c *ClientCapabilities) Allows(method string, params json.RawMessage) (ok bool, reason string) {
	switch method {
	case MethodSamplingCreateMessage:
		return c.Sampling != nil, "the client did not declare the sampling capability"
	case MethodRootsList:
		return c.Roots != nil, "the client did not declare the roots capability"
	case MethodElicitationCreate:
		if c.Elicitation == nil {
			return false, "the client did not declare the elicitation capability"
		}
		mode, _, _ := jsonx.GetString(params, "mode")
		if mode == "url" {
			return c.Elicitation.URL != nil, "the client did not declare URL-mode elicitation"
		}
		// An empty elicitation object means form mode (2025-06-18 compatibility).
		return c.Elicitation.Form != nil || c.Elicitation.URL == nil, "the client did not declare form-mode elicitation"
	}
	return false, "not a server-to-client request"
}

// serverFeatures are the server capabilities the proxy can carry for its upstreams.
var serverFeatures = []string{"tools", "prompts", "resources", "logging", "completions", "tasks"}

// MergeServerCapabilities merges upstreams' ServerCapabilities into the proxy's own: a
// feature is offered when any upstream offers it, nested objects are merged the same way
// and true wins over false. Features the proxy cannot route (experimental ones, unknown
// keys) are left out. The proxy tracks its upstreams' lists and restarts itself, so it
// always offers listChanged for tools, prompts and resources.
func MergeServerCapabilities(all []json.RawMessage) json.RawMessage {
	merged := map[string]any{}
	for _, raw := range all {
		var m map[string]any
		if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
			continue
		}
		for _, k := range serverFeatures {
			if v, ok := m[k]; ok && v != nil {
				merged[k] = mergeValue(merged[k], v)
			}
		}
	}
	for _, k := range []string{"tools", "prompts", "resources"} {
		if obj, ok := merged[k].(map[string]any); ok {
			obj["listChanged"] = true
		}
	}
	b, err := json.Marshal(merged)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

func mergeValue(a, b any) any {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	switch {
	case a == nil:
		if bok { // copy, so later merges do not write into an upstream's decoded value
			c := make(map[string]any, len(bm))
			for k, v := range bm {
				c[k] = mergeValue(nil, v)
			}
			return c
		}
		return b
	case aok && bok:
		for k, v := range bm {
			am[k] = mergeValue(am[k], v)
		}
		return am
	}
	if ab, ok := a.(bool); ok {
		if bb, ok := b.(bool); ok {
			return ab || bb
		}
	}
	return a
}
