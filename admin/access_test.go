package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

// fakeCreds records what the admin listener asks of the credentials.
type fakeCreds struct {
	calls []string
}

func (f *fakeCreds) List(_ context.Context, up, p string) ([]Grant, error) {
	f.calls = append(f.calls, "list "+up+" "+p)
	return []Grant{}, nil
}

func (f *fakeCreds) Revoke(_ context.Context, up, p string) (*Revoked, error) {
	f.calls = append(f.calls, "revoke "+up+" "+p)
	return &Revoked{Principal: p, Upstreams: []string{}}, nil
}

func (f *fakeCreds) Summary(context.Context) map[string]CredentialSummary { return nil }

// Resolve qualifies a bare name as an API key's, except "amb", which is ambiguous.
func (f *fakeCreds) Resolve(name string) (string, error) {
	switch {
	case name == "amb":
		return "", &InputError{Msg: "principal \"amb\" is ambiguous"}
	case strings.Contains(name, ":"):
		return name, nil
	}
	return "api_key:" + name, nil
}

func (f *fakeCreds) SetSecret(_ context.Context, up, p, name, _ string) error {
	f.calls = append(f.calls, "set "+up+" "+p+" "+name)
	return nil
}

// bearerPrincipals is an authenticator that knows tokens "alice", "bob" (no groups) and
// "carol" (group ops), and refuses anything else.
func bearerPrincipals(next http.Handler) http.Handler {
	known := map[string]*principal.Principal{
		"alice": {Name: "alice", Via: "api_key"},
		"bob":   {Name: "bob", Via: "api_key"},
		"carol": {Name: "carol", Via: "api_key", Groups: []string{"dev", "ops"}},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := known[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if p == nil {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(principal.With(r.Context(), p)))
	})
}

// TestAccess: who may do what on the admin listener. Without an authenticator, the
// operator does everything; with one and admin groups, members do everything and
// others only their own credentials; with one and no groups, every principal operates
// the proxy (as before groups) and still touches only its own credentials.
func TestAccess(t *testing.T) {
	type ask struct {
		who, method, path string
		code              int    // wanted status
		call              string // wanted call of the credentials ("" none)
		body              string // in the answer
	}
	for _, tt := range []struct {
		name   string
		auth   func(http.Handler) http.Handler
		groups []string
		asks   []ask
	}{
		{"no auth: the operator", nil, nil, []ask{
			{"", "GET", "/status", 200, "", ""},
			{"", "POST", "/reload", 501, "", ""},
			{"", "GET", "/credentials", 200, "list  ", ""},
			{"", "GET", "/credentials?principal=bob", 200, "list  api_key:bob", ""},
			{"", "POST", "/credentials/revoke?principal=bob", 200, "revoke  api_key:bob", ""},
			{"", "POST", "/credentials/revoke", 400, "", "principal is required"},
			{"", "PUT", "/credentials/secret?upstream=u&principal=bob&name=k", 200, "set u api_key:bob k", ""},
		}},
		{"auth without groups", bearerPrincipals, nil, []ask{
			{"alice", "GET", "/status", 200, "", ""},
			{"alice", "GET", "/metrics", 200, "", ""},
			{"alice", "POST", "/reload", 501, "", ""},
			{"alice", "GET", "/credentials", 200, "list  api_key:alice", ""},
			{"alice", "GET", "/credentials?principal=alice&upstream=u", 200, "list u api_key:alice", ""},
			{"alice", "GET", "/credentials?principal=api_key:alice", 200, "list  api_key:alice", ""},
			{"alice", "GET", "/credentials?principal=jwt:alice", 403, "", `not "jwt:alice"'s`}, // a token's alice is another principal
			{"alice", "GET", "/credentials?principal=amb", 400, "", "ambiguous"},
			{"alice", "GET", "/credentials?principal=bob", 403, "", `principal "api_key:alice" may list only its own credentials, not "api_key:bob"'s; set admin groups`},
			{"alice", "POST", "/credentials/revoke?principal=bob", 403, "", "may revoke only its own"},
			{"alice", "POST", "/credentials/revoke", 200, "revoke  api_key:alice", ""},
			{"alice", "PUT", "/credentials/secret?upstream=u&principal=bob&name=k", 403, "", "may set only its own"},
			{"alice", "PUT", "/credentials/secret?upstream=u&name=k", 200, "set u api_key:alice k", ""},
			{"carol", "POST", "/credentials/revoke?principal=bob", 403, "", "may revoke only its own"}, // no groups: no administrator
			{"", "GET", "/credentials", 401, "", ""},
		}},
		{"auth with admin groups", bearerPrincipals, []string{"sre", "ops"}, []ask{
			{"alice", "GET", "/status", 403, "", `principal "api_key:alice" is not in the admin groups (sre, ops)`},
			{"alice", "GET", "/metrics", 403, "", ""},
			{"alice", "POST", "/reload", 403, "", ""},
			{"alice", "POST", "/lock", 403, "", ""},
			{"alice", "GET", "/", 403, "", ""},
			{"alice", "GET", "/credentials", 200, "list  api_key:alice", ""},
			{"alice", "GET", "/credentials?principal=bob", 403, "", "members of the admin groups (sre, ops) may list anyone's"},
			{"alice", "POST", "/credentials/revoke?principal=bob&upstream=u", 403, "", ""},
			{"alice", "PUT", "/credentials/secret?upstream=u&principal=carol&name=k", 403, "", ""},
			{"alice", "PUT", "/credentials/secret?upstream=u&principal=alice&name=k", 200, "set u api_key:alice k", ""},
			{"carol", "GET", "/status", 200, "", ""},
			{"carol", "POST", "/reload", 501, "", ""},
			{"carol", "GET", "/credentials", 200, "list  ", ""},
			{"carol", "GET", "/credentials?principal=bob", 200, "list  api_key:bob", ""},
			{"carol", "POST", "/credentials/revoke?principal=bob&upstream=u", 200, "revoke u api_key:bob", ""},
			{"carol", "POST", "/credentials/revoke", 200, "revoke  api_key:carol", ""},
			{"carol", "PUT", "/credentials/secret?upstream=u&principal=alice&name=k", 200, "set u api_key:alice k", ""},
			{"", "GET", "/healthz", 200, "", ""},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _ := testServer(t, tt.auth)
			creds := &fakeCreds{}
			s.opts.Credentials, s.opts.Groups = creds, tt.groups
			h := s.routes()
			for _, a := range tt.asks {
				creds.calls = nil
				req := httptest.NewRequest(a.method, a.path, strings.NewReader("v"))
				if a.who != "" {
					req.Header.Set("Authorization", "Bearer "+a.who)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				call := strings.Join(creds.calls, "; ")
				if rec.Code != a.code || call != a.call || !strings.Contains(rec.Body.String(), a.body) {
					t.Errorf("%s %s %s: %d %q, call %q; want %d %q, call %q", a.who, a.method, a.path, rec.Code,
						strings.TrimSpace(rec.Body.String()), call, a.code, a.body, a.call)
				}
			}
		})
	}
}
