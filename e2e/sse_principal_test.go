package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// sseClient is a client of the proxy's legacy HTTP+SSE front end (2024-11-05): the
// open GET /sse stream, read event by event, and the endpoint its first event named.
type sseClient struct {
	t        *testing.T
	key      string         // the API key it authenticates with
	endpoint string         // absolute URL of /message?sessionId=…
	events   chan wireEvent // the stream's events after the endpoint event
}

// openSSE opens GET /sse with key and reads the endpoint event.
func openSSE(t *testing.T, ctx context.Context, base, key string) *sseClient {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sse", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /sse: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /sse: HTTP %d", resp.StatusCode)
	}
	c := &sseClient{t: t, key: key, events: make(chan wireEvent, 64)}
	go func() {
		defer close(c.events)
		var cur wireEvent
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.event != "" || cur.data != "" {
					c.events <- cur
				}
				cur = wireEvent{}
			case strings.HasPrefix(line, "event: "):
				cur.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				cur.data += line[6:]
			}
		}
	}()
	ev := c.next()
	if ev.event != "endpoint" || !strings.HasPrefix(ev.data, "/message?sessionId=") {
		t.Fatalf("first event of /sse: %+v", ev)
	}
	c.endpoint = base + ev.data
	return c
}

// next returns the stream's next event, failing when none comes in time.
func (c *sseClient) next() wireEvent {
	c.t.Helper()
	select {
	case ev, ok := <-c.events:
		if !ok {
			c.t.Fatalf("the /sse stream ended")
		}
		return ev
	case <-time.After(60 * time.Second):
		c.t.Fatalf("no event on the /sse stream within 60s")
	}
	return wireEvent{}
}

// until reads messages from the stream until the one whose data contains marker, and
// returns it with every message that came before it.
func (c *sseClient) until(marker string) (found string, before []string) {
	c.t.Helper()
	for {
		ev := c.next()
		if strings.Contains(ev.data, marker) {
			return ev.data, before
		}
		before = append(before, ev.data)
	}
}

// postMessage POSTs body to a /message URL with key ("" for none) and returns the
// HTTP status.
func postMessage(t *testing.T, ctx context.Context, url, key, body string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// send POSTs one message to the client's own session and expects 202.
func (c *sseClient) send(ctx context.Context, body string) {
	c.t.Helper()
	if st := postMessage(c.t, ctx, c.endpoint, c.key, body); st != http.StatusAccepted {
		c.t.Fatalf("POST %s: HTTP %d", body, st)
	}
}

// initialize runs the legacy handshake on the client's session.
func (c *sseClient) initialize(ctx context.Context) {
	c.t.Helper()
	c.send(ctx, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"sse-e2e","version":"1"}}}`)
	if got, _ := c.until(`"id":"init"`); !strings.Contains(got, `"result"`) {
		c.t.Fatalf("initialize over HTTP+SSE: %s", got)
	}
	c.send(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// toolNamesIn returns the tool names of a tools/list response (or of each tools/list
// response in a batch answer).
func toolNamesIn(t *testing.T, data string) map[string]bool {
	t.Helper()
	type list struct {
		Result struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"result"`
	}
	var all []list
	if strings.HasPrefix(data, "[") {
		if err := json.Unmarshal([]byte(data), &all); err != nil {
			t.Fatalf("batch answer: %v %s", err, data)
		}
	} else {
		var one list
		if err := json.Unmarshal([]byte(data), &one); err != nil {
			t.Fatalf("tools/list answer: %v %s", err, data)
		}
		all = append(all, one)
	}
	names := map[string]bool{}
	for _, l := range all {
		for _, tool := range l.Result.Tools {
			names[tool.Name] = true
		}
	}
	return names
}

