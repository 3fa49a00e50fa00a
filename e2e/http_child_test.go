package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHTTPFrontToChildUpstream: a legacy session's calls over the HTTP front end to a
// child process, whose answers the POSTs' own handlers read from the child's stdout
// when nobody else does (the leader/follower read). Many concurrent calls each get
// their own answer; a slow call is kept alive by the beat; a call the client cancels,
// and one past the upstream's timeout, end their POSTs while their handler was the one
// reading; lines that are not messages are skipped; when the child crashes with calls
// in flight every POST ends with an error, and after the restart calls work again.
func TestHTTPFrontToChildUpstream(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("listen \"http\" {\n  address = %q\n  path = \"/mcp\"\n  keepalive = \"200ms\"\n}\n", addr)+
		testUpstream("c", "c", nil, `timeout = "3s"`))
	stderr, _ := startProxyAt(t, cfg, addr)
	c := &httpWire{t: t, url: "http://" + addr + "/mcp"}
	ctx := ctxT(t, 120*time.Second)
	c.initialize(ctx, stderr)
	// post is c.post for any goroutine: it reports failures instead of ending the test.
	post := func(body string) (wireReply, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
		if err != nil {
			return wireReply{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return wireReply{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return wireReply{status: resp.StatusCode, header: resp.Header, body: b}, err
	}
	echo := func(id string) error {
		r, err := post(`{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":{"name":"c__echo","arguments":{"x":"` + id + `"}}}`)
		switch {
		case err != nil:
			return err
		case r.status != http.StatusOK || !strings.Contains(string(r.body), `"id":"`+id+`"`) || strings.Count(string(r.body), id) < 2: // the id, and the arguments echoed
			return fmt.Errorf("echo %s: %d %s", id, r.status, r.body)
		}
		return nil
	}
	if err := echo("e1"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}

	// Concurrent calls: each answer reaches its own POST.
	var wg sync.WaitGroup
	errs := make(chan error, 16*25)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				if err := echo(fmt.Sprintf("g%d-%d", g, i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Slower than the keep-alive interval: comments keep the answer alive, then the
	// response ends the stream.
	resp := c.do(ctx, http.MethodPost, `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"c__slow","arguments":{"ms":700}}}`, nil)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the slow call's answer: %v", err)
	}
	if body, ct := string(b), resp.Header.Get("Content-Type"); ct != "text/event-stream" || !strings.Contains(body, "\n:") && !strings.HasPrefix(body, ":") ||
		!strings.Contains(body, `slept 700ms`) {
		t.Errorf("a call slower than the keep-alive: %q\n%s", ct, body)
	}

	// Cancelled by the client while the child works on it: the POST ends at once.
	done := make(chan wireReply, 1)
	go func() {
		r, _ := post(`{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"c__slow","arguments":{"ms":60000}}}`)
		done <- r
	}()
	time.Sleep(300 * time.Millisecond) // the call reaches the child
	if r := c.post(ctx, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long","reason":"test"}}`, nil); r.status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	select {
	case r := <-done:
		if strings.Contains(string(r.body), `"result"`) {
			t.Errorf("a cancelled call got a result: %d %s", r.status, r.body)
		}
	case <-time.After(20 * time.Second): // the tool would answer after 60 s
		t.Fatalf("the cancelled call's POST did not end before its answer\n%s", stderr)
	}

	// Past the upstream's timeout: the proxy's timeout error.
	if r := c.post(ctx, `{"jsonrpc":"2.0","id":"late","method":"tools/call","params":{"name":"c__slow","arguments":{"ms":60000}}}`, nil); !strings.Contains(string(r.body), "-31001") {
		t.Errorf("a call past the timeout: %d %s", r.status, r.body)
	}
	// Lines that are not messages, read by whoever reads, are skipped.
	if r := c.post(ctx, `{"jsonrpc":"2.0","id":"g","method":"tools/call","params":{"name":"c__garbage","arguments":{}}}`, nil); r.status != http.StatusOK || !strings.Contains(string(r.body), `"result"`) {
		t.Errorf("garbage: %d %s", r.status, r.body)
	}
	if err := echo("e2"); err != nil {
		t.Error(err)
	}

	// The child crashes while calls wait for it: every POST ends with an error.
	slow := make(chan wireReply, 3)
	for i := range 3 {
		go func() {
			r, _ := post(fmt.Sprintf(`{"jsonrpc":"2.0","id":"w%d","method":"tools/call","params":{"name":"c__slow","arguments":{"ms":2500}}}`, i))
			slow <- r
		}()
	}
	time.Sleep(300 * time.Millisecond) // the calls reach the child
	if r := c.post(ctx, `{"jsonrpc":"2.0","id":"crash","method":"tools/call","params":{"name":"c__crash","arguments":{}}}`, nil); !strings.Contains(string(r.body), `"error"`) {
		t.Errorf("crash: %d %s", r.status, r.body)
	}
	for range 3 {
		select {
		case r := <-slow:
			if !strings.Contains(string(r.body), `"error"`) {
				t.Errorf("a call in flight when the child crashed: %d %s", r.status, r.body)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("a call in flight when the child crashed did not end\n%s", stderr)
		}
	}
	// Restarted: calls work again (refused as unavailable until it is back).
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := echo("after")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call succeeded after the crash: %v\n%s", err, stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
