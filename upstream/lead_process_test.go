package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// The test binary doubles as the child of the leader/follower tests over real pipes,
// selected by UPSTREAM_LEAD_SERVER (checked before TestMain runs).
func init() {
	if os.Getenv("UPSTREAM_LEAD_SERVER") != "" {
		os.Exit(leadServer())
	}
}

// leadServer is a legacy MCP server on stdin/stdout whose tools/call answers with the
// tool's name as text. A call to a tool named "hold…" is answered only after the next
// call to another tool (so answers come out of order, several in one write); a call to
// "crash" ends the process with status 3 without answering.
func leadServer() int {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	var held []string
	answer := func(id json.RawMessage, result string) {
		fmt.Fprintf(out, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n", id, result)
	}
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct{ Name string }
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || len(m.ID) == 0 {
			continue
		}
		switch m.Method {
		case "initialize":
			answer(m.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"lead","version":"1"}}`)
		case "tools/list":
			answer(m.ID, `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			text, _ := json.Marshal(m.Params.Name)
			result := `{"content":[{"type":"text","text":` + string(text) + `}]}`
			switch {
			case m.Params.Name == "crash":
				out.Flush()
				return 3
			case len(m.Params.Name) >= 4 && m.Params.Name[:4] == "hold":
				held = append(held, fmt.Sprintf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n", m.ID, result))
				continue
			}
			answer(m.ID, result)
			for i := len(held) - 1; i >= 0; i-- {
				out.WriteString(held[i])
			}
			held = held[:0]
		default:
			fmt.Fprintf(out, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}\n", m.ID)
		}
		out.Flush()
	}
	return 0
}

// TestLeadRealChild: many inline callers (each reading the child's stdout when the role
// comes to it) and ordinary callers at once against a real child process over its pipes,
// with answers out of order: every call gets its own answer. Then the child crashes
// while an inline caller reads and others wait: every call fails and every Send returns;
// the child is restarted and serves inline calls again; nothing leaks.
func TestLeadRealChild(t *testing.T) {
	noLeaks(t)
	ev := newRecEvents()
	logs := &lockedBuffer{}
	spec := childSpec("")
	spec.Env = map[string]string{"UPSTREAM_LEAD_SERVER": "1", "GORACE": "atexit_sleep_ms=0"}
	u := New(spec, zerolog.New(logs), ev)
	t.Cleanup(func() {
		u.Close()
		if t.Failed() {
			t.Logf("log:\n%s", logs)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	u.Start(ctx)
	if err := u.WaitFirstAttempt(ctx); err != nil {
		t.Fatal(err)
	}
	recvT(t, ev.changed)

	// call makes one call, inline or not, and returns its outcome and whether done had
	// run when Send returned.
	call := func(name string, inline bool) (text string, err error, doneFirst bool) {
		ch := make(chan callResult, 1)
		cctx := context.Background()
		if inline {
			cctx = AllowInline(cctx, nil)
		}
		u.Send(cctx, &Request{Method: mcp.MethodToolsCall, Params: json.RawMessage(`{"name":"` + name + `"}`)},
			func(m *jsonrpc.Message, err error) { ch <- callResult{m, err} })
		var r callResult
		select {
		case r = <-ch:
			doneFirst = true
		default:
			r = <-ch
		}
		if r.err != nil {
			return "", r.err, doneFirst
		}
		var res struct{ Content []struct{ Text string } }
		if err := json.Unmarshal(r.msg.Result, &res); err != nil || len(res.Content) != 1 {
			return "", fmt.Errorf("result %s", r.msg.Result), doneFirst
		}
		return res.Content[0].Text, nil, doneFirst
	}

	const callers, calls = 8, 100
	var wg sync.WaitGroup
	errs := make(chan string, 2*callers*calls)
	for g := range callers + 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inline := g < callers // two goroutines make ordinary calls
			for i := range calls {
				name := fmt.Sprintf("c%d-%d", g, i)
				if i%3 == 0 {
					name = "hold" + name // answered after the next other call
				}
				text, err, doneFirst := call(name, inline)
				switch {
				case err != nil:
					errs <- fmt.Sprintf("%s: %v", name, err)
				case text != name:
					errs <- fmt.Sprintf("%s: answered %q", name, text)
				case inline && !doneFirst:
					errs <- fmt.Sprintf("%s: Send returned before done ran", name)
				}
			}
		}()
	}
	// A held answer waits for the next other call: the last ones may wait for this.
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				call("flush", false)
			}
		}
	}()
	wg.Wait()
	close(stop)
	close(errs)
	for e := range errs {
		t.Error(e)
	}

	// The crash, while inline callers wait for held answers and one reads.
	type outcome struct {
		name string
		err  error
	}
	outcomes := make(chan outcome, 8)
	for i := range 4 {
		go func() {
			name := fmt.Sprint("hold-crash-", i)
			_, err, _ := call(name, true)
			outcomes <- outcome{name, err}
		}()
	}
	deadline := time.Now().Add(waitFor)
	for {
		u.mu.Lock()
		c := u.cur
		u.mu.Unlock()
		c.mu.Lock()
		n := len(c.pending)
		c.mu.Unlock()
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls pending; want 4", n)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err, _ := call("crash", true); err == nil {
		t.Error("the crashing call succeeded")
	}
	for range 4 {
		if o := recvT(t, outcomes); o.err == nil {
			t.Errorf("%s: no error after the crash", o.name)
		}
	}
	recvT(t, ev.changed) // ready again
	if text, err, doneFirst := call("after", true); err != nil || text != "after" || !doneFirst {
		t.Errorf("after the restart: %q %v (done before return: %v)", text, err, doneFirst)
	}
}
