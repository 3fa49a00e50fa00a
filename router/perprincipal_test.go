package router

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// perPrincipalRouter is a router with one per-principal upstream "gh" (tool "t") whose
// sessions are fakes, made per principal and recorded in made; admit is its Admit.
func perPrincipalRouter(t testing.TB, admit func(context.Context, *Request, json.RawMessage) (Admission, error)) (*Router, map[string]*fakeUpstream) {
	made := map[string]*fakeUpstream{}
	r := New(Options{}, zerolog.Nop())
	r.AddPerClient(newFake("gh", "t"), "gh", PerClient{ByPrincipal: true, MaxSessions: 2, Admit: admit,
		NewFor: func(p *principal.Principal, _ json.RawMessage, _ upstream.Events) Upstream {
			f := newFake("gh", "t")
			f.resp = []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"as ` + p.ID() + `"}]}}`)
			made[p.ID()] = f
			return f
		}})
	r.rebuild()
	t.Cleanup(func() { r.Close() })
	return r, made
}

// TestPerPrincipalIdentity: an API key and a token of the same name are two
// principals: two sessions, and closing one's leaves the other's.
func TestPerPrincipalIdentity(t *testing.T) {
	r, made := perPrincipalRouter(t, nil)
	byKey := (&principal.Principal{Name: "alice", Via: principal.ViaAPIKey}).Identify()
	byJWT := (&principal.Principal{Name: "alice", Via: principal.ViaJWT, Issuer: "https://idp.example"}).Identify()
	for _, p := range []*principal.Principal{byKey, byJWT, byKey} {
		res, err := r.Call(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"gh__t"}`), Principal: p})
		if err != nil || !strings.Contains(string(res), "as "+p.ID()+`"`) {
			t.Errorf("%s: %s %v", p.ID(), res, err)
		}
	}
	if len(made) != 2 || made["api_key:alice"] == nil || made["jwt:https://idp.example#alice"] == nil {
		t.Fatalf("sessions made: %v", made)
	}
	if n := r.ClosePrincipal("gh", "jwt:https://idp.example#alice"); n != 1 || r.PrincipalSessions()["gh"] != 1 {
		t.Errorf("closing the token alice's session: %d, %d left", n, r.PrincipalSessions()["gh"])
	}
}