// TestLegacySSEPrincipal: a legacy HTTP+SSE session belongs to the principal that
// opened it. Its requests (batches included) are decided by the policy as that
// principal's; another principal's messages for it are refused before they are read,
// and nothing of theirs reaches its stream; without credentials both endpoints answer
// 401; and a session id is taken from exactly one place, on the transport that made it.
func TestLegacySSEPrincipal(t *testing.T) {
	t.Parallel()
	url, _, stderr := startPolicyProxy(t, "")
	base := strings.TrimSuffix(url, "/mcp")
	ctx := ctxT(t, 120*time.Second)

	// No credentials: 401 on both endpoints.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("GET /sse without a key: HTTP %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	alice := openSSE(t, ctx, base, aliceKey)
	if st := postMessage(t, ctx, alice.endpoint, "", `{"jsonrpc":"2.0","id":"anon","method":"ping"}`); st != http.StatusUnauthorized {
		t.Errorf("POST /message without a key: HTTP %d", st)
	}
	alice.initialize(ctx)

	// Alice's catalogue is hers: the policy sees her and her groups.
	alice.send(ctx, `{"jsonrpc":"2.0","id":"a-list","method":"tools/list"}`)
	got, _ := alice.until(`"id":"a-list"`)
	if names := toolNamesIn(t, got); !names["t__slow"] || !names["ev__test_simple_text"] || names["t__crash"] {
		t.Errorf("alice's tools over HTTP+SSE: %v\n%s", names, stderr)
	}
	// And so is every request of a batch.
	alice.send(ctx, `[{"jsonrpc":"2.0","id":"a-batch","method":"tools/list"}]`)
	got, _ = alice.until(`"id":"a-batch"`)
	if names := toolNamesIn(t, got); !names["t__slow"] || names["t__crash"] {
		t.Errorf("alice's tools in a batch over HTTP+SSE: %v", names)
	}

	// Bob's own session shows his catalogue, not alice's.
	bob := openSSE(t, ctx, base, bobKey)
	bob.initialize(ctx)
	bob.send(ctx, `{"jsonrpc":"2.0","id":"b-list","method":"tools/list"}`)
	got, _ = bob.until(`"id":"b-list"`)
	if names := toolNamesIn(t, got); len(names) != 3 || !names["t__echo"] || !names["t__fail"] || !names["ev__test_sampling"] {
		t.Errorf("bob's tools over HTTP+SSE: %v", names)
	}

	// Bob, with his own valid key, cannot use alice's session: 403, as the Streamable
	// HTTP front end answers; the message is not read.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":"bob-call","method":"tools/call","params":{"name":"t__slow","arguments":{"ms":1}}}`,
		`{"jsonrpc":"2.0","id":"bob-ping","method":"ping"}`,
		`[{"jsonrpc":"2.0","id":"bob-batch","method":"ping"}]`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"bob-call"}}`,
	} {
		if st := postMessage(t, ctx, alice.endpoint, bobKey, body); st != http.StatusForbidden {
			t.Errorf("bob posted %s to alice's session: HTTP %d", body, st)
		}
	}
	// One session id, named once: a repeated sessionId is refused, not read either way.
	bobSID := strings.TrimPrefix(bob.endpoint, base+"/message?sessionId=")
	if st := postMessage(t, ctx, alice.endpoint+"&sessionId="+bobSID, aliceKey, `{"jsonrpc":"2.0","id":"dup","method":"ping"}`); st != http.StatusBadRequest {
		t.Errorf("two sessionId parameters: HTTP %d", st)
	}
	if st := postMessage(t, ctx, bob.endpoint+"&sessionId="+strings.TrimPrefix(alice.endpoint, base+"/message?sessionId="), bobKey,
		`{"jsonrpc":"2.0","id":"bob-dup","method":"ping"}`); st != http.StatusBadRequest {
		t.Errorf("two sessionId parameters, bob's first: HTTP %d", st)
	}
	// An HTTP+SSE session is not a Streamable HTTP session, whoever asks.
	aliceSID := strings.TrimPrefix(alice.endpoint, base+"/message?sessionId=")
	for _, key := range []string{aliceKey, bobKey} {
		w := &httpWire{t: t, url: url, sid: aliceSID}
		if r := w.post(ctx, `{"jsonrpc":"2.0","id":"cross","method":"ping"}`, bearer(key)); r.status != http.StatusNotFound {
			t.Errorf("alice's HTTP+SSE session id on the Streamable HTTP endpoint: HTTP %d %s", r.status, r.body)
		}
	}

	// Nothing of bob's reached alice's stream. A ping is answered before its POST
	// returns, so had one been taken it would come before alice's own ping; her echo
	// goes the route bob's call would have.
	alice.send(ctx, `{"jsonrpc":"2.0","id":"a-ping","method":"ping"}`)
	_, before := alice.until(`"id":"a-ping"`)
	alice.send(ctx, `{"jsonrpc":"2.0","id":"a-echo","method":"tools/call","params":{"name":"t__echo","arguments":{"x":1}}}`)
	got, more := alice.until(`"id":"a-echo"`)
	if !strings.Contains(got, `"result"`) {
		t.Errorf("alice's echo: %s", got)
	}
	for _, m := range append(before, more...) {
		if strings.Contains(m, "bob-") || strings.Contains(m, `"dup"`) {
			t.Errorf("bob's message reached alice's stream: %s", m)
		}
	}
}
