package main

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// An HTTP upstream gets an OAuth client by default; its own Authorization header or
// oauth { disabled = true } opt it out.
func TestNewOAuth(t *testing.T) {
	cfg := &config.Config{}
	for _, tc := range []struct {
		name string
		uc   config.Upstream
		want bool
	}{
		{"default", config.Upstream{Name: "a", URL: "http://127.0.0.1:1/mcp"}, true},
		{"static credentials", config.Upstream{Name: "b", URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"authorization": "Bearer x"}}, false},
		{"disabled", config.Upstream{Name: "c", URL: "http://127.0.0.1:1/mcp", OAuth: &config.OAuth{Disabled: true}}, false},
		{"configured", config.Upstream{Name: "d", URL: "http://127.0.0.1:1/mcp", OAuth: &config.OAuth{ClientID: "id"}}, true},
	} {
		if got := newOAuth(cfg, tc.uc, zerolog.Nop()) != nil; got != tc.want {
			t.Errorf("%s: OAuth client %v, want %v", tc.name, got, tc.want)
		}
	}
}
