package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/authserver"
)

// browser is a person's browser: cookies, redirects followed.
type browser struct {
	t  *testing.T
	hc *http.Client
}

// newBrowser is a browser logged in at the authorization server as user.
func newBrowser(t *testing.T, as *authserver.Server, user string) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &browser{t: t, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
	if user != "" {
		if code, body := b.get(as.URL + "/login?user=" + user); code != http.StatusOK {
			t.Fatalf("login as %s: %d %s", user, code, body)
		}
	}
	return b
}

// get follows link to its end and returns the last status and page.
func (b *browser) get(link string) (int, string) {
	b.t.Helper()
	resp, err := b.hc.Get(link)
	if err != nil {
		b.t.Fatalf("GET %s: %v", link, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// step requests link without following a redirect, and returns the status and where
// it redirects.
func (b *browser) step(link string) (int, string) {
	b.t.Helper()
	c := *b.hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(link)
	if err != nil {
		b.t.Fatalf("GET %s: %v", link, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

var connectLink = regexp.MustCompile(`https?://[^\s"]+/oauth/connect/[A-Za-z0-9_-]+`)

// TestCredentialsOAuth: an upstream in credentials mode "oauth" is called, for each
// principal, with that principal's own grant at the upstream's authorization server
// (found by discovery, the proxy registered dynamically). A principal without one gets
// the link to authorize the way its client can take it: in a tool error (a client
// without URL elicitation), as -32042 (the TypeScript SDK declaring it, 2025-11-25), as
// an input_required result (a 2026-07-28 client). The test follows the link like a
// browser; the callback binds the grant to the principal, and the next call succeeds.
// A link opens once, in one browser; a callback from another browser is refused. An
// expired token is refreshed; `mcp-proxy credentials list` shows the grants without a
// token and `revoke` ends one; a refresh token the server revoked sends the principal
// to authorize again. No token reaches a log.
func TestCredentialsOAuth(t *testing.T) {
	t.Parallel()
	as := startAuthServer(t, authserver.Options{AccessJWTTTL: 4 * time.Second})
	up, upLog := startTestserverHTTP(t, "-whoami", "-auth-jwks", as.URL+"/jwks", "-auth-issuer", as.URL, "-auth-as", as.URL,
		"-auth-anonymous-catalogue")
	addr, adminAddr := freeAddr(t), freeAddr(t)
	resource := "http://" + addr + "/mcp"
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := writeConfig(t, fmt.Sprintf(`audit {
  file = %q
}
listen "http" {
  address = %q
}
admin {
  address = %q
  groups  = ["ops"]
}
auth {
  resource = %q
  jwt {
    issuer   = %q
    jwks_url = %q
  }
}
upstream "jira" {
  url = %q
  credentials {
    mode   = "oauth"
    scopes = ["mcp"]
  }
}
`, auditPath, addr, adminAddr, resource, as.URL, as.URL+"/jwks", up))
	stderr, _ := startProxy(t, cfg, false, addr, adminAddr)
	url := "http://" + addr + "/mcp"
	front := func(sub string) string { return as.IssueFront(sub, resource, 10*time.Minute) }
	ctx := ctxT(t, 2*time.Minute)

	// linkOf calls the tool as a client without URL elicitation: a tool error carrying
	// the link.
	linkOf := func(cs *mcp.ClientSession) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "jira__whoami", Arguments: map[string]any{}})
		if err != nil || !res.IsError {
			t.Fatalf("a call before authorizing: %v %q\n%s", err, textOf(res), stderr)
		}
		link := connectLink.FindString(textOf(res))
		if link == "" || !strings.Contains(textOf(res), `"jira"`) {
			t.Fatalf("no link in %q", textOf(res))
		}
		return link
	}
	authorize := func(link, user string) {
		t.Helper()
		if code, body := newBrowser(t, as, user).get(link); code != http.StatusOK || !strings.Contains(body, "Authorized") {
			t.Fatalf("%s following %s: %d %s\n%s", user, link, code, body, stderr)
		}
	}
	subOf := func(cs *mcp.ClientSession) string {
		t.Helper()
		w, err := whoamiOf(t, cs, "jira__whoami")
		if err != nil {
			t.Fatalf("whoami: %v\n%s", err, stderr)
		}
		return w["sub"]
	}

	alice := connectAs(t, url, front("alice"), nil, stderr)
	link := linkOf(alice)
	if again := linkOf(alice); again != link {
		t.Errorf("a second call before authorizing got another link")
	}
	// A forged callback (no cookie of the browser that opened the link) is refused.
	id := link[strings.LastIndexByte(link, '/')+1:]
	if code, _ := newBrowser(t, as, "eve").get(fmt.Sprintf("http://%s/oauth/callback?state=%s.x&code=forged", addr, id)); code != http.StatusBadRequest {
		t.Errorf("a forged callback: %d", code)
	}
	authorize(link, "alice")
	if s := subOf(alice); s != "alice" {
		t.Errorf("alice reached the upstream as %q", s)
	}
	if code, _ := newBrowser(t, as, "eve").get(link); code != http.StatusGone && code != http.StatusConflict {
		t.Errorf("a used link opened again: %d", code)
	}

	// A link opened in one browser cannot be completed in another.
	carol := connectAs(t, url, front("carol"), nil, stderr)
	link = linkOf(carol)
	first := newBrowser(t, as, "carol")
	code, toAS := first.step(link)
	if code != http.StatusFound || !strings.HasPrefix(toAS, as.URL+"/authorize") {
		t.Fatalf("opening carol's link: %d %s", code, toAS)
	}
	thief := newBrowser(t, as, "eve")
	if code, _ := thief.get(link); code != http.StatusConflict {
		t.Errorf("carol's opened link in another browser: %d", code)
	}
	if code, _ := thief.get(toAS); code != http.StatusBadRequest { // eve's code, carol's state: no cookie
		t.Errorf("carol's flow completed in eve's browser: %d", code)
	}
	if code, body := first.get(toAS); code != http.StatusOK {
		t.Fatalf("carol completing her flow: %d %s", code, body)
	}
	if s := subOf(carol); s != "carol" {
		t.Errorf("carol reached the upstream as %q", s)
	}

	bob := connectAs(t, url, front("bob"), nil, stderr)
	authorize(linkOf(bob), "bob")
	if s := subOf(bob); s != "bob" {
		t.Errorf("bob reached the upstream as %q", s)
	}
	if n := as.Count("register", ""); n != 1 {
		t.Errorf("the proxy registered %d times, want once", n)
	}

	// The TypeScript SDK, declaring URL elicitation: -32042; once the link's
	// authorization completes, notifications/elicitation/complete with its
	// elicitationId, and the call it retries then succeeds.
	ts := exec.Command("node", filepath.Join("testdata", "ts-url-elicitation.mjs"), url, front("erin"), "jira__whoami")
	var tsErr strings.Builder
	ts.Stderr = &tsErr
	tsOut, _ := ts.StdoutPipe()
	if err := ts.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(tsOut)
	var el struct {
		Elicitation struct{ Mode, ElicitationID, URL, Message string }
	}
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &el) != nil || el.Elicitation.Mode != "url" || el.Elicitation.ElicitationID == "" {
		ts.Process.Kill()
		t.Fatalf("TS client: %s\n%s", lines.Text(), tsErr.String())
	}
	authorize(el.Elicitation.URL, "erin")
	var done struct{ Complete string }
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &done) != nil || done.Complete != el.Elicitation.ElicitationID {
		ts.Process.Kill()
		t.Fatalf("TS client after authorizing, waiting for notifications/elicitation/complete: %s\n%s\n%s", lines.Text(), tsErr.String(), stderr)
	}
	var res struct {
		Result  string
		IsError bool
	}
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &res) != nil || !strings.Contains(res.Result, "sub=erin") {
		t.Errorf("TS client after authorizing: %s\n%s", lines.Text(), tsErr.String())
	}
	if err := ts.Wait(); err != nil {
		t.Errorf("TS client: %v\n%s", err, tsErr.String())
	}

	// A 2026-07-28 client declaring URL elicitation: input_required, then its retry.
	modern := func(id int, extra string) map[string]json.RawMessage {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"jira__whoami","arguments":{}%s,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}}}`, id, extra)
		r := (&httpWire{t: t, url: url}).post(ctx, body, map[string]string{"Authorization": "Bearer " + front("frank"),
			"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "jira__whoami"})
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sseData(r.body), &m); err != nil {
			t.Fatalf("modern answer %d: %s", r.status, r.body)
		}
		return m
	}
	var ir struct {
		ResultType    string
		InputRequests map[string]struct {
			Method string
			Params struct{ Mode, URL string }
		}
	}
	if m := modern(1, ""); json.Unmarshal(m["result"], &ir) != nil || ir.ResultType != "input_required" {
		t.Fatalf("modern call before authorizing: %s", m["result"])
	}
	req := ir.InputRequests["mcp-proxy/authorize"]
	if req.Method != "elicitation/create" || req.Params.Mode != "url" {
		t.Fatalf("modern input request: %+v", ir.InputRequests)
	}
	authorize(req.Params.URL, "frank")
	m := modern(2, `,"inputResponses":{"mcp-proxy/authorize":{"action":"accept"}}`)
	if !strings.Contains(string(m["result"]), "sub=frank") {
		t.Errorf("modern retry: %s %s", m["result"], m["error"])
	}

	// Expired at the upstream (the JWT lives 4 s): the grant is refreshed on the 401.
	time.Sleep(5200 * time.Millisecond) // past the JWT's exp, whole seconds after issue
	if s := subOf(alice); s != "alice" {
		t.Errorf("alice after her token expired: %q", s)
	}
	if n := as.Count(authserver.GrantRefresh, "alice"); n != 1 {
		t.Errorf("alice's grant was refreshed %d times, want 1", n)
	}

	// credentials list and revoke, through the admin listener.
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(proxyBin, append([]string{"credentials"}, append(args, "--admin", "http://"+adminAddr)...)...)
		cmd.Env = append(os.Environ(), "MCP_PROXY_API_KEY="+as.IssueFrontGroups("ops", resource, 10*time.Minute, "ops"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("mcp-proxy credentials %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	list := cli("list", "--json")
	for _, p := range []string{"alice", "bob", "carol", "erin", "frank"} {
		if !strings.Contains(list, `"principal": "jwt:`+as.URL+"#"+p+`"`) { // the identity: the issuer's subject
			t.Errorf("credentials list lacks %s:\n%s", p, list)
		}
	}
	if out := cli("revoke", "--principal", "alice", "--upstream", "jira"); !strings.Contains(out, "revoked principal jwt:"+as.URL+"#alice's grants for jira") {
		t.Errorf("revoke: %s", out)
	}
	if as.Count("revoke", "") != 1 {
		t.Errorf("the authorization server was asked to revoke %d times", as.Count("revoke", ""))
	}
	alice2 := connectAs(t, url, front("alice"), nil, stderr)
	linkOf(alice2) // authorize again
	table := cli("list", "--upstream", "jira")
	if strings.Contains(table, "#alice") || !strings.Contains(table, "#bob") {
		t.Errorf("credentials list after revoking alice:\n%s", table)
	}

	// The server revokes bob's refresh token: once his token expires, his call fails
	// (naming the upstream), and the next one sends him to authorize again.
	as.RevokeRefresh("bob")
	time.Sleep(5200 * time.Millisecond) // past the JWT's exp, whole seconds after issue
	_, err := whoamiOf(t, bob, "jira__whoami")
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -31012 || !strings.Contains(werr.Message, `"jira"`) {
		t.Errorf("bob's call after his grant ended: %v", err)
	}
	linkOf(bob)

	// What an operator sees: the status says how many principals have a credential, the
	// metrics count what the credentials did, the audit says which mode and upstream
	// subject served each call; none of it, nor any log, holds a token.
	get := func(path, accept string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+adminAddr+path, nil)
		req.Header.Set("Authorization", "Bearer "+as.IssueFrontGroups("ops", resource, 10*time.Minute, "ops"))
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	statusJSON, statusHTML, metricsText := get("/status", "application/json"), get("/status", "text/html"), get("/metrics", "text/plain")
	var st struct {
		Upstreams []struct {
			Name           string
			CredentialMode string `json:"credential_mode"`
			Principals     *int   `json:"principals_with_credential"`
			PerPrincipal   bool   `json:"per_principal"`
		}
	}
	json.Unmarshal([]byte(statusJSON), &st)
	if len(st.Upstreams) != 1 || st.Upstreams[0].CredentialMode != "oauth" || !st.Upstreams[0].PerPrincipal ||
		st.Upstreams[0].Principals == nil || *st.Upstreams[0].Principals != 3 { // carol, erin, frank (alice revoked, bob ended)
		t.Errorf("status: %s", statusJSON)
	}
	if !strings.Contains(statusHTML, "credentials oauth") {
		t.Errorf("the status page does not show the credentials")
	}
	for _, want := range []string{`mcp_proxy_credential_events_total{event="authorized",upstream="jira"} 5`,
		`mcp_proxy_credential_events_total{event="refresh",upstream="jira"} 1`} {
		if !strings.Contains(metricsText, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(metricsText, "credential_events"))
		}
	}
	audit, _ := os.ReadFile(auditPath)
	if !strings.Contains(string(audit), `"credential":"oauth","upstream_subject":"carol"`) {
		t.Errorf("no audit record says carol's call was served by her oauth grant:\n%s", audit)
	}
	noTokens(t, as, stderr, upLog, stringer(list), stringer(table), stringer(statusJSON), stringer(statusHTML),
		stringer(metricsText), stringer(audit))
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

type stringer string

func (s stringer) String() string { return string(s) }

// sseData is the JSON of an answer: the body itself, or the data of its last event.
func sseData(b []byte) []byte {
	s := strings.TrimSpace(string(b))
	if !strings.HasPrefix(s, "event:") && !strings.HasPrefix(s, "data:") && !strings.HasPrefix(s, "id:") {
		return b
	}
	var last string
	for _, l := range strings.Split(s, "\n") {
		if d, ok := strings.CutPrefix(l, "data:"); ok {
			last = strings.TrimSpace(d)
		}
	}
	return []byte(last)
}
