package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// SSELink speaks the legacy HTTP+SSE transport (2024-11-05): one GET stream carries
// every server message, and the first event names the URL to POST client messages to.
type SSELink struct {
	spec   HTTPSpec
	client *http.Client
	ctx    context.Context
	cancel context.CancelFunc
	post   string // from the endpoint event

	in        chan []byte
	done      chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex // guards err
	err       error
	wg        sync.WaitGroup
	failureSink
}

var (
	_ Link          = (*SSELink)(nil)
	_ RequestFailer = (*SSELink)(nil)
)

// DialSSE opens the event stream and waits (up to timeout) for the endpoint event.
func DialSSE(spec HTTPSpec, timeout time.Duration) (*SSELink, error) {
	if spec.MaxMessage <= 0 {
		spec.MaxMessage = jsonrpc.DefaultMaxMessageSize
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &SSELink{spec: spec, client: &http.Client{Transport: sharedTransport}, ctx: ctx, cancel: cancel,
		in: make(chan []byte, 1024), done: make(chan struct{})}
	get := func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, spec.URL, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "text/event-stream")
		for k, v := range spec.Headers {
			req.Header.Set(k, v)
		}
		return req, nil
	}
	sent, err := l.token(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := l.send(get, sent)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("opening the SSE stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: HTTP %d %s, not an event stream", spec.URL, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	endpoint := make(chan string, 1)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer resp.Body.Close()
		readEvents(resp.Body, func(event string, data []byte) {
			switch event {
			case "endpoint":
				select {
				case endpoint <- string(data):
				default:
				}
			case "", "message":
				select {
				case l.in <- data:
				case <-ctx.Done():
				}
			}
		})
		l.fail(errors.New("the SSE stream ended"))
	}()
	select {
	case ep := <-endpoint:
		base, _ := url.Parse(spec.URL)
		ref, err := url.Parse(ep)
		if err != nil {
			l.Stop(0)
			return nil, fmt.Errorf("endpoint event %q: %w", ep, err)
		}
		l.post = base.ResolveReference(ref).String()
		return l, nil
	case <-l.done:
		l.Stop(0)
		return nil, errors.New("the SSE stream ended before its endpoint event")
	case <-time.After(timeout):
		l.Stop(0)
		return nil, fmt.Errorf("no endpoint event from %s within %s", spec.URL, timeout)
	}
}

// streamEnd is what an SSE stream said about resuming it: the id of the last event
// received whole (for Last-Event-ID) and the retry delay the server asked for (0 when it
// did not); and err, why it ended (nil at its clean end).
type streamEnd struct {
	lastID string
	retry  time.Duration
	err    error
}

// readEvents calls fn for every event of an SSE stream until it ends. An event counts
// only once its blank line has come: at the stream's end (clean or cut short) what came
// of an event without it is dropped, as the SSE specification says ("If the file ends in
// the middle of an event, before the final empty line, the incomplete event is not
// dispatched"), and so is its id, so that a resumption starts after the last whole
// event. A stream cut in the middle of a message must not hand the message's first part
// on as if it were the message.
func readEvents(r io.Reader, fn func(event string, data []byte)) (end streamEnd) {
	br := bufio.NewReaderSize(r, 64<<10)
	var data bytes.Buffer
	event, id, haveID := "", "", false
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			// The last line, if any, has no terminator: it and the event it belongs to
			// are incomplete.
			if err != io.EOF {
				end.err = err
			}
			return end
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if haveID {
				end.lastID = id
			}
			if data.Len() > 0 {
				fn(event, append([]byte(nil), data.Bytes()...))
			}
			data.Reset()
			event, haveID = "", false
		case bytes.HasPrefix(line, []byte("id:")):
			id, haveID = string(bytes.TrimSpace(bytes.TrimPrefix(line, []byte("id:")))), true
		case bytes.HasPrefix(line, []byte("retry:")):
			if ms, err := strconv.Atoi(string(bytes.TrimSpace(bytes.TrimPrefix(line, []byte("retry:"))))); err == nil && ms >= 0 {
				end.retry = time.Duration(ms) * time.Millisecond
			}
		case bytes.HasPrefix(line, []byte("data:")):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.Write(bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" ")))
		case bytes.HasPrefix(line, []byte("event:")):
			event = string(bytes.TrimSpace(bytes.TrimPrefix(line, []byte("event:"))))
		}
	}
}

