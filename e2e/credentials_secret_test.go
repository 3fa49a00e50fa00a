package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// withHeaders is an http.RoundTripper that adds fixed headers (a client's credentials).
type withHeaders struct {
	h    map[string]string
	base http.RoundTripper
}

func (w withHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range w.h {
		req.Header.Set(k, v)
	}
	base := w.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}

// connectAs connects the Go SDK client to the proxy at url over Streamable HTTP with
// the bearer credential tok, in the legacy era (a session of its own).
func connectAs(t *testing.T, url, tok string, opts *mcp.ClientOptions, logs fmt.Stringer) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-creds", Version: "1"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: withHeaders{h: map[string]string{"Authorization": "Bearer " + tok}}}}
	cs, err := client.Connect(ctxT(t, 60*time.Second), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// whoamiOf calls the whoami tool and returns its fields (pid, env, sub).
func whoamiOf(t *testing.T, cs *mcp.ClientSession, tool string) (map[string]string, error) {
	t.Helper()
	res, err := cs.CallTool(ctxT(t, 60*time.Second), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return nil, fmt.Errorf("tool error: %s", textOf(res))
	}
	out := map[string]string{}
	for _, f := range strings.Fields(textOf(res)) {
		k, v, _ := strings.Cut(f, "=")
		out[k] = v
	}
	return out, nil
}

// TestCredentialsSecret: an upstream in credentials mode "secret" runs one child
// process per principal, each with that principal's own secret in its environment;
// a principal's client sessions share its process; a principal without the secret is
// refused with a proxy error naming the upstream (never served with another's); the
// cap evicts the least recently used idle session, the idle timeout closes the rest;
// no process ever serves two principals; no secret reaches the log. A principal sets its
// own secret in the token store; another principal cannot set, revoke or list it (403),
// an administrator (admin groups) can.
func TestCredentialsSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.json")
	if err := os.WriteFile(secrets, []byte(`{
  "api_key:alice": {"who": "alice-secret-0001"},
  "api_key:bob":   {"who": "bob-secret-0002"},
  "api_key:dave":  {"who": "dave-secret-0004"},
  "api_key:svc":   {"who": "svc-secret-0000"}
}`), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{"alice": "alice-key-0123456789", "bob": "bob-key-0123456789", "carol": "carol-key-0123456789",
		"dave": "dave-key-0123456789", "ops": "ops-key-0123456789"}
	var auth strings.Builder
	for _, n := range []string{"alice", "bob", "carol", "dave"} {
		fmt.Fprintf(&auth, "  api_key %q {\n    token = %q\n  }\n", n, keys[n])
	}
	fmt.Fprintf(&auth, "  api_key \"ops\" {\n    token  = %q\n    groups = [\"ops\"]\n  }\n", keys["ops"])
	adminAddr := freeAddr(t)
	url, stderr, cmd := startHTTPProxyHCL(t, fmt.Sprintf(`auth {
%s}
admin {
  address = %q
  groups  = ["ops"]
}
upstream "s" {
  command = [%s, "-whoami"]
  env     = { WHOAMI = secret("who") }
  credentials { mode = "secret" }   # the secrets are in the token store
}
upstream "t" {
  command      = [%s, "-whoami", "-require-env", "WHOAMI"]   # will not start without its secret
  env          = { WHOAMI = secret("who"), PLAIN = "shared" }
  max_sessions = 2
  idle_timeout = "3s"
  credentials {
    mode                = "secret"
    secrets_file        = %q
    catalogue_principal = "api_key:svc"   # the catalogue is listed with svc's secret
  }
}
`, auth.String(), adminAddr, q(testserverBin), q(testserverBin), secrets))
	waitListening(t, adminAddr, stderr)
	procs := func() int { return len(childPIDs(cmd.Process.Pid)) - 1 } // less upstream "s"'s catalogue process

	owner := map[string]string{} // pid → the principal it served
	check := func(name string, cs *mcp.ClientSession) string {
		t.Helper()
		w, err := whoamiOf(t, cs, "t__whoami")
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, stderr)
		}
		if want := name + "-secret-"; !strings.HasPrefix(w["env"], want) {
			t.Errorf("%s's process has WHOAMI=%q", name, w["env"])
		}
		if o, seen := owner[w["pid"]]; seen && o != name {
			t.Errorf("process %s served %s and %s", w["pid"], o, name)
		}
		owner[w["pid"]] = name
		return w["pid"]
	}

	alice, bob := connectAs(t, url, keys["alice"], nil, stderr), connectAs(t, url, keys["bob"], nil, stderr)
	pa, pb := check("alice", alice), check("bob", bob)
	if pa == pb {
		t.Fatalf("alice and bob share process %s", pa)
	}
	// A second session of alice's shares her process.
	alice2 := connectAs(t, url, keys["alice"], nil, stderr)
	if p := check("alice", alice2); p != pa {
		t.Errorf("alice's second session got process %s, her first %s", p, pa)
	}
	if n := procs(); n != 3 {
		t.Errorf("%d upstream processes, want 3 (the catalogue's, alice's, bob's)", n)
	}

	// Carol has no secret: refused, naming the upstream, and no process started for her.
	carol := connectAs(t, url, keys["carol"], nil, stderr)
	_, err := whoamiOf(t, carol, "t__whoami")
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -31012 || !strings.Contains(werr.Message, `upstream "t"`) || !strings.Contains(werr.Message, `no secret "who"`) {
		t.Errorf("carol's call: %v", err)
	}
	if n := procs(); n != 3 {
		t.Errorf("%d upstream processes after carol's refused call, want 3", n)
	}

	// Dave, a third principal, with the cap at two and both sessions idle: the least
	// recently used (alice's: bob called after her, she did not) makes room.
	check("bob", bob)
	dave := connectAs(t, url, keys["dave"], nil, stderr)
	check("dave", dave)
	waitFor(t, 10*time.Second, "eviction to leave 3 processes", func() bool { return procs() == 3 }, stderr)
	if !strings.Contains(stderr.String(), "evicted to make room") {
		t.Errorf("no eviction logged")
	}
	// Alice comes back: a new process of her own, never bob's or dave's.
	if p := check("alice", alice); p == pa {
		t.Errorf("alice's evicted process %s answered again", pa)
	}

	// Idle: every principal's session closes; the catalogue's process stays.
	waitFor(t, 20*time.Second, "idle sessions to close", func() bool { return procs() == 1 }, stderr)

	// Secrets in the token store, set through the admin listener by their owner or an
	// administrator (a member of the admin groups), never by another principal.
	cli := func(key, stdin string, args ...string) (string, error) {
		cmd := exec.Command(proxyBin, append([]string{"credentials"}, append(args, "--admin", "http://"+adminAddr)...)...)
		cmd.Env = append(os.Environ(), "MCP_PROXY_API_KEY="+key)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := cli(keys["alice"], "alice-stored-0005\n", "set-secret", "--upstream", "s", "--name", "who"); err != nil || !strings.Contains(out, "stored secret who of principal api_key:alice for s") {
		t.Fatalf("alice setting her own secret: %v %s", err, out)
	}
	if w, err := whoamiOf(t, alice, "s__whoami"); err != nil || w["env"] != "alice-stored-0005" {
		t.Errorf("alice's secret from the store: %v %v", w, err)
	}
	if _, err := whoamiOf(t, bob, "s__whoami"); !errors.As(err, &werr) || werr.Code != -31012 {
		t.Errorf("bob without a stored secret: %v", err)
	}
	// Bob puts his own token into alice's secret, revokes her, lists her grants: refused.
	for _, args := range [][]string{{"set-secret", "--upstream", "s", "--name", "who", "--principal", "alice"},
		{"revoke", "--principal", "alice"}, {"list", "--principal", "alice"}} {
		out, err := cli(keys["bob"], "bob-attack-0006\n", args...)
		if err == nil || !strings.Contains(out, "403 Forbidden") || !strings.Contains(out, `principal "api_key:bob" may `+map[string]string{"set-secret": "set", "revoke": "revoke", "list": "list"}[args[0]]+` only its own credentials, not "api_key:alice"'s`) {
			t.Errorf("bob: credentials %v: %v %s", args, err, out)
		}
	}
	if out, err := cli(keys["bob"], "", "list", "--json"); err != nil || strings.Contains(out, "alice") {
		t.Errorf("bob's list shows alice's grant: %v %s", err, out)
	}
	if out, err := exec.Command(proxyBin, "status", "--admin", "http://"+adminAddr).CombinedOutput(); err == nil || !strings.Contains(string(out), "401") {
		t.Errorf("status without a key: %v %s", err, out)
	}
	st := exec.Command(proxyBin, "status", "--admin", "http://"+adminAddr)
	st.Env = append(os.Environ(), "MCP_PROXY_API_KEY="+keys["bob"])
	if out, err := st.CombinedOutput(); err == nil || !strings.Contains(string(out), `403 Forbidden: principal "api_key:bob" is not in the admin groups (ops)`) {
		t.Errorf("bob's status: %v %s", err, out)
	}
	if w, err := whoamiOf(t, alice, "s__whoami"); err != nil || w["env"] != "alice-stored-0005" {
		t.Errorf("alice's secret after bob's attempts: %v %v", w, err)
	}
	// An administrator sets bob's secret for him.
	if out, err := cli(keys["ops"], "bob-stored-0007\n", "set-secret", "--upstream", "s", "--name", "who", "--principal", "bob"); err != nil || !strings.Contains(out, "stored secret who of principal api_key:bob for s") {
		t.Fatalf("ops setting bob's secret: %v %s", err, out)
	}
	if w, err := whoamiOf(t, bob, "s__whoami"); err != nil || w["env"] != "bob-stored-0007" {
		t.Errorf("bob's secret set by ops: %v %v", w, err)
	}

	logs := stderr.String()
	for _, s := range []string{"alice-secret-0001", "bob-secret-0002", "dave-secret-0004", "alice-stored-0005", "bob-attack-0006", "bob-stored-0007"} {
		if strings.Contains(logs, s) {
			t.Errorf("secret %s in the proxy's log", s)
		}
	}
}
