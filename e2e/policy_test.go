package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const (
	aliceKey = "alice-key-0123456789abcdef"
	bobKey   = "bob-key-0123456789abcdef"
)

// startPolicyProxy runs the proxy over HTTP with API-key auth, a policy and an audit
// file, in front of the test server and the Go SDK everything-server (legacy, so that
// it asks for sampling).
func startPolicyProxy(t *testing.T, extraAuth string) (url, auditPath string, stderr *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	auditPath = filepath.Join(dir, "audit.jsonl")
	bobHash := sha256.Sum256([]byte(bobKey))
	addr := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf(`
listen "http" {
  address = %q
  path    = "/mcp"
}
auth {
  resource = "http://%s/mcp"
  api_key "alice" {
    token  = %q
    groups = ["dev"]
  }
  api_key "bob" {
    sha256 = %q
    groups = ["contractors"]
  }
  %s
}
policy {
  default = "deny"
  rule "devs-everything" {
    effect = "allow"
    groups = ["dev"]
  }
  rule "contractors-echo" {
    effect    = "allow"
    groups    = ["contractors"]
    tools     = ["t__echo", "t__fail", "ev__test_sampling"]
    condition = try(length(args.note) < 20, true)
  }
  rule "contractors-read" {
    effect    = "allow"
    groups    = ["contractors"]
    resources = ["mis://*"]
  }
  rule "nobody-crashes" {
    effect = "deny"
    tools  = ["t__crash"]
  }
  rate_limit "contractors" {
    rate   = "2/s"
    burst  = 3
    per    = ["principal"]
    groups = ["contractors"]
  }
}
audit {
  file = %q
}
`, addr, addr, aliceKey, hex.EncodeToString(bobHash[:]), extraAuth, auditPath)+
		testUpstream("t", "t", nil, "")+everythingUpstreamEra("ev", "ev", "legacy"))
	cmd := exec.Command(proxyBin, "run", "--config", cfg, "--log-level", "debug")
	stderr = &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(interruptSignal())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Errorf("the proxy did not stop\n%s", stderr)
		}
		if strings.Contains(stderr.String(), aliceKey) || strings.Contains(stderr.String(), bobKey) {
			t.Errorf("an API key appears in the logs")
		}
	})
	waitListening(t, addr, stderr)
	return "http://" + addr + "/mcp", auditPath, stderr
}

