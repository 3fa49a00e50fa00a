package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The policy decides on exactly what the upstream acts on. Each case below is a way an
// attacker found around a deny rule; each must be refused (and the secret never read)
// over stdio and over HTTP. The upstream is the test server as a naive file server: it
// percent-decodes file: URIs, reads read_file's path with encoding/json (last member
// wins, names match without case), and checks nothing itself.

const secretText = "TOP-SECRET-e2e"

// fileTree makes DIR/public/ok.txt and DIR/secret/key.txt and returns DIR.
func fileTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []struct{ path, text string }{{"public/ok.txt", "public text"}, {"secret/key.txt", secretText}} {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// rpcCaller sends one request and returns the response's members.
type rpcCaller func(method, params string) map[string]json.RawMessage

// stdioCaller starts the proxy over stdio on cfg.
func stdioCaller(t *testing.T, cfg string) rpcCaller {
	rc := startRaw(t, cfg)
	rc.initialize()
	id := 0
	return func(method, params string) map[string]json.RawMessage {
		t.Helper()
		id++
		rc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
		return rc.response(strconv.Itoa(id))
	}
}

// httpCaller starts the proxy over Streamable HTTP (legacy session) on upstreams+extra.
func httpCaller(t *testing.T, config string) rpcCaller {
	url, _ := startHTTPProxy(t, config)
	c := &httpWire{t: t, url: url}
	ctx := ctxT(t, 120*time.Second)
	init := c.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bypass-e2e","version":"1"}}}`, nil)
	c.sid = init.header.Get("Mcp-Session-Id")
	if c.sid == "" {
		t.Fatalf("initialize: %d %s", init.status, init.body)
	}
	c.post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	id := 0
	return func(method, params string) map[string]json.RawMessage {
		t.Helper()
		id++
		r := c.post(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params), nil)
		body := r.body
		if i := bytes.Index(body, []byte("data: ")); i >= 0 && r.header.Get("Content-Type") == "text/event-stream" {
			body = body[i+len("data: "):]
			if j := bytes.IndexByte(body, '\n'); j >= 0 {
				body = body[:j]
			}
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("%s: status %d, not JSON: %s", method, r.status, r.body)
		}
		return m
	}
}

// bothTransports runs f over stdio and over HTTP, with upstreams and policy in config.
func bothTransports(t *testing.T, config string, f func(t *testing.T, call rpcCaller)) {
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		f(t, stdioCaller(t, writeConfig(t, config)))
	})
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		f(t, httpCaller(t, config))
	})
}

// refused fails the test unless m is an error that does not hold the secret, and
// returns its code.
func refused(t *testing.T, what string, m map[string]json.RawMessage) int64 {
	t.Helper()
	all, _ := json.Marshal(m)
	if strings.Contains(string(all), secretText) {
		t.Errorf("%s: the secret was read: %s", what, all)
		return 0
	}
	code := errorCode(t, m)
	if code == 0 {
		t.Errorf("%s: not refused: %s", what, all)
	}
	return code
}

func fileURL(p string) string { return (&url.URL{Scheme: "file", Path: p}).String() }

