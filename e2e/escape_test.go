package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpstreamContentPassesByteForByte: what the proxy does not own reaches the client
// byte for byte, also where the proxy re-encodes a message around it (initialize's
// instructions, a read of a rewritten resource URI): <, > and & are not turned into
// \u003c, \u003e and \u0026.
func TestUpstreamContentPassesByteForByte(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const text = `<b>fish & chips</b> -> "ok"`
	p := filepath.Join(dir, "menu.html")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, testUpstream("a", "a", []string{"-files", dir, "-instructions", "Use <tools> & be nice"}, "")+
		testUpstream("b", "b", []string{"-files", dir}, ""))
	rc := startRaw(t, cfg)
	init := rc.initialize()
	if !strings.Contains(string(init["result"]), "Use <tools> & be nice") {
		t.Errorf("initialize re-encoded the upstream's instructions: %s", init["result"])
	}
	uri := (&url.URL{Scheme: "file", Path: p}).String()
	for i, u := range []string{uri, "mcp-proxy://b/" + url.PathEscape(uri)} {
		rc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":%q}}`, i+1, u))
		m := rc.response(fmt.Sprint(i + 1))
		res := string(m["result"])
		if !strings.Contains(res, `<b>fish & chips</b> -> \"ok\"`) {
			t.Errorf("resources/read %s: content re-encoded: %s %s", u, res, m["error"])
		}
		if strings.Contains(res, `\u003cb\u003e`) || strings.Contains(res, `\u0026`) {
			t.Errorf("resources/read %s: HTML-escaped: %s", u, res)
		}
		if i == 1 && !strings.Contains(res, `"uri":"mcp-proxy://b/`) {
			t.Errorf("the rewritten URI's contents keep the upstream's URI: %s", res)
		}
	}
}
