package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium returns the path of headless Chromium (Debian's chromium package). Without
// it the browser test is skipped, except in CI (the CI environment variable is set),
// where it must run: .ci/run installs it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "" {
		t.Skip("chromium is not installed (apt-get install -y chromium); CI runs this test")
	}
	t.Fatal("chromium is not installed, and CI must run the browser test: apt-get install -y chromium")
	return ""
}

// dumpDOM loads url in headless Chromium and returns the DOM it rendered.
func dumpDOM(t *testing.T, browser, url string) string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
			"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir="+t.TempDir(), "--dump-dom", url)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.WaitDelay = 10 * time.Second
		err := cmd.Run()
		cancel()
		var ee *exec.ExitError
		if err != nil && attempt < 3 && ctx.Err() == nil && errors.As(err, &ee) {
			// The browser itself failed (a loaded machine: "Zygote could not fork", a
			// segmentation fault, seen both as a signal and as the wrapper script's exit
			// status), which says nothing of the page: run it again; a page that breaks
			// the browser fails all three times.
			t.Logf("chromium failed (%v); running it again", err)
			continue
		}
		if err != nil {
			t.Fatalf("chromium --dump-dom %s: %v\n%s", url, err, tail(stderr.String(), 2000))
		}
		if !strings.Contains(stdout.String(), "</html>") {
			t.Fatalf("chromium rendered no page for %s:\n%s\n%s", url, stdout.String(), tail(stderr.String(), 2000))
		}
		return stdout.String()
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// rowState finds the state an upstream's row of the status page shows.
func rowState(t *testing.T, dom, name string) (class, state, restarts string) {
	t.Helper()
	row := regexp.MustCompile(`(?s)<tr id="upstream-` + regexp.QuoteMeta(name) + `" class="upstream ([a-z]+)">(.*?)</tr>`).FindStringSubmatch(dom)
	if row == nil {
		t.Fatalf("the page has no row for upstream %s:\n%s", name, dom)
	}
	st := regexp.MustCompile(`<td class="state [a-z]+">([a-z]+)</td>`).FindStringSubmatch(row[2])
	rs := regexp.MustCompile(`<td class="num restarts">(\d+)</td>`).FindStringSubmatch(row[2])
	if st == nil || rs == nil {
		t.Fatalf("the row of %s lacks its state or restarts: %s", name, row[0])
	}
	return row[1], st[1], rs[1]
}

// TestStatusPageInBrowser renders the admin listener's status page in headless
// Chromium, in stdio mode: the upstream rows and the client session are shown; a
// required upstream that crashes (held down) shows as not up and the proxy as not
// ready; once it restarts the page shows it up again. When the client goes, the admin
// listener closes with the proxy.
func TestStatusPageInBrowser(t *testing.T) {
	browser := chromium(t)
	t.Parallel()
	hold := filepath.Join(t.TempDir(), "hold")
	adminAddr := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("admin {\n  address = %q\n}\n", adminAddr)+
		heldUpstream("t", hold, `timeout = "10s"`)+
		testUpstream("aux", "aux", []string{"-name", "aux"}, "required = false"))
	rc := startRaw(t, cfg)
	base := "http://" + adminAddr
	// Before the client: the upstreams wait for it, and the proxy counts as ready.
	waitListening(t, adminAddr, rc.stderr)
	if code, body := adminGet(t, base, "/readyz", ""); code != 200 || !strings.Contains(string(body), `"waiting": [`) {
		t.Errorf("/readyz before the client: %d %s", code, body)
	}
	if _, body := adminGet(t, base, "/status?format=json", ""); !strings.Contains(string(body), `"state": "waiting"`) {
		t.Errorf("/status before the client: %s", body)
	}
	rc.initialize()
	waitReady(t, base, 200, 30*time.Second, rc.stderr)

	dom := dumpDOM(t, browser, base+"/status")
	for _, want := range []string{`<title>mcp-proxy status</title>`, `<p id="ready" class="yes">Ready</p>`,
		`<code id="config-path">` + cfg + `</code>`, `<td>legacy</td><td>stdio</td><td class="num">1</td>`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %s:\n%s", want, dom)
		}
	}
	if class, state, restarts := rowState(t, dom, "t"); class != "up" || state != "up" || restarts != "0" {
		t.Errorf("t before the crash: class %q, state %q, restarts %s", class, state, restarts)
	}
	if class, state, _ := rowState(t, dom, "aux"); class != "up" || state != "up" {
		t.Errorf("aux: class %q, state %q", class, state)
	}

	// Down: it crashes and cannot start again while the hold is there.
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rc.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t__crash","arguments":{}}}`)
	if code := errorCode(t, rc.response("7")); code != -31002 {
		t.Fatalf("crash: code %d", code)
	}
	waitReady(t, base, 503, 10*time.Second, rc.stderr)
	dom = dumpDOM(t, browser, base+"/status")
	if class, state, _ := rowState(t, dom, "t"); class == "up" || (state != "restarting" && state != "down") {
		t.Errorf("t after the crash: class %q, state %q", class, state)
	}
	// Why it is down: the last error of its start attempts, whichever the page caught (the
	// held wrapper's exit, or the broken pipe of writing to it as it exits).
	if !strings.Contains(dom, `<p id="ready" class="no">Not ready: t</p>`) || !lastErrorShown.MatchString(dom) {
		t.Errorf("the page does not say t is down and why:\n%s", dom)
	}
	if class, _, _ := rowState(t, dom, "aux"); class != "up" {
		t.Errorf("aux while t is down: %q", class)
	}

	// Up again: released, it restarts with backoff.
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	waitReady(t, base, 200, 45*time.Second, rc.stderr)
	dom = dumpDOM(t, browser, base+"/status")
	if class, state, restarts := rowState(t, dom, "t"); class != "up" || state != "up" || restarts == "0" {
		t.Errorf("t once back: class %q, state %q, restarts %s", class, state, restarts)
	}
	if !strings.Contains(dom, `<p id="ready" class="yes">Ready</p>`) {
		t.Errorf("the page does not say ready again:\n%s", dom)
	}

	// The client goes: the proxy exits and its admin listener with it.
	rc.stdin.Close()
	if _, exited := rc.wait(20 * time.Second); !exited {
		t.Fatalf("the proxy did not exit after its client went\n%s", rc.stderr)
	}
	if c, err := net.Dial("tcp", adminAddr); err == nil {
		c.Close()
		t.Error("the admin listener outlived the proxy")
	}
}

// lastErrorShown finds a non-empty last-error cell in upstream t's row.
var lastErrorShown = regexp.MustCompile(`<tr id="upstream-t"[^>]*>(?:[^<]|<[^/]|</[^t]|</t[^r])*<td class="err">[^<\s]`)
