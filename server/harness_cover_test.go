package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// The in-memory harness of the server's own tests: a fake upstream the router routes
// to, a router built around fakes, and a client that speaks to ServeStream over pipes.

// waitFor bounds every wait of these tests: generous, so a loaded machine does not fail
// them, and only ever reached when something is broken.
const waitFor = 10 * time.Second

// memUpstream is an in-memory router.Upstream. Every request is recorded and answered
// on a goroutine of its own (as a real upstream answers from its reader) by serve.
type memUpstream struct {
	name string
	info upstream.Info
	cat  *upstream.Catalogue
	// serve answers one request; nil answers every request with {"ok":"<name>"}.
	serve func(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error)

	mu     sync.Mutex
	reqs   []*upstream.Request
	notes  []string // methods of the notifications the upstream received
	caps   json.RawMessage
	legacy bool
	starts int
	wg     sync.WaitGroup // serve goroutines
}

var _ router.Upstream = (*memUpstream)(nil)

func newMemUpstream(name string, tools ...string) *memUpstream {
	u := &memUpstream{name: name, cat: &upstream.Catalogue{},
		info: upstream.Info{ProtocolVersion: "2025-11-25", Capabilities: json.RawMessage(`{"tools":{}}`)}}
	for _, t := range tools {
		u.cat.Tools = append(u.cat.Tools, json.RawMessage(`{"name":"`+t+`","inputSchema":{"type":"object"}}`))
	}
	return u
}

func (u *memUpstream) Name() string { return u.name }
func (u *memUpstream) Start(context.Context) {
	u.mu.Lock()
	u.starts++
	u.mu.Unlock()
}
func (u *memUpstream) WaitFirstAttempt(context.Context) error { return nil }
func (u *memUpstream) Close() error                           { u.wg.Wait(); return nil }
func (u *memUpstream) State() (upstream.State, error)         { return upstream.StateReady, nil }
func (u *memUpstream) Info() upstream.Info                    { return u.info }
func (u *memUpstream) Catalogue() *upstream.Catalogue         { return u.cat }
func (u *memUpstream) Cork() func()                           { return func() {} }
func (u *memUpstream) SetClientCapabilities(caps json.RawMessage) {
	u.mu.Lock()
	u.caps = caps
	u.mu.Unlock()
}
func (u *memUpstream) SetPreferLegacy(legacy bool) {
	u.mu.Lock()
	u.legacy = legacy
	u.mu.Unlock()
}
func (u *memUpstream) ListAll(context.Context, string, string) ([]json.RawMessage, error) {
	return nil, nil
}

func (u *memUpstream) Notify(method string, _ json.RawMessage) error {
	u.mu.Lock()
	u.notes = append(u.notes, method)
	u.mu.Unlock()
	return nil
}

func (u *memUpstream) Send(ctx context.Context, req *upstream.Request, done func(*jsonrpc.Message, error)) {
	u.mu.Lock()
	u.reqs = append(u.reqs, req)
	u.mu.Unlock()
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		if u.serve == nil {
			done(jsonrpc.NewResult(jsonrpc.IntID(1), json.RawMessage(`{"ok":"`+u.name+`"}`)), nil)
			return
		}
		done(u.serve(ctx, req))
	}()
}

func (u *memUpstream) Call(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
	type res struct {
		m   *jsonrpc.Message
		err error
	}
	ch := make(chan res, 1)
	u.Send(ctx, req, func(m *jsonrpc.Message, err error) { ch <- res{m, err} })
	r := <-ch
	return r.m, r.err
}

// requests returns the methods the upstream was sent, in order.
func (u *memUpstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, r := range u.reqs {
		out = append(out, r.Method)
	}
	return out
}

func (u *memUpstream) notifications() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.notes...)
}

// result answers with a result.
func result(s string) (*jsonrpc.Message, error) {
	return jsonrpc.NewResult(jsonrpc.IntID(1), json.RawMessage(s)), nil
}

// testLog logs warnings and worse through t.
func testLog(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
}

