package proxy

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/admin"
	"github.com/mcp-proxy/mcp-proxy/config"
)

// TestResolvePrincipal: what an operator writes for a principal becomes an identity:
// the identity as it is, "jwt:NAME" with the jwt block's issuer, a bare name when one way
// of authenticating of the configuration establishes it; an ambiguous or unknown bare
// name is an input error saying what to write. A secrets file's key must be an
// identity.
func TestResolvePrincipal(t *testing.T) {
	ids := identitiesOf(&config.Config{
		Auth: &config.Auth{APIKeys: []config.APIKey{{Name: "alice"}, {Name: "ops"}},
			JWT: &config.JWT{Issuer: "https://idp.example.com"}},
		Proxy: config.Proxy{Principal: "me"},
	})
	for in, want := range map[string]string{
		"api_key:alice":                   "api_key:alice",
		"jwt:alice":                       "jwt:https://idp.example.com#alice",
		"jwt:https://other.example#alice": "jwt:https://other.example#alice",
		"bob":                             "jwt:https://idp.example.com#bob", // no API key bob: a token's subject
		"stdio:x":                         "stdio:x",
	} {
		if got, err := ids.resolve(in); err != nil || got != want {
			t.Errorf("resolve(%q) = %q %v, want %q", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"alice": `principal "alice" is ambiguous: say which, api_key:alice or jwt:https://idp.example.com#alice`,
		"me":    `principal "me" is ambiguous: say which, jwt:https://idp.example.com#me or stdio:me`,
	} {
		var ie *admin.InputError
		if _, err := ids.resolve(in); !errors.As(err, &ie) || ie.Msg != msg {
			t.Errorf("resolve(%q): %v, want %q", in, err, msg)
		}
	}
	keysOnly := identitiesOf(&config.Config{Auth: &config.Auth{APIKeys: []config.APIKey{{Name: "alice"}}}})
	if got, err := keysOnly.resolve("alice"); err != nil || got != "api_key:alice" {
		t.Errorf("API keys only: alice = %q %v", got, err)
	}
	if _, err := keysOnly.resolve("bob"); err == nil || !strings.Contains(err.Error(), "no API key, jwt block or stdio principal") {
		t.Errorf("API keys only: bob: %v", err)
	}
	if _, err := ids.secretsKey("alice"); err == nil || !strings.Contains(err.Error(), `principal "alice" is not an identity`) {
		t.Errorf("a bare secrets key: %v", err)
	}
	if got, err := ids.secretsKey("jwt:alice"); err != nil || got != "jwt:https://idp.example.com#alice" {
		t.Errorf("secrets key jwt:alice = %q %v", got, err)
	}
}
