package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTPFrontToHTTPUpstream: a legacy session's calls over the HTTP front end to an
// HTTP upstream, whose exchange the proxy runs on the POST's own handler. An answer
// comes back as JSON; a slow call is kept alive (the beat turns its answer into an event
// stream with keep-alive comments before the response); a call the client cancels ends
// its POST then, not when the upstream would answer; a call past the upstream's
// timeout fails at the timeout with the proxy's error; and the session goes on working.
func TestHTTPFrontToHTTPUpstream(t *testing.T) {
	t.Parallel()
	upURL, upStderr := startTestserverHTTP(t)
	addr := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("listen \"http\" {\n  address = %q\n  path = \"/mcp\"\n  keepalive = \"200ms\"\n}\n", addr)+
		fmt.Sprintf("upstream \"r\" {\n  url = %q\n  namespace = \"r\"\n  timeout = \"3s\"\n}\n", upURL))
	stderr, _ := startProxyAt(t, cfg, addr)
	c := &httpWire{t: t, url: "http://" + addr + "/mcp"}
	ctx := ctxT(t, 90*time.Second)
	c.initialize(ctx, stderr)
	echo := func(id string) {
		t.Helper()
		r := c.post(ctx, `{"jsonrpc":"2.0","id":"`+id+`","method":"tools/call","params":{"name":"r__echo","arguments":{"x":1}}}`, nil)
		// A quick answer comes as JSON; one that took longer than the keep-alive (a
		// loaded machine) rightly comes as an event stream: either way, the response.
		ct := r.header.Get("Content-Type")
		if r.status != 200 || !strings.HasPrefix(ct, "application/json") && ct != "text/event-stream" || !strings.Contains(string(r.body), `"id":"`+id+`"`) {
			t.Errorf("echo %s: %d %q %s\n%s", id, r.status, ct, r.body, stderr)
		} else if ct == "text/event-stream" {
			t.Logf("echo %s took longer than the 200 ms keep-alive: answered as an event stream", id)
		}
	}
	echo("e1")

	// Slower than the keep-alive interval: comments keep the answer alive, then the
	// response ends the stream.
	resp := c.do(ctx, http.MethodPost, `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"r__slow","arguments":{"ms":700}}}`, nil)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	if err != nil {
		t.Fatalf("reading the slow call's answer: %v", err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || !strings.Contains(body, "\n:") && !strings.HasPrefix(body, ":") ||
		!strings.Contains(body, `slept 700ms`) {
		t.Errorf("a call slower than the keep-alive: %q\n%s", ct, body)
	}

	// Cancelled by the client while the upstream works on it: the POST ends at once.
	done := make(chan wireReply, 1)
	go func() {
		done <- c.post(ctx, `{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"r__slow","arguments":{"ms":60000}}}`, nil)
	}()
	time.Sleep(300 * time.Millisecond) // the call reaches the upstream
	if r := c.post(ctx, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long","reason":"test"}}`, nil); r.status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	select {
	case r := <-done:
		if strings.Contains(string(r.body), `"result"`) {
			t.Errorf("a cancelled call got a result: %d %s", r.status, r.body)
		}
	case <-time.After(20 * time.Second): // the tool would answer after 60 s
		t.Fatalf("the cancelled call's POST did not end before its answer\n%s\n%s", stderr, upStderr)
	}

	// Past the upstream's timeout: the proxy's timeout error.
	r := c.post(ctx, `{"jsonrpc":"2.0","id":"late","method":"tools/call","params":{"name":"r__slow","arguments":{"ms":60000}}}`, nil)
	if !strings.Contains(string(r.body), "-31001") {
		t.Errorf("a call past the timeout: %d %s", r.status, r.body)
	}
	echo("e2")
}