// TestPerPrincipalCapabilities: with a legacy upstream, a principal's clients of two
// classes of capabilities get two sessions, each started with its class's
// capabilities (the one with sampling can be asked for it); clients of one class share
// one; with a modern upstream (capabilities travel with each request) one session
// serves every class. Closing the principal's sessions closes them all.
func TestPerPrincipalCapabilities(t *testing.T) {
	for _, modern := range []bool{false, true} {
		started := map[string][]string{} // principal → the capabilities of each session started
		r := New(Options{}, zerolog.Nop())
		cat := newFake("gh", "t")
		cat.info.Modern = modern
		r.AddPerClient(cat, "gh", PerClient{ByPrincipal: true, MaxSessions: 8,
			NewFor: func(p *principal.Principal, caps json.RawMessage, _ upstream.Events) Upstream {
				started[p.ID()] = append(started[p.ID()], string(caps))
				f := newFake("gh", "t")
				f.resp = []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
				return f
			}})
		r.rebuild()
		alice := (&principal.Principal{Name: "alice", Via: principal.ViaAPIKey}).Identify()
		for _, caps := range []string{`{}`, `{"sampling":{}}`, `{ }`, `{"sampling":{}}`} {
			if _, err := r.Call(context.Background(), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"gh__t"}`),
				Principal: alice, Meta: &ClientMeta{Capabilities: json.RawMessage(caps)}}); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{`{}`, `{"sampling":{}}`}
		if modern {
			want = want[:1]
		}
		if got := started["api_key:alice"]; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("modern %v: sessions started with %q, want %q", modern, got, want)
		}
		if n := r.ClosePrincipal("gh", "api_key:alice"); n != len(want) || r.PrincipalSessions()["gh"] != 0 {
			t.Errorf("modern %v: closed %d sessions of alice's, want %d", modern, n, len(want))
		}
		r.Close()
	}
}

// TestPerPrincipalRouting: each principal's calls go to its own session, whatever its
// client session; Admit's refusal is the call's answer (a ResultError as a result), and
// its Mode reaches the credential note; a request for nobody is refused when there is an
// admission check; the cap holds.
func TestPerPrincipalRouting(t *testing.T) {
	r, made := perPrincipalRouter(t, func(_ context.Context, req *Request, _ json.RawMessage) (Admission, error) {
		switch req.Principal.Name {
		case "carol":
			return Admission{Mode: "oauth"}, &ResultError{Result: json.RawMessage(`{"content":[],"isError":true}`), Err: errors.New("authorize")}
		case "dave":
			return Admission{Mode: "exchange"}, mcp.ProxyError(mcp.CodeCredentialFailed, "gh", "refused")
		}
		return Admission{Mode: "exchange", Subject: req.Principal.Name + "@idp"}, nil
	})
	ctx := context.Background()
	callAs := func(name string) (string, error, *CredentialNote) {
		var note CredentialNote
		res, err := r.Call(WithCredentialNote(ctx, &note), &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"gh__t"}`),
			Principal: &principal.Principal{Name: name}})
		return string(res), err, &note
	}
	for _, name := range []string{"alice", "bob", "alice"} {
		res, err, note := callAs(name)
		if err != nil || !strings.Contains(res, "as "+name) || note.Mode != "exchange" || note.Subject != name+"@idp" {
			t.Errorf("%s: %s %v %+v", name, res, err, note)
		}
	}
	if len(made) != 2 {
		t.Errorf("%d sessions for two principals", len(made))
	}
	if res, err, note := callAs("carol"); err != nil || !strings.Contains(res, `"isError":true`) || note.Mode != "oauth" {
		t.Errorf("carol: %s %v %+v", res, err, note)
	}
	var je *jsonrpc.Error
	if _, err, _ := callAs("dave"); !errors.As(err, &je) || je.Code != mcp.CodeCredentialFailed {
		t.Errorf("dave: %v", err)
	}
	if made["carol"] != nil || made["dave"] != nil {
		t.Error("a session was started for a principal who was not admitted")
	}
	if _, err := r.Call(ctx, &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"gh__t"}`)}); !errors.As(err, &je) || je.Code != mcp.CodeCredentialUnavailable {
		t.Errorf("a call for nobody: %v", err)
	}
	if s := r.PrincipalSessions()["gh"]; s != 2 {
		t.Errorf("%d principal sessions", s)
	}
	if n := r.ClosePrincipal("gh", "alice"); n != 1 || r.PrincipalSessions()["gh"] != 1 {
		t.Errorf("closing alice's session: %d", n)
	}
}

// TestPerPrincipalTask: a task created in a principal's own session is that principal's:
// another principal asking for it gets "Unknown task", without a policy too.
func TestPerPrincipalTask(t *testing.T) {
	r, made := perPrincipalRouter(t, nil)
	ctx := context.Background()
	alice, bob := &principal.Principal{Name: "alice"}, &principal.Principal{Name: "bob"}
	// alice's session is made on her first call; it answers with a task.
	if _, err := r.Call(ctx, &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"gh__t"}`), Principal: alice}); err != nil {
		t.Fatal(err)
	}
	made["alice"].resp = []byte(taskResult)
	if res, err := r.Call(ctx, &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"gh__t","task":{}}`), Principal: alice}); err != nil || !strings.Contains(string(res), `"taskId":"t1"`) {
		t.Fatalf("alice's task: %s %v", res, err)
	}
	made["alice"].resp = []byte(`{"jsonrpc":"2.0","id":1,"result":{"taskId":"t1","status":"completed"}}`)
	if res, err := r.Call(ctx, &Request{Method: mcp.MethodTasksGet, Params: json.RawMessage(`{"taskId":"t1"}`), Principal: alice}); err != nil || !strings.Contains(string(res), "completed") {
		t.Errorf("alice's tasks/get: %s %v", res, err)
	}
	var je *jsonrpc.Error
	if _, err := r.Call(ctx, &Request{Method: mcp.MethodTasksGet, Params: json.RawMessage(`{"taskId":"t1"}`), Principal: bob}); !errors.As(err, &je) || !strings.Contains(je.Message, "Unknown task") {
		t.Errorf("bob reading alice's task: %v", err)
	}
}
