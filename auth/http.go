package auth

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

// WellKnownPath is the root RFC 9728 protected resource metadata path.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// JSON-RPC error codes of authentication failures. Like the proxy's other local codes
// (mcp.CodeUpstream*, -31000…) they lie outside the reserved -32768…-32000 range, so
// that they cannot be mistaken for an upstream's answer, and carry
// {"origin":"mcp-proxy","status":<HTTP status>} as data.
const (
	CodeUnauthorized = -31010 // 401: no credentials, or invalid ones
	CodeForbidden    = -31011 // 403: valid credentials lacking a required scope
)

// Middleware authenticates every request. It serves the protected resource metadata
// itself (see IsMetadataPath), unauthenticated. Otherwise it calls next with the
// principal in the request context (principal.From) and with the Authorization and
// X-API-Key headers removed, so the client's credentials cannot travel further (the MCP
// spec forbids token passthrough); or it writes the failure: the status, the
// WWW-Authenticate challenge and a JSON-RPC error body, and logs one warning.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	meta := a.MetadataHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.serve(w, r, meta, next)
	})
}

// Switch is an authenticator that can be replaced while it serves (a configuration
// reload changed the keys or the JWT settings): each request is authenticated by the
// one installed when it arrives. Its zero value authenticates nothing: Store one first.
type Switch struct {
	cur atomic.Pointer[Authenticator]
}

// Store installs a and returns the one it replaces (nil the first time), for the
// caller to Close.
func (s *Switch) Store(a *Authenticator) (old *Authenticator) { return s.cur.Swap(a) }

// Load returns the installed authenticator.
func (s *Switch) Load() *Authenticator { return s.cur.Load() }

// Middleware is Authenticator.Middleware with the authenticator installed at each
// request.
func (s *Switch) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.cur.Load().serve(w, r, nil, next)
	})
}

// serve is Middleware's work for one request; meta nil makes the metadata handler when
// it is asked for.
func (a *Authenticator) serve(w http.ResponseWriter, r *http.Request, meta, next http.Handler) {
	if a.IsMetadataPath(r.URL.Path) {
		if meta == nil {
			meta = a.MetadataHandler()
		}
		meta.ServeHTTP(w, r)
		return
	}
	p, f := a.Authenticate(r)
	if f != nil || p == nil {
		if f == nil { // cannot happen; never let it mean "allowed"
			f = a.invalid("invalid_token", "authentication failed", "authenticator returned no principal")
		}
		a.log.Warn().
			Int("status", f.Status).
			Str("reason", f.Reason).
			Str("remote", r.RemoteAddr).
			Str("method", r.Method).
			Str("path", r.URL.Path).
			Msg("auth: request rejected")
		WriteFailure(w, f)
		return
	}
	ctx := principal.With(r.Context(), p)
	if creds := credentialHeaders(r.Header); creds != nil {
		ctx = context.WithValue(ctx, credentialsKey{}, creds)
	}
	r2 := r.WithContext(ctx)
	r2.Header = r.Header.Clone()
	r2.Header.Del("Authorization")
	r2.Header.Del("X-API-Key")
	next.ServeHTTP(w, r2)
}

type credentialsKey struct{}

// credentialHeaders are the request's credential headers, as the client sent them.
func credentialHeaders(h http.Header) http.Header {
	var out http.Header
	for _, k := range []string{"Authorization", "X-API-Key"} {
		if v := h.Values(k); len(v) > 0 {
			if out == nil {
				out = http.Header{}
			}
			out[k] = slices.Clone(v)
		}
	}
	return out
}

// Credentials returns the credential headers (Authorization, X-API-Key) of a request
// Middleware authenticated, which it removed from the request; nil for none. They are
// for one use only: forwarding the request to another replica of this proxy, which
// authenticates it again (cluster). Never send them to an upstream.
func Credentials(ctx context.Context) http.Header {
	h, _ := ctx.Value(credentialsKey{}).(http.Header)
	return h
}

// WriteFailure writes f as the response: its status, its WWW-Authenticate challenge and
// a JSON-RPC error with id null (the request is not read before it is authenticated):
//
//	{"jsonrpc":"2.0","id":null,"error":{"code":-31010,"message":"Unauthorized: token expired","data":{"origin":"mcp-proxy","status":401}}}
func WriteFailure(w http.ResponseWriter, f *Failure) {
	code, prefix := CodeUnauthorized, "Unauthorized"
	if f.Status == http.StatusForbidden {
		code, prefix = CodeForbidden, "Forbidden"
	}
	type errData struct {
		Origin string `json:"origin"`
		Status int    `json:"status"`
	}
	type rpcError struct {
		Code    int     `json:"code"`
		Message string  `json:"message"`
		Data    errData `json:"data"`
	}
	body, _ := json.Marshal(struct {
		JSONRPC string   `json:"jsonrpc"`
		ID      any      `json:"id"`
		Error   rpcError `json:"error"`
	}{"2.0", nil, rpcError{code, prefix + ": " + f.Message, errData{"mcp-proxy", f.Status}}})
	h := w.Header()
	if f.WWWAuthenticate != "" {
		h.Set("WWW-Authenticate", f.WWWAuthenticate)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(f.Status)
	w.Write(append(body, '\n'))
}

// IsMetadataPath reports whether path is one where the protected resource metadata is
// served: the root WellKnownPath or its form suffixed with the resource's path
// (/.well-known/oauth-protected-resource/mcp for https://host/mcp). Always false
// without OAuth.
func (a *Authenticator) IsMetadataPath(path string) bool {
	if a.jwt == nil {
		return false
	}
	path = strings.TrimSuffix(path, "/")
	return path == WellKnownPath || path == a.metaPath
}

// MetadataURL is the absolute URL of the protected resource metadata, as advertised in
// challenges; "" without OAuth.
func (a *Authenticator) MetadataURL() string {
	if a.jwt == nil {
		return ""
	}
	return a.metaURL
}

// MetadataHandler serves the RFC 9728 protected resource metadata document at the paths
// IsMetadataPath accepts (404 elsewhere, and everywhere without OAuth):
//
//	{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://auth.example.com"],
//	 "bearer_methods_supported":["header"],"scopes_supported":["mcp:tools"]}
func (a *Authenticator) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.IsMetadataPath(r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=3600")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			w.Write(a.metaDoc)
		}
	})
}
