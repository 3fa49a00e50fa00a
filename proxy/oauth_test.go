package proxy

import (
	"strings"
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
		o, err := newOAuth(cfg, tc.uc, zerolog.Nop())
		if err != nil || (o != nil) != tc.want {
			t.Errorf("%s: OAuth client %v (%v), want %v", tc.name, o != nil, err, tc.want)
		}
	}
}

// An upstream whose OAuth client cannot be set up is not started without it: nothing
// starts, and the error names the upstream (fail closed).
func TestOAuthSetupFailsClosed(t *testing.T) {
	cfg := &config.Config{Upstreams: []config.Upstream{
		{Name: "ok", URL: "http://127.0.0.1:1/mcp"},
		{Name: "broken", URL: "ftp://127.0.0.1/mcp"},
	}}
	r, err := (&engine{build: build{log: zerolog.Nop()}, gates: map[string]*gatedObserver{}}).newRouter(cfg)
	if err == nil || r != nil {
		t.Fatalf("newRouter = %v, %v; want an error and no router", r, err)
	}
	if !strings.Contains(err.Error(), `upstream "broken": configuring OAuth`) {
		t.Errorf("error %q does not name the upstream", err)
	}
}
