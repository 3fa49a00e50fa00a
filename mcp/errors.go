package mcp

import (
	"encoding/json"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// ProxyError builds a proxy-local error: a code outside the range peers use and
// {"origin":"mcp-proxy","upstream":NAME} in data, so a client can never take it for an
// upstream's answer.
func ProxyError(code int64, upstream, msg string) *jsonrpc.Error {
	data, _ := json.Marshal(struct {
		Origin   string `json:"origin"`
		Upstream string `json:"upstream,omitempty"`
	}{"mcp-proxy", upstream})
	return &jsonrpc.Error{Code: code, Message: msg, Data: data}
}