// TestPolicyBypassArgumentsAndURIs covers the parser differential on duplicate members
// (class 1), equivalent resource URIs (class 2) and under() on file URLs (class 4).
func TestPolicyBypassArgumentsAndURIs(t *testing.T) {
	t.Parallel()
	srv := fileTree(t)
	pub, secret := filepath.Join(srv, "public"), filepath.Join(srv, "secret")
	config := testUpstream("f", "f", []string{"-files", pub}, "") + fmt.Sprintf(`
policy {
  default = "deny"
  rule "files-under-public" {
    effect    = "allow"
    tools     = ["f__read_file"]
    condition = under(args.path, %q)
  }
  rule "resources-under-srv" {
    effect    = "allow"
    resources = [%q]
  }
  rule "no-secrets" {
    effect    = "deny"
    resources = [%q]
  }
}
`, pub, fileURL(srv)+"/*", fileURL(secret)+"/*")
	okPath, keyPath := filepath.Join(pub, "ok.txt"), filepath.Join(secret, "key.txt")

	bothTransports(t, config, func(t *testing.T, call rpcCaller) {
		// What the rules allow still works, in every spelling that means the same.
		if m := call("tools/call", fmt.Sprintf(`{"name":"f__read_file","arguments":{"path":%q}}`, okPath)); errorCode(t, m) != 0 || !strings.Contains(string(m["result"]), "public text") {
			t.Fatalf("allowed read_file: %s", m["result"])
		}
		for _, uri := range []string{fileURL(okPath), strings.Replace(fileURL(okPath), "/public/", "/./public/", 1), strings.Replace(fileURL(okPath), "ok.txt", "%6Fk.txt", 1)} {
			if m := call("resources/read", fmt.Sprintf(`{"uri":%q}`, uri)); errorCode(t, m) != 0 || !strings.Contains(string(m["result"]), "public text") {
				t.Fatalf("allowed resources/read %s: %s %s", uri, m["result"], m["error"])
			}
		}

		// Class 1: two members of one name, in any spelling, anywhere in params.
		for _, args := range []string{
			fmt.Sprintf(`{"name":"f__read_file","arguments":{"path":%q,"path":%q}}`, okPath, keyPath),
			fmt.Sprintf(`{"name":"f__read_file","arguments":{"path":%q,"p\u0061th":%q}}`, okPath, keyPath),
			fmt.Sprintf(`{"name":"f__read_file","arguments":{"path":%q,"PATH":%q}}`, okPath, keyPath),
			fmt.Sprintf(`{"name":"f__read_file","arguments":{"path":%q},"arguments":{"path":%q}}`, okPath, keyPath),
			fmt.Sprintf(`{"name":"f__read_file","arguments":{"path":%q},"Arguments":{"path":%q}}`, okPath, keyPath),
		} {
			m := call("tools/call", args)
			if code := refused(t, "duplicate members "+args, m); code != 0 && (code != -32602 || !strings.Contains(string(m["error"]), "duplicate member")) {
				t.Errorf("duplicate members %s: got %s; want -32602 naming the duplicate", args, m["error"])
			}
		}

		// Class 4: under() decodes file URLs before the containment check.
		for _, p := range []string{
			fileURL(pub) + "/%2e%2e/secret/key.txt",
			fileURL(pub) + "/%2E%2E/secret/key.txt",
			fileURL(pub) + "/.%2e/secret/key.txt",
			fileURL(pub) + "/..%2Fsecret/key.txt",
		} {
			refused(t, "read_file "+p, call("tools/call", fmt.Sprintf(`{"name":"f__read_file","arguments":{"path":%q}}`, p)))
		}

		// Class 2: equivalent spellings of a denied URI, listed or not.
		for _, uri := range []string{
			fileURL(pub) + "/../secret/key.txt",
			fileURL(srv) + "/./secret/key.txt",
			fileURL(srv) + "/%73ecret/key.txt",
			strings.Replace(fileURL(keyPath), "file:", "FILE:", 1),
			fileURL(pub) + "/%2e%2e/secret/key.txt",
			fileURL(srv) + "/secret%2Fkey.txt",
		} {
			refused(t, "resources/read "+uri, call("resources/read", fmt.Sprintf(`{"uri":%q}`, uri)))
		}
		// Hidden dot segments behind encoded separators are refused as ambiguous.
		for _, uri := range []string{fileURL(pub) + "%2F..%2Fsecret/key.txt", fileURL(pub) + `\..\secret\key.txt`} {
			if code := refused(t, "resources/read "+uri, call("resources/read", fmt.Sprintf(`{"uri":%q}`, uri))); code != 0 && code != -32602 {
				t.Errorf("resources/read %s: code %d; want -32602", uri, code)
			}
		}
	})
}

// TestPolicyBypassRewrittenURI covers class 3: when two upstreams list the same URI,
// the second is exposed as mcp-proxy://…, and a deny rule on the original URI must hide
// and refuse that form too.
func TestPolicyBypassRewrittenURI(t *testing.T) {
	t.Parallel()
	srv := fileTree(t)
	secret := filepath.Join(srv, "secret")
	config := testUpstream("a", "a", []string{"-files", secret}, "") + testUpstream("b", "b", []string{"-files", secret}, "") + fmt.Sprintf(`
policy {
  default = "deny"
  rule "all-resources" {
    effect    = "allow"
    resources = ["*"]
  }
  rule "no-secrets" {
    effect    = "deny"
    resources = [%q]
  }
}
`, fileURL(secret)+"/*")

	bothTransports(t, config, func(t *testing.T, call rpcCaller) {
		m := call("resources/list", `{}`)
		if errorCode(t, m) != 0 {
			t.Fatalf("resources/list: %s", m["error"])
		}
		if l := string(m["result"]); strings.Contains(l, "key.txt") || !strings.Contains(l, "mis://static/") {
			t.Errorf("resources/list shows the denied resource (or nothing at all): %s", l)
		}
		exposed := "mcp-proxy://b/" + url.PathEscape(fileURL(filepath.Join(secret, "key.txt")))
		refused(t, "resources/read "+exposed, call("resources/read", fmt.Sprintf(`{"uri":%q}`, exposed)))
		refused(t, "subscribe "+exposed, call("resources/subscribe", fmt.Sprintf(`{"uri":%q}`, exposed)))
	})
}