// Write implements Link: the message is POSTed to the endpoint; the answer comes on the
// stream.
func (l *SSELink) Write(m *jsonrpc.Message) error {
	select {
	case <-l.done:
		return fmt.Errorf("SSE link to %s is closed", l.spec.URL)
	default:
	}
	body, err := m.Encode()
	if err != nil {
		return err
	}
	post := func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(l.ctx, http.MethodPost, l.post, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range l.spec.Headers {
			req.Header.Set(k, v)
		}
		setTraceHeaders(req.Header, m)
		return req, nil
	}
	sent, err := l.token(l.ctx) // a principal without a usable credential fails the call now
	if err != nil {
		return err
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		resp, err := l.send(post, sent)
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode < 300 {
				return
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		if l.ctx.Err() == nil {
			l.requestFailed(m, fmt.Errorf("POST to %s failed: %w", l.post, err))
		}
	}()
	return nil
}

// ReadLine implements Link.
func (l *SSELink) ReadLine() ([]byte, error) {
	select {
	case b := <-l.in:
		return b, nil
	case <-l.done:
		select {
		case b := <-l.in:
			return b, nil
		default:
		}
		return nil, io.EOF
	}
}

func (l *SSELink) fail(err error) {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.done)
	})
}

// Stop implements Link.
func (l *SSELink) Stop(time.Duration) error {
	l.cancel()
	l.fail(errors.New("closed"))
	l.wg.Wait()
	return nil
}

// Buffered implements Link.
func (l *SSELink) Buffered() int { return len(l.in) }

// Done implements Link.
func (l *SSELink) Done() <-chan struct{} { return l.done }

// ExitErr implements Link.
func (l *SSELink) ExitErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Describe implements Link.
func (l *SSELink) Describe() string { return l.spec.URL + " (HTTP+SSE)" }

// token is the Authorization requests carry now (HTTPSpec.Authorizer; nil: none).
func (l *SSELink) token(ctx context.Context) (*Bearer, error) {
	if l.spec.Authorizer == nil {
		return nil, nil
	}
	return l.spec.Authorizer.Authorization(ctx)
}

// send sends the request mk makes with token sent. An answer that asks for (more)
// authorization (401, or 403 insufficient_scope) has the Authorizer renew the token
// (a re-exchange, a refresh: once however many requests were refused) and the request
// made and sent again, once, with the new token; an answer that takes it says so
// (Accepted).
func (l *SSELink) send(mk func() (*http.Request, error), sent *Bearer) (*http.Response, error) {
	req, err := mk()
	if err != nil {
		return nil, err
	}
	if sent != nil {
		req.Header["Authorization"] = sent.Header
	}
	resp, err := l.client.Do(req)
	a := l.spec.Authorizer
	if err != nil || a == nil || !wantsAuthorization(resp.StatusCode, resp.Header) {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if err := a.Renew(req.Context(), resp.StatusCode, resp.Header, sent); err != nil {
		return nil, fmt.Errorf("authorizing with the upstream: %w", err)
	}
	t, err := a.Authorization(req.Context())
	if err != nil {
		return nil, err
	}
	if req, err = mk(); err != nil {
		return nil, err
	}
	if t != nil {
		req.Header["Authorization"] = t.Header
	}
	if resp, err = l.client.Do(req); err == nil && resp.StatusCode < 300 {
		a.Accepted()
	}
	return resp, err
}
