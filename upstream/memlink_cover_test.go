package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// The in-memory harness of these tests: a transport.Link whose other end is a scripted
// server running in the test, and an Upstream whose connection runs over it.

// waitFor bounds every wait: generous, and only reached when something is broken.
const waitFor = 10 * time.Second

// linkRead is one result of ReadLine.
type linkRead struct {
	line []byte
	err  error
}

// memLink is a transport.Link to a server in the test: what the proxy writes arrives on
// out, and what the server says is queued with push.
type memLink struct {
	in  chan linkRead
	out chan *jsonrpc.Message

	mu        sync.Mutex
	done      chan struct{}
	stopped   bool
	writeErr  error  // when set, Write fails with it
	version   string // from SetProtocolVersion
	corked    int
	failed    func(jsonrpc.ID, error)      // from OnRequestFailure
	headers   []map[string]string          // from Exchange (exchangeLink)
	exchanges map[string]func(line []byte) // a request's own answer, by its raw id (exchangeLink)
	aborted   chan string                  // raw ids of the exchanges ended by the proxy (exchangeLink)
}

func newMemLink() *memLink {
	return &memLink{in: make(chan linkRead, 1024), out: make(chan *jsonrpc.Message, 1024), done: make(chan struct{}),
		exchanges: map[string]func([]byte){}, aborted: make(chan string, 64)}
}

var (
	_ transport.Link          = (*memLink)(nil)
	_ transport.RequestFailer = (*memLink)(nil)
	_ transport.Exchanger     = exchangeLink{}
)

func (l *memLink) Write(m *jsonrpc.Message) error {
	l.mu.Lock()
	err := l.writeErr
	l.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case <-l.done:
		return io.ErrClosedPipe
	default:
	}
	c := *m
	l.out <- &c
	return nil
}

func (l *memLink) ReadLine() ([]byte, error) {
	select {
	case r := <-l.in:
		return r.line, r.err
	case <-l.done:
		return nil, io.EOF
	}
}

func (l *memLink) Buffered() int { return len(l.in) }
func (l *memLink) Cork() {
	l.mu.Lock()
	l.corked++
	l.mu.Unlock()
}
func (l *memLink) Uncork() error {
	l.mu.Lock()
	l.corked--
	l.mu.Unlock()
	return nil
}
func (l *memLink) Done() <-chan struct{} { return l.done }
func (l *memLink) ExitErr() error        { return errors.New("link stopped") }
func (l *memLink) Stop(time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.stopped = true
		close(l.done)
	}
	return nil
}
func (l *memLink) Describe() string { return "memory" }
func (l *memLink) SetProtocolVersion(v string) {
	l.mu.Lock()
	l.version = v
	l.mu.Unlock()
}
func (l *memLink) OnRequestFailure(f func(jsonrpc.ID, error)) {
	l.mu.Lock()
	l.failed = f
	l.mu.Unlock()
}

// push queues a line from the server.
func (l *memLink) push(line string) { l.in <- linkRead{line: []byte(line)} }

// exchangeLink is a memLink whose requests are exchanges of their own, as HTTP's: it
// records each request's headers, and answerOn sends a line on one request's own answer.
type exchangeLink struct{ *memLink }

func (l exchangeLink) Exchange(m *jsonrpc.Message, h map[string]string, onMessage func([]byte), abortable func(abort func())) error {
	l.mu.Lock()
	l.headers = append(l.headers, h)
	if m.IsRequest() {
		l.exchanges[m.ID.Raw()] = onMessage
	}
	l.mu.Unlock()
	if abortable != nil && m.IsRequest() {
		var once sync.Once
		id := m.ID.Raw()
		abortable(func() { once.Do(func() { l.aborted <- id }) })
	}
	return l.Write(m)
}

// answerOn hands line to the exchange of the request with raw id.
func (l *memLink) answerOn(id, line string) {
	l.mu.Lock()
	on := l.exchanges[id]
	l.mu.Unlock()
	on([]byte(line))
}

// script answers one message from the proxy with the lines to send back (nil: none).
type script func(m *jsonrpc.Message) []string

// reply is a response line to m with a result.
func reply(m *jsonrpc.Message, result string) []string {
	return []string{`{"jsonrpc":"2.0","id":` + m.ID.Raw() + `,"result":` + result + `}`}
}

