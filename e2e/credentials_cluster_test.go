package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/authserver"
	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// TestCredentialsCluster: two replicas behind HAProxy share the principals' grants in
// Redis, sealed with the cluster's key. A principal gets the link from replica A,
// follows it through the load balancer (the flow is in Redis: either replica completes
// it), and replica B serves the principal's calls with the grant. When the token
// expires, concurrent calls on both replicas make one refresh (a Redis lease). No token
// is in Redis in the clear or in a log.
func TestCredentialsCluster(t *testing.T) {
	t.Parallel()
	as := startAuthServer(t, authserver.Options{AccessJWTTTL: 4 * time.Second})
	up, upLog := startTestserverHTTP(t, "-whoami", "-auth-jwks", as.URL+"/jwks", "-auth-issuer", as.URL, "-auth-as", as.URL,
		"-auth-anonymous-catalogue")
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	resource := "http://" + front + "/mcp"
	base := fmt.Sprintf(`auth {
  resource = %q
  jwt {
    issuer   = %q
    jwks_url = %q
  }
}
upstream "jira" {
  url = %q
  credentials { mode = "oauth" }
}
`, resource, as.URL, as.URL+"/jwks", up)
	topo, err := topology.Start(topology.Options{ProxyBin: proxyBin, Replicas: 2, Base: withTestGrace(base), FrontAddr: front,
		ClusterAttrs: `key = "0123456789abcdef0123456789abcdef-cluster"`, Dir: t.TempDir(), LogLevel: "debug", Admin: true})
	if errors.Is(err, topology.ErrMissing) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
		if t.Failed() {
			for _, r := range topo.Replicas {
				t.Logf("--- %s:\n%s", r.Name, r.Output.String())
			}
		}
	})
	logs := stringerFunc(func() string {
		var b strings.Builder
		for _, r := range topo.Replicas {
			fmt.Fprintf(&b, "--- %s\n%s\n", r.Name, r.Output.String())
		}
		return b.String()
	})
	tok := as.IssueFront("alice", resource, 10*time.Minute)
	a := connectAs(t, "http://"+topo.Replicas[0].Addr+"/mcp", tok, nil, logs)
	b := connectAs(t, "http://"+topo.Replicas[1].Addr+"/mcp", tok, nil, logs)

	res, err := whoamiOf(t, a, "jira__whoami")
	link := ""
	if err != nil {
		link = connectLink.FindString(err.Error())
	}
	if link == "" || !strings.HasPrefix(link, "http://"+front+"/oauth/connect/") {
		t.Fatalf("replica A's answer before authorizing: %v %v\n%s", res, err, logs)
	}
	if code, body := newBrowser(t, as, "alice").get(link); code != 200 {
		t.Fatalf("following the link through the load balancer: %d %s\n%s", code, body, logs)
	}
	// Replica B serves alice with the grant obtained through the load balancer.
	for name, cs := range map[string]*mcp.ClientSession{"B": b, "A": a} {
		if w, err := whoamiOf(t, cs, "jira__whoami"); err != nil || w["sub"] != "alice" {
			t.Errorf("replica %s: %v %v\n%s", name, w, err, logs)
		}
	}
	if n := as.Count(authserver.GrantCode, "alice"); n != 1 {
		t.Errorf("%d authorization codes redeemed, want 1", n)
	}

	// The token expires at the upstream: concurrent calls on both replicas, one refresh.
	time.Sleep(5200 * time.Millisecond) // past the JWT's exp, whole seconds after issue
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		cs := a
		if i%2 == 1 {
			cs = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w, err := whoamiOf(t, cs, "jira__whoami"); err != nil || w["sub"] != "alice" {
				t.Errorf("a call after expiry: %v %v", w, err)
			}
		}()
	}
	wg.Wait()
	if n := as.Count(authserver.GrantRefresh, "alice"); n != 1 {
		t.Errorf("concurrent calls on two replicas made %d refreshes, want 1\n%s", n, logs)
	}

	// Alice revokes her grant through replica A; replica B, which has her (refreshed,
	// still valid) token cached, stops using it at once: her next call through B is
	// sent to authorize, without waiting for B's cache to be checked again (30 s).
	revoke := exec.Command(proxyBin, "credentials", "revoke", "--upstream", "jira", "--admin", "http://"+topo.Replicas[0].AdminAddr)
	revoke.Env = append(os.Environ(), "MCP_PROXY_API_KEY="+tok)
	if out, err := revoke.CombinedOutput(); err != nil || !strings.Contains(string(out), "#alice's grants for jira") {
		t.Fatalf("alice revoking her grant through A: %v %s", err, out)
	}
	// The change reaches B through Redis in about a millisecond, an MCP call takes longer;
	// a few tries are allowed for a loaded machine, far less than B's recheck.
	var after string
	for try := 0; try < 20; try++ {
		_, err := whoamiOf(t, b, "jira__whoami")
		if err != nil && connectLink.MatchString(err.Error()) {
			after = ""
			t.Logf("B sent alice to authorize on try %d after the revocation", try+1)
			break
		}
		after = fmt.Sprint(err)
		time.Sleep(100 * time.Millisecond)
	}
	if after != "" {
		t.Errorf("replica B after the revocation through A: %s\n%s", after, logs)
	}
	if !strings.Contains(topo.Replicas[1].Output.String(), "revoked through another replica") {
		t.Errorf("replica B did not hear of the revocation\n%s", logs)
	}

	// Frank's client (the TypeScript SDK, URL elicitation) is on replica A; he completes
	// the authorization through replica B (the link and the callback sent there): A's
	// client is told (notifications/elicitation/complete), and its retry succeeds.
	ts := exec.Command("node", filepath.Join("testdata", "ts-url-elicitation.mjs"), "http://"+topo.Replicas[0].Addr+"/mcp",
		as.IssueFront("frank", resource, 10*time.Minute), "jira__whoami")
	var tsErr strings.Builder
	ts.Stderr = &tsErr
	tsOut, _ := ts.StdoutPipe()
	if err := ts.Start(); err != nil {
		t.Fatal(err)
	}
	defer ts.Process.Kill()
	lines := bufio.NewScanner(tsOut)
	var el struct {
		Elicitation struct{ ElicitationID, URL string }
	}
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &el) != nil || el.Elicitation.URL == "" {
		t.Fatalf("TS client on A: %s\n%s", lines.Text(), tsErr.String())
	}
	onB := func(u string) string {
		return strings.Replace(u, "http://"+front+"/", "http://"+topo.Replicas[1].Addr+"/", 1)
	}
	frank := newBrowser(t, as, "frank")
	code, toAS := frank.step(onB(el.Elicitation.URL))
	if code != 302 {
		t.Fatalf("opening frank's link on B: %d %s", code, toAS)
	}
	code, callback := frank.step(toAS)
	if code != 302 || !strings.HasPrefix(callback, "http://"+front+"/oauth/callback") {
		t.Fatalf("authorizing at the authorization server: %d %s", code, callback)
	}
	if code, body := frank.get(onB(callback)); code != 200 {
		t.Fatalf("the callback on B: %d %s\n%s", code, body, logs)
	}
	var done struct{ Complete string }
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &done) != nil || done.Complete != el.Elicitation.ElicitationID {
		t.Fatalf("TS client on A after frank authorized through B: %s\n%s\n%s", lines.Text(), tsErr.String(), logs)
	}
	var retry struct{ Result string }
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &retry) != nil || !strings.Contains(retry.Result, "sub=frank") {
		t.Errorf("TS client's retry on A: %s\n%s", lines.Text(), tsErr.String())
	}
	if err := ts.Wait(); err != nil {
		t.Errorf("TS client: %v\n%s", err, tsErr.String())
	}
	noTokens(t, as, logs, upLog)
}

type stringerFunc func() string

func (f stringerFunc) String() string { return f() }