func bearer(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

func (c *httpWire) initializeAs(ctx context.Context, key string) {
	c.t.Helper()
	init := c.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"policy-e2e","version":"1"}}}`, bearer(key))
	if init.status != http.StatusOK || init.header.Get("Mcp-Session-Id") == "" {
		c.t.Fatalf("initialize: %d %s", init.status, init.body)
	}
	c.sid = init.header.Get("Mcp-Session-Id")
	c.post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, bearer(key))
}

func listNames(t *testing.T, body []byte, key string) map[string]bool {
	t.Helper()
	var m struct {
		Result map[string][]struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("list: %v %s", err, body)
	}
	out := map[string]bool{}
	for _, it := range m.Result[key] {
		out[it.Name+it.URI] = true
	}
	return out
}

// TestPolicyOverHTTP: two principals with different keys see different catalogues;
// every way around the policy is tried and refused; a burst over the rate limit is
// refused with a retry-after and passes again after it; the audit file holds one
// record per routed call with its decision.
func TestPolicyOverHTTP(t *testing.T) {
	t.Parallel()
	url, auditPath, stderr := startPolicyProxy(t, "")
	ctx := ctxT(t, 120*time.Second)

	anon := &httpWire{t: t, url: url}
	r := anon.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, nil)
	if r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") == "" {
		t.Errorf("no credentials: %d %q", r.status, r.header.Get("WWW-Authenticate"))
	}
	if r := anon.post(ctx, `{}`, bearer("wrong-key-0123456789abcdef")); r.status != http.StatusUnauthorized {
		t.Errorf("wrong key: %d", r.status)
	}

	alice := &httpWire{t: t, url: url}
	alice.initializeAs(ctx, aliceKey)
	bob := &httpWire{t: t, url: url}
	bob.initializeAs(ctx, bobKey)
	calls := 0 // routed calls that must each leave one audit record

	at := alice.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer(aliceKey))
	bt := bob.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer(bobKey))
	aTools, bTools := listNames(t, at.body, "tools"), listNames(t, bt.body, "tools")
	if !aTools["t__slow"] || !aTools["ev__test_simple_text"] || aTools["t__crash"] {
		t.Errorf("alice's tools: %v\n%s", aTools, stderr)
	}
	if len(bTools) != 3 || !bTools["t__echo"] || !bTools["t__fail"] || !bTools["ev__test_sampling"] {
		t.Errorf("bob's tools: %v", bTools)
	}
	if p := listNames(t, bob.post(ctx, `{"jsonrpc":"2.0","id":2,"method":"prompts/list"}`, bearer(bobKey)).body, "prompts"); len(p) != 0 {
		t.Errorf("bob sees prompts %v", p)
	}
	if tpl := listNames(t, bob.post(ctx, `{"jsonrpc":"2.0","id":3,"method":"resources/templates/list"}`, bearer(bobKey)).body, "resourceTemplates"); len(tpl) != 1 {
		t.Errorf("bob's templates: %v", tpl)
	}

	// Allowed, with the condition on the arguments.
	if r := bob.post(ctx, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t__echo","arguments":{"note":"short"}}}`, bearer(bobKey)); !strings.Contains(string(r.body), `"result"`) {
		t.Errorf("bob's echo: %s", r.body)
	}
	calls++
	r = bob.post(ctx, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t__echo","arguments":{"note":"far too long for the rule's condition"}}}`, bearer(bobKey))
	if code := rpcErrorCode(t, r.body); code != -31005 {
		t.Errorf("condition failed: code %d (%s)", code, r.body)
	}
	calls++

	// Every route to a hidden tool, prompt or resource is refused, as if it did not exist.
	for _, tc := range []struct{ name, body string }{
		{"direct", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"t__slow","arguments":{"ms":1}}}`},
		{"other case", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"T__SLOW","arguments":{"ms":1}}}`},
		{"original name", `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1}}}`},
		{"denied for all", `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"t__crash"}}`},
		{"prompt", `{"jsonrpc":"2.0","id":14,"method":"prompts/get","params":{"name":"t__greet","arguments":{"name":"x"}}}`},
		{"completion", `{"jsonrpc":"2.0","id":15,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"t__greet"},"argument":{"name":"name","value":"a"}}}`},
		{"resource", `{"jsonrpc":"2.0","id":16,"method":"resources/read","params":{"uri":"test://static-text"}}`},
	} {
		r := bob.post(ctx, tc.body, bearer(bobKey))
		var m struct {
			Error *struct {
				Code    int64  `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(r.body, &m) != nil || m.Error == nil {
			t.Errorf("%s: not refused: %s", tc.name, r.body)
		}
		if tc.name == "direct" && !strings.Contains(m.Error.Message, "Unknown tool") {
			t.Errorf("a hidden tool is not answered as unknown: %s", r.body)
		}
	}
	// Audited: those that name an existing item (direct, denied for all, prompt,
	// completion, resource). Another case and the original name resolve to nothing, so
	// they are answered before any decision.
	calls += 5
	batch := bob.post(ctx, `[{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"t__slow","arguments":{"ms":1}}},`+
		`{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"t__echo","arguments":{}}}]`, bearer(bobKey))
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(batch.body, &items); err != nil || len(items) != 2 {
		t.Fatalf("batch: %s", batch.body)
	}
	for _, it := range items {
		if string(it["id"]) == "20" && it["error"] == nil {
			t.Errorf("hidden tool inside a batch was called: %s", batch.body)
		}
	}
	calls += 2

	// A session belongs to the principal that opened it.
	hijack := &httpWire{t: t, url: url, sid: alice.sid}
	if r := hijack.post(ctx, `{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"t__slow","arguments":{"ms":1}}}`, bearer(bobKey)); r.status != http.StatusForbidden {
		t.Errorf("bob used alice's session: %d %s", r.status, r.body)
	}

	// The rate limit: bob's bucket (burst 3, 2/s) is drained by now; wait for it to fill,
	// then a burst of 6 at once gets at most 3 through (a slow machine may refill a token
	// while they arrive) and the rest refused with a retry-after.
	time.Sleep(2 * time.Second)
	const burst = 6
	replies := make([]wireReply, burst)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range burst {
		wg.Go(func() {
			<-start
			replies[i] = bob.post(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t__echo","arguments":{}}}`, 40+i), bearer(bobKey))
		})
	}
	close(start)
	wg.Wait()
	calls += burst
	var refused map[string]json.RawMessage
	rateLimited, passed := 0, 0
	for _, r := range replies {
		var m map[string]json.RawMessage
		json.Unmarshal(r.body, &m)
		switch {
		case m["error"] != nil:
			refused = m
			rateLimited++
		case m["result"] != nil:
			passed++
		}
	}
	if refused == nil || passed == 0 {
		t.Fatalf("a burst of %d over the rate limit: %d passed, %d refused", burst, passed, rateLimited)
	}
	var rl struct {
		Code int64 `json:"code"`
		Data struct {
			RetryAfterMs int64 `json:"retryAfterMs"`
		} `json:"data"`
	}
	json.Unmarshal(refused["error"], &rl)
	if rl.Code != -31006 || rl.Data.RetryAfterMs <= 0 {
		t.Errorf("rate-limit refusal: %s", refused["error"])
	}
	time.Sleep(time.Duration(rl.Data.RetryAfterMs)*time.Millisecond + 50*time.Millisecond)
	if r := bob.post(ctx, `{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"t__echo","arguments":{}}}`, bearer(bobKey)); !strings.Contains(string(r.body), `"result"`) {
		t.Errorf("after the retry-after: %s", r.body)
	}
	calls++

	// A modern input-required requestState issued to alice cannot be replayed by bob.
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`
	modern := func(key, params string) wireReply {
		m := &httpWire{t: t, url: url}
		h := bearer(key)
		h["MCP-Protocol-Version"], h["Mcp-Method"], h["Mcp-Name"] = "2026-07-28", "tools/call", "ev__test_sampling"
		return m.post(ctx, `{"jsonrpc":"2.0","id":60,"method":"tools/call","params":{"name":"ev__test_sampling","arguments":{"prompt":"hi"},`+params+meta+`}}`, h)
	}
	first := modern(aliceKey, "")
	calls++ // one call, audited when it completes after the retries below
	var ir struct {
		Result struct {
			ResultType   string                     `json:"resultType"`
			RequestState string                     `json:"requestState"`
			Input        map[string]json.RawMessage `json:"inputRequests"`
		} `json:"result"`
	}
	if err := json.Unmarshal(first.body, &ir); err != nil || ir.Result.RequestState == "" {
		t.Fatalf("no input_required for alice: %s\n%s", first.body, stderr)
	}
	var inputKey string
	for k := range ir.Result.Input {
		inputKey = k
	}
	answer := fmt.Sprintf(`"requestState":%q,"inputResponses":{%q:{"role":"assistant","content":{"type":"text","text":"from the client"},"model":"m"}},`, ir.Result.RequestState, inputKey)
	if r := modern(bobKey, answer); !strings.Contains(string(r.body), "requestState") || !strings.Contains(string(r.body), `"error"`) {
		t.Errorf("bob replayed alice's requestState: %s", r.body)
	}
	if r := modern(aliceKey, answer); !strings.Contains(string(r.body), "from the client") {
		t.Errorf("alice's own retry: %s\n%s", r.body, stderr)
	}

	// The audit trail: one record per routed call, each with its decision.
	time.Sleep(200 * time.Millisecond)
	f, err := os.Open(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line is not JSON: %q", sc.Text())
		}
		recs = append(recs, m)
	}
	decisions := map[string]int{}
	for _, m := range recs {
		decisions[fmt.Sprint(m["decision"])]++
		if m["principal"] == "" || m["outcome"] == "" || m["rule"] == "" {
			t.Errorf("incomplete audit record %v", m)
		}
		if _, ok := m["args"]; ok {
			t.Errorf("arguments recorded in full by default: %v", m)
		}
	}
	if len(recs) != calls {
		t.Errorf("%d audit records for %d routed calls: %v", len(recs), calls, decisions)
	}
	if decisions["deny"] < 6 || decisions["rate_limited"] != rateLimited || decisions["allow"] < 6 {
		t.Errorf("audit decisions %v", decisions)
	}
}

// TestJWTAuth: tokens from the configured issuer are accepted; one signed by another
// key, an expired one and one for another audience are refused with 401; the protected
// resource metadata is served.
func TestJWTAuth(t *testing.T) {
	t.Parallel()
	issuerKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &issuerKey.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}}
	issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(jwks)
	}))
	defer issuer.Close()
	url, _, stderr := startPolicyProxy(t, fmt.Sprintf(`jwt {
    issuer   = %q
    jwks_url = %q
  }`, issuer.URL, issuer.URL+"/jwks"))
	audience := strings.TrimSuffix(url, "")
	sign := func(key *ecdsa.PrivateKey, aud string, exp time.Time) string {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: issuer.URL, Subject: "carol", Audience: jwt.Audience{aud},
			Expiry: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(time.Now().Add(-time.Minute))}).
			Claims(map[string]any{"groups": []string{"dev"}}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ctx := ctxT(t, 60*time.Second)
	initBody := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"jwt","version":"1"}}}`
	c := &httpWire{t: t, url: url}
	good := c.post(ctx, initBody, bearer(sign(issuerKey, audience, time.Now().Add(time.Hour))))
	if good.status != http.StatusOK {
		t.Fatalf("valid token: %d %s\n%s", good.status, good.body, stderr)
	}
	for name, tok := range map[string]string{
		"another key":      sign(otherKey, audience, time.Now().Add(time.Hour)),
		"expired":          sign(issuerKey, audience, time.Now().Add(-time.Hour)),
		"another audience": sign(issuerKey, "https://elsewhere.example/mcp", time.Now().Add(time.Hour)),
	} {
		r := c.post(ctx, initBody, bearer(tok))
		if r.status != http.StatusUnauthorized || !strings.Contains(r.header.Get("WWW-Authenticate"), `error="invalid_token"`) ||
			!strings.Contains(r.header.Get("WWW-Authenticate"), "resource_metadata=") {
			t.Errorf("%s: %d %q", name, r.status, r.header.Get("WWW-Authenticate"))
		}
	}
	meta, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Body.Close()
	var doc map[string]any
	json.NewDecoder(meta.Body).Decode(&doc)
	if meta.StatusCode != 200 || doc["resource"] != url {
		t.Errorf("metadata: %d %v", meta.StatusCode, doc)
	}
}