// newMemRouter builds a router over the upstreams (namespaced by their names) with its
// merged catalogue built; it is closed when the test ends.
func newMemRouter(t *testing.T, ups ...*memUpstream) *router.Router {
	t.Helper()
	noLeaks(t)
	r := router.New(router.Options{NotifyDelay: time.Millisecond}, testLog(t))
	for _, u := range ups {
		r.Add(u, u.name)
	}
	rebuild(t, r)
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("router close: %v", err)
		}
	})
	return r
}

// rebuild makes the router rebuild its merged catalogue from its upstreams, as it does
// when an upstream reports a change: the reporting upstream only needs to exist.
func rebuild(t *testing.T, r *router.Router) {
	r.Events().Changed(bystander(t), 0)
}

// bystander is a real upstream that is never started: events credited to it reach the
// router as from an upstream it does not know.
func bystander(t *testing.T) *upstream.Upstream {
	return upstream.New(upstream.Spec{Name: "bystander"}, testLog(t), nil)
}

// wireMsg is any message as a client reads it.
type wireMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func (m wireMsg) code() int64 {
	if m.Error == nil {
		return 0
	}
	return m.Error.Code
}

// stdioClient is a client of ServeStream over pipes.
type stdioClient struct {
	t      *testing.T
	in     *io.PipeWriter
	lines  chan string
	served chan error
	cancel context.CancelFunc
	closed bool
}

// dialStdio serves a session of srv to a new client; it ends with the test.
func dialStdio(t *testing.T, srv *Server) *stdioClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &stdioClient{t: t, in: inW, lines: make(chan string, 256), served: make(chan error, 1), cancel: cancel}
	go func() {
		c.served <- srv.ServeStream(ctx, inR, outW)
		outW.Close()
	}()
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(c.close)
	return c
}

func (c *stdioClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("writing to the server: %v", err)
	}
}

// nextLine returns the next line the server wrote.
func (c *stdioClient) nextLine() string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatal("the server closed its output")
		}
		return l
	case <-time.After(waitFor):
		c.t.Fatal("no message from the server")
	}
	return ""
}

// next returns the next message the server wrote.
func (c *stdioClient) next() wireMsg {
	c.t.Helper()
	l := c.nextLine()
	var m wireMsg
	if err := json.Unmarshal([]byte(l), &m); err != nil {
		c.t.Fatalf("not a message: %s", l)
	}
	return m
}

// call sends a request and returns the next message, which must answer it.
func (c *stdioClient) call(line string) wireMsg {
	c.t.Helper()
	c.send(line)
	m := c.next()
	var sent wireMsg
	_ = json.Unmarshal([]byte(line), &sent)
	if string(m.ID) != string(sent.ID) {
		c.t.Fatalf("answer to %s, want one to %s: %+v", m.ID, sent.ID, m)
	}
	return m
}

// sync proves everything sent before it has been handled: ping is answered in order.
func (c *stdioClient) sync() {
	c.t.Helper()
	if m := c.call(`{"jsonrpc":"2.0","id":"sync","method":"ping"}`); m.Error != nil {
		c.t.Fatalf("ping: %+v", m.Error)
	}
}

func (c *stdioClient) initialize(version, caps string) wireMsg {
	c.t.Helper()
	return c.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":` + caps + `,"clientInfo":{"name":"test","version":"1"}}}`)
}

// close ends the input and waits for ServeStream to return.
func (c *stdioClient) close() {
	if c.closed {
		return
	}
	c.closed = true
	c.in.Close()
	select {
	case err := <-c.served:
		if err != nil {
			c.t.Errorf("ServeStream: %v", err)
		}
	case <-time.After(waitFor):
		c.t.Error("ServeStream did not return after its input ended")
	}
	c.cancel()
	for range c.lines {
	}
}

// modernMeta is the _meta of a modern request from a client with caps.
func modernMetaJSON(caps string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps +
		`,"io.modelcontextprotocol/clientInfo":{"name":"m","version":"1"}}`
}

// contains fails the test when s lacks any of subs.
func contains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s: %s lacks %s", what, s, sub)
		}
	}
}

// recv returns the next value from ch, failing the test when none comes.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatal("nothing came")
	}
	var zero T
	return zero
}

// noLeaks fails the test when it leaves goroutines behind (see leaktest.Check).
func noLeaks(t *testing.T) { leaktest.Check(t, waitFor) }
