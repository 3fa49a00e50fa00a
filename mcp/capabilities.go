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
