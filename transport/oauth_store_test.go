package transport

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// TestOAuthTokenFile: the first run authorizes and writes the token file (mode 0600); a
// second OAuth client for the same upstream (a restart) uses it without a new
// authorization, refreshes an expired token from it, and keeps the file current; a file
// for another upstream is ignored.
func TestOAuthTokenFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens", "search.json")
	as, rs, l, _ := setup(t, "", OAuthConfig{TokenFile: file})
	if got := call(t, l, 1, "tools/list"); !strings.Contains(got, `"ok":true`) {
		t.Fatalf("first run: %s", got)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatalf("no token file after authorizing: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	auths, tokens, regs := as.counts()

	// A restart: a new client reads the file and is accepted at once.
	log := &logBuf{}
	o2, err := NewOAuth(rs.srv.URL+"/mcp", OAuthConfig{TokenFile: file}, zerolog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	l2 := DialHTTP(HTTPSpec{URL: rs.srv.URL + "/mcp", OAuth: o2})
	t.Cleanup(func() { l2.Stop(time.Second) })
	if got := call(t, l2, 2, "tools/list"); !strings.Contains(got, `"ok":true`) {
		t.Fatalf("after a restart: %s", got)
	}
	if a, tk, r := as.counts(); a != auths || tk != tokens || r != regs {
		t.Errorf("a restart authorized again: authorizations %d→%d, token requests %d→%d, registrations %d→%d", auths, a, tokens, tk, regs, r)
	}
	if !strings.Contains(log.String(), "using the stored authorization") {
		t.Errorf("log: %s", log.String())
	}

	// An expired stored token is refreshed before its first use, and the file follows.
	var st storedToken
	b, _ := os.ReadFile(file)
	if err := json.Unmarshal(b, &st); err != nil || st.RefreshToken == "" {
		t.Fatalf("token file %s: %v (a refresh token is needed for this test)", b, err)
	}
	old := st.AccessToken
	st.Expiry = time.Now().Add(-time.Minute)
	b, _ = json.Marshal(st)
	os.WriteFile(file, b, 0o600)
	o3, err := NewOAuth(rs.srv.URL+"/mcp", OAuthConfig{TokenFile: file}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	l3 := DialHTTP(HTTPSpec{URL: rs.srv.URL + "/mcp", OAuth: o3})
	t.Cleanup(func() { l3.Stop(time.Second) })
	if got := call(t, l3, 3, "tools/list"); !strings.Contains(got, `"ok":true`) {
		t.Fatalf("with an expired stored token: %s", got)
	}
	if a, _, _ := as.counts(); a != auths {
		t.Errorf("an expired token with a refresh token led to a new authorization")
	}
	b, _ = os.ReadFile(file)
	json.Unmarshal(b, &st)
	if st.AccessToken == old || !st.Expiry.After(time.Now()) {
		t.Errorf("the token file was not updated by the refresh")
	}

	// Another upstream's file is not used.
	log4 := &logBuf{}
	if _, err := NewOAuth("http://127.0.0.1:1/other", OAuthConfig{TokenFile: file}, zerolog.New(log4)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log4.String(), "ignoring the token file") {
		t.Errorf("a token file for another upstream: %s", log4.String())
	}
}

// TestOAuthOpensBrowser: when a person must approve, the URL is handed to the browser
// (here a stand-in that approves, as a person would), and the flow completes.
func TestOAuthOpensBrowser(t *testing.T) {
	opened := make(chan string, 1)
	var as *testAS
	prev := openURL
	openURL = func(u string) error {
		opened <- u
		// The person approves: the authorization server redirects to the callback.
		pu, err := url.Parse(u)
		if err != nil {
			return err
		}
		q := pu.Query()
		as.mu.Lock()
		code := "code-" + strconv.Itoa(as.n)
		as.mu.Unlock()
		cb := q.Get("redirect_uri") + "?" + url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {as.issuer()}}.Encode()
		go func() {
			if resp, err := http.Get(cb); err == nil {
				resp.Body.Close()
			}
		}()
		return nil
	}
	t.Cleanup(func() { openURL = prev })
	var l *HTTPLink
	as, _, l, _ = setup(t, "", OAuthConfig{OpenBrowser: true})
	as.manual = true
	if err := l.Write(jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/list", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	select {
	case u := <-opened:
		if !strings.HasPrefix(u, as.issuer()+"/authorize?") {
			t.Errorf("opened %q", u)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no browser opened")
	}
	line, err := readLineTimeout(l, 10*time.Second)
	if err != nil || !strings.Contains(string(line), `"ok":true`) {
		t.Fatalf("%s %v", line, err)
	}
}