// TestToolsAs shows the catalogue one principal sees, with `mcp-proxy tools --as`.
func TestToolsAs(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `
auth {
  api_key "bob" {
    token  = "bob-key-0123456789abcdef"
    groups = ["contractors"]
  }
}
policy {
  rule "contractors" {
    effect = "allow"
    groups = ["contractors"]
    tools  = ["t__echo", "t__fail"]
  }
  rule "ops" {
    effect = "allow"
    groups = ["ops"]
    tools  = ["t__*"]
  }
}
`+testUpstream("t", "t", nil, ""))
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--as", "bob"}, []string{"t__echo", "t__fail"}},
		{[]string{"--as", "carol", "--groups", "ops"}, nil}, // all t__ tools
		{[]string{"--as", "dave"}, []string{}},
	} {
		out, err := exec.Command(proxyBin, append([]string{"tools", "--config", cfg, "--json"}, tc.args...)...).Output()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		var rows []struct{ Name string }
		if err := json.Unmarshal(out, &rows); err != nil {
			t.Fatalf("%v: %v %s", tc.args, err, out)
		}
		var names []string
		for _, r := range rows {
			names = append(names, r.Name)
		}
		switch {
		case tc.want == nil:
			if len(names) < 9 {
				t.Errorf("%v: %v", tc.args, names)
			}
		case fmt.Sprint(names) != fmt.Sprint(tc.want) && !(len(names) == 0 && len(tc.want) == 0):
			t.Errorf("%v: %v, want %v", tc.args, names, tc.want)
		}
	}
}