// replyErr is a response line to m with an error.
func replyErr(m *jsonrpc.Message, code int, msg string) []string {
	return []string{`{"jsonrpc":"2.0","id":` + m.ID.Raw() + `,"error":{"code":` + itoa(code) + `,"message":"` + msg + `"}}`}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// catalogueKeys are the catalogue's list methods and the key of their items.
var catalogueKeys = map[string]string{"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources",
	"resources/templates/list": "resourceTemplates"}

// legacyServer refuses server/discover as a legacy server does, answers initialize with
// caps and each catalogue list from lists (an empty list when it has none); other
// messages go to rest (nil: unanswered).
func legacyServer(caps string, lists map[string]string, rest script) script {
	return func(m *jsonrpc.Message) []string {
		switch {
		case m.Method == "server/discover":
			return replyErr(m, jsonrpc.CodeMethodNotFound, "Method not found")
		case m.Method == "initialize":
			return reply(m, `{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"serverInfo":{"name":"mem","version":"1"},"instructions":"be nice"}`)
		case lists[m.Method] != "":
			return reply(m, lists[m.Method])
		}
		if rest != nil {
			if out := rest(m); out != nil {
				return out
			}
		}
		if m.IsRequest() && catalogueKeys[m.Method] != "" {
			return reply(m, `{"`+catalogueKeys[m.Method]+`":[]}`)
		}
		return nil
	}
}

// recEvents records what an upstream reports, on channels.
type recEvents struct {
	changed  chan Kinds
	notes    chan *jsonrpc.Message
	requests chan *jsonrpc.Message
	answer   func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error)
	holds    chan struct{}
}

func newRecEvents() *recEvents {
	return &recEvents{changed: make(chan Kinds, 64), notes: make(chan *jsonrpc.Message, 64),
		requests: make(chan *jsonrpc.Message, 64), holds: make(chan struct{}, 1024)}
}

func (e *recEvents) Changed(_ *Upstream, k Kinds)                 { e.changed <- k }
func (e *recEvents) Notification(_ *Upstream, m *jsonrpc.Message) { e.notes <- m }
func (e *recEvents) Hold() func() {
	select {
	case e.holds <- struct{}{}:
	default:
	}
	return func() {}
}
func (e *recEvents) Request(ctx context.Context, _ *Upstream, m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
	e.requests <- m
	if e.answer == nil {
		return json.RawMessage(`{"answered":true}`), nil
	}
	return e.answer(ctx, m)
}

// memUp is an Upstream connected over a memLink to a scripted server.
type memUp struct {
	*Upstream
	link *memLink
	seen chan *jsonrpc.Message // every message the server received (room for far more than a test sends)
	log  *lockedBuffer
}

// startMem starts an upstream whose Spec.Dial opens link (nil: a plain memLink) to the
// scripted server srv, and waits for its first start attempt, whose error it returns.
// The upstream is not restarted within a test. Everything ends with the test.
func startMem(t *testing.T, spec Spec, ev Events, srv script, link transport.Link) (*memUp, error) {
	t.Helper()
	noLeaks(t)
	if spec.Name == "" {
		spec.Name = "mem"
	}
	if ev == nil {
		ev = nopEvents{}
	}
	if link == nil {
		link = newMemLink()
	}
	ml, ok := link.(*memLink)
	if !ok {
		ml = link.(exchangeLink).memLink
	}
	dialled := false
	spec.Dial = func(context.Context) (transport.Link, error) {
		if dialled {
			return nil, errors.New("the test's link was dialled twice")
		}
		dialled = true
		return link, nil
	}
	spec.BackoffMin = time.Hour
	logs := &lockedBuffer{}
	u := New(spec, zerolog.New(logs), ev)
	m := &memUp{Upstream: u, link: ml, seen: make(chan *jsonrpc.Message, 1<<14), log: logs}
	served := make(chan struct{})
	go func() { // the server, until the link stops
		defer close(served)
		for {
			select {
			case msg := <-ml.out:
				m.seen <- msg
				for _, l := range srv(msg) {
					ml.push(l)
				}
			case <-ml.done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		u.Close()
		ml.Stop(0) // in case the upstream never used it
		<-served
		if t.Failed() {
			t.Logf("upstream log:\n%s", logs)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	u.Start(context.Background())
	return m, u.WaitFirstAttempt(ctx)
}

// next returns the next message the server received with the given method ("" for a
// response), skipping others.
func (m *memUp) next(t *testing.T, method string) *jsonrpc.Message {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case msg := <-m.seen:
			if msg.Method == method {
				return msg
			}
		case <-deadline:
			t.Fatalf("the server received no %q", method)
			return nil
		}
	}
}

// nextWith is next for a message whose params contain substr.
func (m *memUp) nextWith(t *testing.T, method, substr string) *jsonrpc.Message {
	t.Helper()
	for {
		if msg := m.next(t, method); strings.Contains(string(msg.Params), substr) {
			return msg
		}
	}
}

// recvT returns the next value of ch, failing the test when none comes.
func recvT[T any](t *testing.T, ch <-chan T) T {
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

// outcome is what a Send's done got.
type outcome struct {
	msg *jsonrpc.Message
	err error
}

// sendAsync sends req and returns where its outcome arrives.
func (m *memUp) sendAsync(ctx context.Context, req *Request) <-chan outcome {
	ch := make(chan outcome, 1)
	m.Send(ctx, req, func(msg *jsonrpc.Message, err error) { ch <- outcome{msg, err} })
	return ch
}

// proxyCode returns the code of a *jsonrpc.Error (0 for none or another error).
func proxyCode(err error) int64 {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Code
	}
	return 0
}
