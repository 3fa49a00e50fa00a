package credential

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

func writeSecrets(t *testing.T, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secrets.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFileSourceRefusesOpenFile: a secrets file its group or others may read is not
// read; nor one that is not JSON, or whose values could end a header. No error shows a
// secret.
func TestFileSourceRefusesOpenFile(t *testing.T) {
	for _, tc := range []struct {
		body string
		mode os.FileMode
		want string
	}{
		{`{"alice":{"k":"v1-secret"}}`, 0o644, "may be read or written by others"},
		{`{"alice":{"k":"v1-secret"}}`, 0o620, "may be read or written by others"},
		{`{"alice":{"k":"v1-secret"`, 0o600, "not valid JSON"},
		{`{"alice":{"k":1}}`, 0o600, "not a JSON object of principals"},
		{`{"alice":{"k":"v1-secret\nX-Evil: 1"}}`, 0o600, "line break"},
	} {
		_, err := NewFileSource(writeSecrets(t, tc.body, tc.mode), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "v1-secret") {
			t.Errorf("%s (%o): %v", tc.body, tc.mode, err)
		}
	}
}

// TestSecretsByIdentity: an API key and a token of the same name are two principals,
// with secrets of their own (the file's keys are identities, as its key function reads
// them); a key the function refuses, or two keys naming one identity, make the file
// unusable.
func TestSecretsByIdentity(t *testing.T) {
	key := func(k string) (string, error) {
		if k == "jwt:alice" {
			return "jwt:https://idp.example#alice", nil // the issuer filled in
		}
		if _, _, _, ok := principal.ParseIdentity(k); !ok {
			return "", fmt.Errorf("principal %q is not an identity", k)
		}
		return k, nil
	}
	src, err := NewFileSource(writeSecrets(t, `{"api_key:alice":{"tok":"key-alice"},"jwt:alice":{"tok":"jwt-alice"}}`, 0o600), key)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProvider(Config{Upstream: "gh", Mode: ModeSecret, Secrets: []string{"tok"}, Source: src},
		Deps{Store: NewMemoryStore(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	byKey := (&principal.Principal{Name: "alice", Via: principal.ViaAPIKey}).Identify()
	byJWT := (&principal.Principal{Name: "alice", Via: principal.ViaJWT, Issuer: "https://idp.example"}).Identify()
	for who, want := range map[*principal.Principal]string{byKey: "key-alice", byJWT: "jwt-alice"} {
		if a, err := p.Admit(ctx, who, Call{Method: mcp.MethodToolsCall}); err != nil || a.Subject != who.ID() {
			t.Fatalf("%s: %+v %v", who.ID(), a, err)
		}
		lookup, err := p.SecretsOf(ctx, who.ID())
		if v, _ := lookup("tok"); err != nil || v != want {
			t.Errorf("%s's tok = %q %v, want %q", who.ID(), v, err, want)
		}
	}
	other := (&principal.Principal{Name: "alice", Via: principal.ViaJWT, Issuer: "https://other.example"}).Identify()
	if _, err := p.Admit(ctx, other, Call{Method: mcp.MethodToolsCall}); err == nil {
		t.Error("alice of another issuer got the secrets of the configured one's")
	}
	for body, want := range map[string]string{
		`{"alice":{"tok":"x"}}`: `principal "alice" is not an identity`,
		`{"jwt:alice":{"tok":"x"},"jwt:https://idp.example#alice":{"tok":"y"}}`: `names principal "jwt:https://idp.example#alice" twice`,
	} {
		if _, err := NewFileSource(writeSecrets(t, body, 0o600), key); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// TestSecretProvider: a principal with every secret is admitted and its secrets are
// there for its session; one without is refused with -31012 naming the upstream and
// the secret; nobody (no principal) is refused; a changed file is read again.
func TestSecretProvider(t *testing.T) {
	path := writeSecrets(t, `{"alice":{"tok":"a-1"},"bob":{"other":"b-1"}}`, 0o600)
	src, err := NewFileSource(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	p, err := NewProvider(Config{Upstream: "gh", Mode: ModeSecret, Secrets: []string{"tok"}, Source: src},
		Deps{Store: NewMemoryStore(), Log: zerolog.Nop(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice := &principal.Principal{Name: "alice"}
	if a, err := p.Admit(ctx, alice, Call{Method: mcp.MethodToolsCall}); err != nil || a.Subject != "alice" {
		t.Fatalf("alice: %+v %v", a, err)
	}
	if lookup, ok := p.Secrets("alice"); !ok {
		t.Fatal("no secrets kept for alice")
	} else if v, ok := lookup("tok"); !ok || v != "a-1" {
		t.Errorf("alice's tok = %q %v", v, ok)
	}
	_, err = p.Admit(ctx, &principal.Principal{Name: "bob"}, Call{Method: mcp.MethodToolsCall})
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Err == nil || ref.Err.Code != mcp.CodeCredentialUnavailable ||
		!strings.Contains(ref.Err.Message, `upstream "gh"`) || !strings.Contains(ref.Err.Message, `no secret "tok"`) {
		t.Errorf("bob: %v", err)
	}
	if _, ok := p.Secrets("bob"); ok {
		t.Error("bob has secrets kept")
	}
	if _, err := p.Admit(ctx, nil, Call{}); err == nil {
		t.Error("nobody admitted")
	}
	// The file changes: bob gets his secret, once the file is looked at again.
	if err := os.WriteFile(path, []byte(`{"alice":{"tok":"a-2"},"bob":{"tok":"b-2"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(2 * time.Second)
	os.Chtimes(path, future, future)
	src.mu.Lock()
	src.looked = time.Time{}
	src.mu.Unlock()
	if _, err := p.Admit(ctx, &principal.Principal{Name: "bob"}, Call{Method: mcp.MethodToolsCall}); err != nil {
		t.Errorf("bob after the change: %v", err)
	}
}

// TestAuthorizationRequiredShapes: the link reaches each kind of client the way it can
// take it.
func TestAuthorizationRequiredShapes(t *testing.T) {
	const link = "https://proxy.example/oauth/connect/abc"
	urlCaps := json.RawMessage(`{"elicitation":{"url":{}}}`)
	formCaps := json.RawMessage(`{"elicitation":{}}`)
	for _, tc := range []struct {
		name   string
		call   Call
		code   int64  // an error with this code, or
		result string // a result containing this
	}{
		{"legacy with url elicitation", Call{Method: mcp.MethodToolsCall, Capabilities: urlCaps}, mcp.CodeURLElicitationRequired, ""},
		{"legacy with url elicitation, a read", Call{Method: mcp.MethodResourcesRead, Capabilities: urlCaps}, mcp.CodeURLElicitationRequired, ""},
		{"modern with url elicitation", Call{Method: mcp.MethodToolsCall, Modern: true, Capabilities: urlCaps}, 0, `"resultType":"input_required"`},
		{"modern with url elicitation, completion", Call{Method: mcp.MethodCompletionComplete, Modern: true, Capabilities: urlCaps}, mcp.CodeCredentialUnavailable, ""},
		{"form only", Call{Method: mcp.MethodToolsCall, Capabilities: formCaps}, 0, `"isError":true`},
		{"nothing, a prompt", Call{Method: mcp.MethodPromptsGet}, mcp.CodeCredentialUnavailable, ""},
	} {
		ref := authorizationRequired("jira", link, "id-1", tc.call)
		switch {
		case tc.code != 0:
			if ref.Err == nil || ref.Err.Code != tc.code || !strings.Contains(ref.Err.Message, link) {
				t.Errorf("%s: %+v", tc.name, ref.Err)
			}
			if tc.code == mcp.CodeURLElicitationRequired && !strings.Contains(string(ref.Err.Data), `"elicitationId":"id-1"`) {
				t.Errorf("%s: data %s", tc.name, ref.Err.Data)
			}
		default:
			if ref.Err != nil || !strings.Contains(string(ref.Result), tc.result) || !strings.Contains(string(ref.Result), link) {
				t.Errorf("%s: %s %v", tc.name, ref.Result, ref.Err)
			}
		}
	}
}

func TestStripOwnInput(t *testing.T) {
	for in, want := range map[string]string{
		`{"name":"x"}`: `{"name":"x"}`,
		`{"name":"x","inputResponses":{"mcp-proxy/authorize":{"action":"accept"}}}`:             `{"name":"x"}`,
		`{"name":"x","inputResponses":{"mcp-proxy/authorize":{"action":"accept"},"k":{"a":1}}}`: `{"name":"x","inputResponses":{"k":{"a":1}}}`,
		`{"name":"x","inputResponses":{"k":{"a":1}}}`:                                           `{"name":"x","inputResponses":{"k":{"a":1}}}`,
	} {
		if got := string(stripOwnInput(json.RawMessage(in))); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
}

func TestMemoryStoreLease(t *testing.T) {
	s := NewMemoryStore()
	ctx := context.Background()
	release, ok, err := s.Lease(ctx, "u", "p", time.Minute)
	if !ok || err != nil {
		t.Fatal("first lease refused")
	}
	if _, ok, _ := s.Lease(ctx, "u", "p", time.Minute); ok {
		t.Error("second lease granted while the first is held")
	}
	if _, ok, _ := s.Lease(ctx, "u", "q", time.Minute); !ok {
		t.Error("another principal's lease refused")
	}
	release()
	if _, ok, _ := s.Lease(ctx, "u", "p", time.Minute); !ok {
		t.Error("lease refused after release")
	}
	g := &Grant{Upstream: "u", Principal: "p", Mode: ModeOAuth, AccessToken: principal.NewSecret("at-secret"), RefreshToken: principal.NewSecret("rt")}
	if err := s.Put(ctx, g); err != nil {
		t.Fatal(err)
	}
	l, _ := s.List(ctx, "", "")
	b, _ := json.Marshal(l)
	if len(l) != 1 || !l[0].Refresh || strings.Contains(string(b), "at-secret") {
		t.Errorf("list %s", b)
	}
}

// TestPrune: handles unused for an hour without a usable token are dropped when many new
// ones are made; one with a live token stays.
func TestPrune(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	p, err := NewProvider(Config{Upstream: "gh", Mode: ModeSecret, Source: nil}, Deps{Store: NewMemoryStore(), Log: zerolog.Nop(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	live := p.handle("live")
	live.tok.Store(&token{expiry: now.Add(3 * time.Hour)})
	p.handle("stale")
	now = now.Add(2 * time.Hour)
	for i := 0; i < pruneEvery; i++ {
		p.handle(fmt.Sprintf("p%d", i))
	}
	if _, ok := p.handles.Load("stale"); ok {
		t.Error("a stale handle was kept")
	}
	if _, ok := p.handles.Load("live"); !ok {
		t.Error("a handle with a live token was dropped")
	}
}

// notes records the notifications a client session gets.
type notes struct{ got []string }

func (n *notes) Notify(method string, params json.RawMessage) {
	n.got = append(n.got, method+" "+string(params))
}

// TestFlowWaiters: the client sessions given a link as a url-mode elicitation are told,
// each once, when its flow completes, with the elicitationId they were given; nobody is
// told of another flow, and waiters are forgotten once their flow expires.
func TestFlowWaiters(t *testing.T) {
	fl := NewFlows(NewMemoryStore(), zerolog.Nop())
	now := time.Now()
	fl.now = func() time.Time { return now }
	a, b, c := &notes{}, &notes{}, &notes{}
	fl.wait("flow-1", a)
	fl.wait("flow-1", a) // a retried before authorizing: the same link
	fl.wait("flow-1", b)
	fl.wait("flow-2", c)
	fl.Complete(FlowKey("flow-1"))
	fl.Complete(FlowKey("flow-1")) // completed already: nobody is told twice
	want := `notifications/elicitation/complete {"elicitationId":"flow-1"}`
	if len(a.got) != 1 || a.got[0] != want || len(b.got) != 1 || b.got[0] != want || len(c.got) != 0 {
		t.Errorf("a %q, b %q, c %q", a.got, b.got, c.got)
	}
	now = now.Add(flowTTL + time.Second)
	fl.wait("flow-3", a) // prunes flow-2's, expired
	fl.mu.Lock()
	_, kept := fl.waiting[FlowKey("flow-2")]
	fl.mu.Unlock()
	if kept {
		t.Error("the waiters of an expired flow are kept")
	}
	if FlowKey("flow-1") == "flow-1" || len(FlowKey("flow-1")) != 64 {
		t.Error("FlowKey does not hash the id")
	}
}
