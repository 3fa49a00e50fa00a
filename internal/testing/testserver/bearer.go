package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	mathbig "math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// With -auth-jwks, -http serves as an OAuth protected resource: every request must carry
// a bearer JWT (ES256) signed by a key of that JWKS, unexpired, whose aud is this
// server's own URL (http://ADDR/mcp) and, with -auth-issuer, whose iss is that issuer;
// anything else is answered 401 with a Bearer challenge naming the protected resource
// metadata (RFC 9728), which -auth-as makes point at an authorization server. With
// -auth-anonymous-catalogue, a request without a token may still initialize and list
// (the proxy's own session, which acts as nobody). The subjects of the tokens a session
// carried are what whoami reports: more than one means a session carried two people.

// resourceAuth checks the bearer tokens of -http requests.
type resourceAuth struct {
	jwksURL, issuer, as string
	anonymousCatalogue  bool
	self                string // this server's resource URL, set once listening

	mu   sync.Mutex // guards keys and when
	keys map[string]*ecdsa.PublicKey
	when time.Time
}

// anonymousMethods are what -auth-anonymous-catalogue lets through without a token.
var anonymousMethods = []string{"initialize", "notifications/initialized", "tools/list", "prompts/list", "resources/list",
	"resources/templates/list", "ping", "server/discover", "notifications/cancelled"}

// check returns the subject of r's token ("" for an anonymous catalogue request), or
// writes the 401 and returns ok false. method is the JSON-RPC method ("" for GET or
// DELETE).
func (a *resourceAuth) check(w http.ResponseWriter, r *http.Request, method string) (sub string, ok bool) {
	authz := r.Header.Get("Authorization")
	if authz == "" {
		if a.anonymousCatalogue && (method == "" || slices.Contains(anonymousMethods, method)) {
			return "", true
		}
		a.challenge(w, "")
		return "", false
	}
	tok, found := strings.CutPrefix(authz, "Bearer ")
	if !found {
		a.challenge(w, "invalid_request")
		return "", false
	}
	sub, err := a.verify(tok)
	if err != nil {
		a.challenge(w, "invalid_token")
		return "", false
	}
	return sub, true
}

func (a *resourceAuth) challenge(w http.ResponseWriter, code string) {
	v := fmt.Sprintf(`Bearer resource_metadata="%s"`, a.metadataURL())
	if code != "" {
		v += fmt.Sprintf(`, error="%s"`, code)
	}
	w.Header().Set("WWW-Authenticate", v)
	httpRPCError(w, http.StatusUnauthorized, nil, codeInvalidRequest, "Unauthorized")
}

func (a *resourceAuth) metadataURL() string {
	origin := strings.TrimSuffix(a.self, mcpPath)
	return origin + "/.well-known/oauth-protected-resource" + mcpPath
}

// metadata serves the protected resource metadata.
func (a *resourceAuth) metadata(w http.ResponseWriter) {
	m := map[string]any{"resource": a.self, "scopes_supported": []string{"mcp"}, "bearer_methods_supported": []string{"header"}}
	if a.as != "" {
		m["authorization_servers"] = []string{a.as}
	}
	b, _ := json.Marshal(m)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// verify checks tok and returns its subject.
func (a *resourceAuth) verify(tok string) (string, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", errors.New("not a JWT")
	}
	dec := base64.RawURLEncoding
	hb, err1 := dec.DecodeString(parts[0])
	cb, err2 := dec.DecodeString(parts[1])
	sig, err3 := dec.DecodeString(parts[2])
	if errors.Join(err1, err2, err3) != nil || len(sig) != 64 {
		return "", errors.New("malformed")
	}
	var h struct{ Alg, Kid string }
	var c struct {
		Iss string          `json:"iss"`
		Sub string          `json:"sub"`
		Aud json.RawMessage `json:"aud"`
		Exp int64           `json:"exp"`
	}
	if json.Unmarshal(hb, &h) != nil || json.Unmarshal(cb, &c) != nil || h.Alg != "ES256" {
		return "", errors.New("malformed")
	}
	key, err := a.key(h.Kid)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(key, sum[:], new(mathbig.Int).SetBytes(sig[:32]), new(mathbig.Int).SetBytes(sig[32:])) {
		return "", errors.New("bad signature")
	}
	var auds []string
	if json.Unmarshal(c.Aud, &auds) != nil {
		var one string
		_ = json.Unmarshal(c.Aud, &one)
		auds = []string{one}
	}
	switch {
	case c.Exp < time.Now().Unix():
		return "", errors.New("expired")
	case a.issuer != "" && c.Iss != a.issuer:
		return "", errors.New("another issuer")
	case !slices.Contains(auds, a.self):
		return "", errors.New("for another audience")
	case c.Sub == "":
		return "", errors.New("no subject")
	}
	return c.Sub, nil
}

// key returns the JWKS key kid, fetching the set when it is not known (at most once a
// second).
func (a *resourceAuth) key(kid string) (*ecdsa.PublicKey, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if k := a.keys[kid]; k != nil {
		return k, nil
	}
	if time.Since(a.when) < time.Second {
		return nil, errors.New("unknown key")
	}
	a.when = time.Now()
	resp, err := http.Get(a.jwksURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		return nil, err
	}
	a.keys = map[string]*ecdsa.PublicKey{}
	for _, k := range set.Keys {
		if k["kty"] != "EC" || k["crv"] != "P-256" {
			continue
		}
		x, err1 := base64.RawURLEncoding.DecodeString(k["x"])
		y, err2 := base64.RawURLEncoding.DecodeString(k["y"])
		if err1 != nil || err2 != nil {
			continue
		}
		a.keys[k["kid"]] = &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(mathbig.Int).SetBytes(x), Y: new(mathbig.Int).SetBytes(y)}
	}
	if k := a.keys[kid]; k != nil {
		return k, nil
	}
	return nil, errors.New("unknown key")
}

// addSubject records that the session's requests carried a token of sub.
func (s *httpSession) addSubject(sub string) {
	if sub == "" {
		return
	}
	s.mu.Lock()
	if !slices.Contains(s.subjects, sub) {
		s.subjects = append(s.subjects, sub)
	}
	s.mu.Unlock()
}

// subjectList returns the subjects the session's requests carried.
func (s *httpSession) subjectList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.subjects)
}
