package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/h1client"
	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// HTTPSpec describes a Streamable HTTP upstream.
type HTTPSpec struct {
	URL        string
	Headers    map[string]string // sent on every request (the upstream's own credentials)
	MaxMessage int
	// OAuth authorizes the link when the upstream answers 401 (or 403 insufficient_scope);
	// nil: no authorization flow (a 401 fails the request).
	OAuth *OAuth
	// Authorizer, when set, gives every request its Authorization instead of OAuth: a
	// principal's own credential (package credential). A request it has no token for
	// fails without being sent.
	Authorizer Authorizer
}

// HTTPLink speaks Streamable HTTP to one upstream: every message is a POST; the answer
// (JSON, or an SSE stream carrying related messages before the response) is queued for
// ReadLine. A legacy session's id is kept and sent back, the server's GET stream is
// followed when it offers one, and a 404 for the session ends the link (so the upstream
// is re-initialized). Connections are pooled and reused.
type HTTPLink struct {
	spec   HTTPSpec
	client *http.Client
	// post is the template of every POST (the URL parsed once, the link's context); nil
	// when the URL does not parse (Exchange then reports the error).
	postTmpl *http.Request
	headers  http.Header // spec.Headers with canonical keys, shared read-only by every request
	lean     *leanPost   // the lean path of POSTs (httplean.go), or nil
	authz    Authorizer  // spec.Authorizer, else spec.OAuth; nil: none
	ctx      context.Context
	cancel   context.CancelFunc

	in chan []byte // messages from the server, in arrival order

	mu        sync.Mutex // guards session, version, getting, err
	session   string
	version   string
	getting   bool
	getReady  chan struct{} // closed once the first GET stream attempt has its answer
	getOnce   sync.Once
	err       error
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // in-flight POSTs and the GET stream

	liveMu   sync.Mutex                 // guards live, stopping
	live     map[*leanExchange]struct{} // lean POSTs in flight
	stopping bool                       // Stop has aborted them: no more start
	failureSink
}

var (
	_ Link            = (*HTTPLink)(nil)
	_ RequestFailer   = (*HTTPLink)(nil)
	_ VersionCarrier  = (*HTTPLink)(nil)
	_ Exchanger       = (*HTTPLink)(nil)
	_ InlineExchanger = (*HTTPLink)(nil)
)

// sharedTransport pools connections across upstreams: Go's default keeps two idle
// connections per host, far too few for a proxy.
var sharedTransport = &http.Transport{
	Proxy:               http.ProxyFromEnvironment,
	DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConns:        1024,
	MaxIdleConnsPerHost: 256,
	IdleConnTimeout:     90 * time.Second,
	ForceAttemptHTTP2:   true,
}

// leanTransport carries plain-http requests to upstreams with the lean HTTP/1.1 client
// (no goroutine pair per connection, no header sorting); anything else it hands to
// sharedTransport.
var leanTransport = &h1client.Transport{Fallback: sharedTransport, MaxIdlePerHost: 256, IdleTimeout: 90 * time.Second}

// transportFor picks the client for an upstream URL: the lean one for plain http that
// no proxy from the environment (HTTP_PROXY, NO_PROXY) applies to; net/http (HTTP/2 over
// TLS, proxies) for the rest.
func transportFor(rawURL string) http.RoundTripper {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return sharedTransport
	}
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err != nil || p != nil {
		return sharedTransport
	}
	return leanTransport
}

// DialHTTP returns a link to a Streamable HTTP endpoint; nothing is sent yet.
func DialHTTP(spec HTTPSpec) *HTTPLink {
	ctx, cancel := context.WithCancel(context.Background())
	if spec.MaxMessage <= 0 {
		spec.MaxMessage = jsonrpc.DefaultMaxMessageSize
	}
	l := &HTTPLink{spec: spec, client: &http.Client{Transport: transportFor(spec.URL)}, ctx: ctx, cancel: cancel,
		in: make(chan []byte, 1024), done: make(chan struct{}), getReady: make(chan struct{})}
	switch {
	case spec.Authorizer != nil:
		l.authz = spec.Authorizer
	case spec.OAuth != nil:
		l.authz = spec.OAuth
	}
	if req, err := http.NewRequestWithContext(ctx, http.MethodPost, spec.URL, nil); err == nil {
		l.postTmpl = req
	}
	l.headers = make(http.Header, len(spec.Headers))
	for k, v := range spec.Headers {
		l.headers.Set(k, v)
	}
	l.lean = newLeanPost(spec.URL, l.headers, l.authz)
	return l
}

// Header values shared by every POST; nothing appends to them.
var (
	jsonContentType = []string{"application/json"}
	acceptBoth      = []string{"application/json, text/event-stream"}
)

// newPost makes the POST of one message, under ctx: a copy of the link's template (no URL
// parse per request) with its own header map, whose keys are set in canonical form.
func (l *HTTPLink) newPost(ctx context.Context, body []byte) (*http.Request, error) {
	if l.postTmpl == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.spec.URL, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header["Content-Type"] = jsonContentType
		req.Header["Accept"] = acceptBoth
		return req, nil
	}
	req := l.postTmpl.WithContext(ctx) // a shallow copy: the parsed URL is shared, nothing changes it
	req.Header = make(http.Header, 6+len(l.headers))
	req.Header["Content-Type"] = jsonContentType
	req.Header["Accept"] = acceptBoth
	req.ContentLength = int64(len(body))
	if len(body) == 0 {
		req.Body = http.NoBody
	} else {
		req.Body = h1client.NewBody(body) // the lean client writes these bytes without a copy
	}
	if l.authz != nil {
		// A retry after authorizing sends the body again.
		req.GetBody = func() (io.ReadCloser, error) { return h1client.NewBody(body), nil }
	}
	return req, nil
}

// Describe implements Link.
func (l *HTTPLink) Describe() string { return l.spec.URL }

// SetProtocolVersion implements VersionCarrier: the version goes in MCP-Protocol-Version.
func (l *HTTPLink) SetProtocolVersion(v string) {
	l.mu.Lock()
	l.version = v
	l.mu.Unlock()
}

// Done implements Link.
func (l *HTTPLink) Done() <-chan struct{} { return l.done }

// ExitErr implements Link.
func (l *HTTPLink) ExitErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Buffered implements Link.
func (l *HTTPLink) Buffered() int { return len(l.in) }

// ReadLine implements Link.
func (l *HTTPLink) ReadLine() ([]byte, error) {
	select {
	case b := <-l.in:
		return b, nil
	case <-l.done:
		select { // drain what arrived before the end
		case b := <-l.in:
			return b, nil
		default:
		}
		return nil, io.EOF
	}
}

func (l *HTTPLink) fail(err error) {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.done)
	})
}

// Write implements Link: the message is POSTed, and what its answer carries is queued
// for ReadLine.
func (l *HTTPLink) Write(m *jsonrpc.Message) error { return l.Exchange(m, nil, nil, nil) }

// Exchange implements Exchanger: m is POSTed with the extra headers (the Mcp-Param-*
// mirrors of tool arguments), and every message its answer carries (JSON, or the event
// stream of related messages before the response, resumed if it breaks) goes to
// onMessage in order, on the exchange's own goroutine; nil onMessage queues them for
// ReadLine. A request's exchange runs in the background; a notification or response is
// posted before Exchange returns (a server must see notifications/initialized before the
// first call). abortable, when set, is given what cancels a request's POST.
func (l *HTTPLink) Exchange(m *jsonrpc.Message, extra map[string]string, onMessage func(line []byte), abortable func(abort func())) error {
	return l.exchange(m, extra, onMessage, false, abortable)
}

// ExchangeInline implements InlineExchanger: Exchange, with a request's exchange run on
// the calling goroutine until its answer is handled; abortable gets what cancels its
// POST.
func (l *HTTPLink) ExchangeInline(m *jsonrpc.Message, extra map[string]string, onMessage func(line []byte), abortable func(abort func())) error {
	return l.exchange(m, extra, onMessage, true, abortable)
}

func (l *HTTPLink) exchange(m *jsonrpc.Message, extra map[string]string, onMessage func(line []byte), inline bool, abortable func(abort func())) error {
	if onMessage == nil {
		onMessage = l.push
	}
	select {
	case <-l.done:
		return fmt.Errorf("http link to %s is closed", l.spec.URL)
	default:
	}
	if l.lean != nil && len(extra) == 0 {
		return l.exchangeLean(m, onMessage, inline, abortable)
	}
	body, err := m.Encode()
	if err != nil {
		return err
	}
	ctx := l.ctx
	cancel := context.CancelFunc(func() {})
	if abortable != nil && m.IsRequest() {
		ctx, cancel = context.WithCancel(l.ctx)
		abortable(cancel)
	}
	req, err := l.buildPost(ctx, m, body, extra)
	if err != nil {
		cancel()
		return err
	}
	l.wg.Add(1)
	if inline || !m.IsRequest() {
		defer l.wg.Done()
		defer cancel()
		l.post(req, m, onMessage)
		return nil
	}
	go func() {
		defer l.wg.Done()
		defer cancel()
		l.post(req, m, onMessage)
	}()
	return nil
}

// buildPost makes the POST of m (body is its encoding) under ctx, with every header it
// carries.
func (l *HTTPLink) buildPost(ctx context.Context, m *jsonrpc.Message, body []byte, extra map[string]string) (*http.Request, error) {
	req, err := l.newPost(ctx, body)
	if err != nil {
		return nil, err
	}
	l.setHeaders(req)
	// The 2026-07-28 request headers mirror the body; servers of earlier versions ignore
	// them.
	if m.Method != "" {
		req.Header["Mcp-Method"] = []string{m.Method}
		if key := nameParam(m.Method); key != "" {
			if name, ok, _ := jsonx.GetString(m.Params, key); ok {
				req.Header["Mcp-Name"] = []string{mcp.EncodeHeaderValue(name)}
			}
		}
	}
	setTraceHeaders(req.Header, m)
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	return req, nil
}

// nameParam is the parameter whose string value a request of method carries in its
// Mcp-Name header ("" for a method without one).
func nameParam(method string) string {
	switch method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		return "name"
	case mcp.MethodResourcesRead:
		return "uri"
	}
	return ""
}

func (l *HTTPLink) setHeaders(req *http.Request) {
	for k, v := range l.headers {
		req.Header[k] = v
	}
	if l.authz != nil {
		if b, _ := l.authz.Authorization(l.ctx); b != nil {
			req.Header["Authorization"] = b.Header
		}
	}
	l.mu.Lock()
	if l.session != "" {
		req.Header["Mcp-Session-Id"] = []string{l.session}
	}
	if l.version != "" {
		req.Header["Mcp-Protocol-Version"] = []string{l.version} // canonical key: no per-request canonicalisation
	}
	l.mu.Unlock()
}

// post sends one message and hands what comes back to emit.
func (l *HTTPLink) post(req *http.Request, m *jsonrpc.Message, emit func([]byte)) {
	sent, err := l.tokenToSend()
	if err != nil {
		l.postFailed(m, err)
		return
	}
	if sent != nil {
		// Again, as setHeaders did at Write: the token may have changed since, and a 401
		// must be matched with the token actually sent.
		req.Header["Authorization"] = sent.Header
	}
	resp, err := l.client.Transport.RoundTrip(req) // no redirects or cookies to follow: skip http.Client's machinery on the hot path
	if err == nil && l.authz != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		resp, err = l.reauthorize(req, resp, sent)
	}
	l.finishPost(req, resp, err, m, emit)
}

// finishPost hands on the outcome of m's net/http-shaped POST: its answer, or its failure.
func (l *HTTPLink) finishPost(req *http.Request, resp *http.Response, err error, m *jsonrpc.Message, emit func([]byte)) {
	if err != nil {
		l.postFailed(m, err)
		return
	}
	defer resp.Body.Close()
	l.handleAnswer(answerOf(resp), m, emit, req.Context)
}

// postFailed fails m's request, whose POST got no answer, unless the link is closing.
func (l *HTTPLink) postFailed(m *jsonrpc.Message, err error) {
	if l.ctx.Err() == nil && m.IsRequest() {
		l.failRequest(m, fmt.Errorf("HTTP request to %s failed: %w", l.spec.URL, err))
	}
}

// tokenToSend returns the token a POST is to carry (see Authorizer.Authorization); nil
// when there is none (or no authorizer), an error when the request must not go.
func (l *HTTPLink) tokenToSend() (*Bearer, error) {
	if l.authz == nil {
		return nil, nil
	}
	return l.authz.Authorization(l.ctx)
}

// postAnswer is what the link reads of the answer to a POST, whichever client read it.
// session is the answer's Mcp-Session-Id, read before the body.
type postAnswer struct {
	status  int
	session string
	stream  bool // an event stream
	length  int64
	body    io.Reader
}

// answerOf is what the link reads of a net/http-shaped answer.
func answerOf(resp *http.Response) postAnswer {
	return postAnswer{
		status:  resp.StatusCode,
		session: resp.Header.Get("Mcp-Session-Id"),
		stream:  strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"),
		length:  resp.ContentLength,
		body:    resp.Body,
	}
}

// handleAnswer takes in the answer to m's POST and hands what it carries to emit.
// reqCtx gives the exchange's context (called only when an answer stream is to be
// resumed or found cut short).
func (l *HTTPLink) handleAnswer(a postAnswer, m *jsonrpc.Message, emit func([]byte), reqCtx func() context.Context) {
	if a.session != "" {
		setSession(l, a.session)
	}
	switch {
	case a.status == http.StatusAccepted:
		return
	case a.status == http.StatusNotFound && l.hasSession():
		// The server ended our session: this link is done; the upstream re-initializes.
		l.fail(errors.New("the upstream ended its HTTP session (404)"))
		return
	}
	if a.stream {
		l.readAnswerStream(reqCtx, a.body, m, emit)
		return
	}
	b, err := readAnswer(a.length, a.body, l.spec.MaxMessage)
	switch {
	case err != nil:
		l.failRequest(m, fmt.Errorf("reading the answer from %s: %w", l.spec.URL, err))
	case len(b) > l.spec.MaxMessage:
		l.failRequest(m, fmt.Errorf("%w: the answer from %s exceeds %d bytes", jsonrpc.ErrMessageTooLarge, l.spec.URL, l.spec.MaxMessage))
	case a.status >= 400 && m.IsRequest() && jsonish(b):
		// An HTTP error whose body is a JSON-RPC error without an id (the spec lets
		// a server answer so): it is the answer to this request.
		if e, err := jsonrpc.Decode(bytes.TrimSpace(b)); err == nil && e.Error != nil {
			if out, err := jsonrpc.NewErrorResponse(m.ID, e.Error).Encode(); err == nil {
				emit(out)
				return
			}
		}
		l.failRequest(m, fmt.Errorf("HTTP %d from %s", a.status, l.spec.URL))
	case len(bytes.TrimSpace(b)) > 0 && jsonish(b):
		emit(b)
	case m.IsRequest():
		l.failRequest(m, fmt.Errorf("HTTP %d from %s", a.status, l.spec.URL))
	}
}

// setSession keeps the session id the server gave; the first one opens the GET stream.
// (A string, or the bytes of the answer's head: a string is made only when the id is
// new.)
func setSession[T string | []byte](l *HTTPLink, sid T) {
	l.mu.Lock()
	if l.session == string(sid) {
		l.mu.Unlock()
		return
	}
	first := l.session == ""
	l.session = string(sid)
	l.mu.Unlock()
	if first {
		l.openGET()
	}
}

// readAnswer reads a JSON answer of at most max bytes (one byte more tells that it is
// too large): into a buffer of its exact size when the server gave its length n.
func readAnswer(n int64, body io.Reader, max int) ([]byte, error) {
	if n >= 0 && n <= int64(max) {
		b := make([]byte, n)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(io.LimitReader(body, int64(max)+1))
}

func jsonish(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

func (l *HTTPLink) hasSession() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.session != ""
}

// push queues one message (compacted to one line) from the server.
func (l *HTTPLink) push(b []byte) {
	if bytes.IndexByte(b, '\n') >= 0 {
		var c bytes.Buffer
		if json.Compact(&c, b) == nil {
			b = c.Bytes()
		}
	}
	select {
	case l.in <- b:
	case <-l.done:
	case <-l.ctx.Done():
	}
}

// failRequest reports that request m will get no answer from the server (see
// RequestFailer).
func (l *HTTPLink) failRequest(m *jsonrpc.Message, err error) {
	l.requestFailed(m, err)
}

// readSSE hands the data of every message event of a stream to emit until it ends;
// answered reports whether one of them was the response with id want ("" for none).
func (l *HTTPLink) readSSE(r io.Reader, want string, emit func([]byte)) (end streamEnd, answered bool) {
	end = readEvents(r, func(event string, data []byte) {
		if event == "" || event == "message" {
			if want != "" && !answered && isResponseTo(data, want) {
				answered = true
			}
			emit(data)
		}
	})
	return end, answered
}

// isResponseTo reports whether data is a response whose id is want (raw JSON).
func isResponseTo(data []byte, want string) bool {
	id, ok, _ := jsonx.Get(data, "id")
	if !ok || string(id) != want {
		return false
	}
	_, isRequest, _ := jsonx.Get(data, "method")
	return !isRequest
}

// maxResumes bounds the reconnections to one answer stream that bring nothing new.
const maxResumes = 5

// readAnswerStream reads the event stream answering request m. A server may close the
// connection before the response (2025-11-25, SEP-1699), having sent an event id and a
// retry delay: the stream is resumed with a GET and Last-Event-ID after that delay, until
// the response arrives. A stream that ends for good without it fails the request at
// once rather than at its timeout. reqCtx gives the request's context, once the stream
// has ended without the response: an aborted exchange is not resumed.
func (l *HTTPLink) readAnswerStream(reqCtx func() context.Context, body io.Reader, m *jsonrpc.Message, emit func([]byte)) {
	want := ""
	if m.IsRequest() {
		want = string(m.ID.Raw())
	}
	end, answered := l.readSSE(body, want, emit)
	if want == "" || answered {
		return
	}
	ctx := reqCtx()
	for fruitless := 0; !answered && end.lastID != "" && fruitless < maxResumes && ctx.Err() == nil; {
		delay := end.retry
		if delay <= 0 {
			delay = 500 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.spec.URL, nil)
		if err != nil {
			break
		}
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", end.lastID)
		l.setHeaders(req)
		resp, err := l.client.Do(req)
		if err != nil {
			fruitless++
			continue
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			break
		}
		next, got := l.readSSE(resp.Body, want, emit)
		resp.Body.Close()
		answered, end.err = got, next.err
		if next.lastID == "" || next.lastID == end.lastID {
			fruitless++
		} else {
			fruitless = 0
			end.lastID = next.lastID
		}
		if next.retry > 0 {
			end.retry = next.retry
		}
	}
	if !answered && ctx.Err() == nil {
		// Closed for good, or without an event id to resume from: the response is not
		// coming, so the call fails now rather than at its timeout.
		if end.err != nil {
			l.failRequest(m, fmt.Errorf("the event stream from %s ended before the response: %w", l.spec.URL, end.err))
		} else {
			l.failRequest(m, fmt.Errorf("the event stream from %s ended before the response", l.spec.URL))
		}
	}
}

func (l *HTTPLink) markGETReady() { l.getOnce.Do(func() { close(l.getReady) }) }

// WaitStreams waits (at most d) until the GET stream of a legacy session is open, so
// that server messages sent right after initialization are not missed; at once when
// the session has no GET stream.
func (l *HTTPLink) WaitStreams(d time.Duration) {
	l.mu.Lock()
	getting := l.getting
	l.mu.Unlock()
	if !getting {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.getReady:
	case <-t.C:
	case <-l.ctx.Done():
	}
}

// openGET follows the server's GET stream (messages not tied to a request) while the
// link lives, resuming after a break with Last-Event-ID.
func (l *HTTPLink) openGET() {
	l.mu.Lock()
	if l.getting {
		l.mu.Unlock()
		return
	}
	l.getting = true
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer l.markGETReady()
		lastID := ""
		for attempt := 0; l.ctx.Err() == nil; attempt++ {
			req, err := http.NewRequestWithContext(l.ctx, http.MethodGet, l.spec.URL, nil)
			if err != nil {
				return
			}
			req.Header.Set("Accept", "text/event-stream")
			l.setHeaders(req)
			if lastID != "" {
				req.Header.Set("Last-Event-ID", lastID)
			}
			resp, err := l.client.Do(req)
			l.markGETReady()
			if err == nil {
				if resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotFound {
					resp.Body.Close()
					return // the server offers no GET stream
				}
				if end, _ := l.readSSE(resp.Body, "", l.push); end.lastID != "" {
					lastID = end.lastID
				}
				resp.Body.Close()
			}
			select {
			case <-l.ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
}

// Stop implements Link: it ends the session (DELETE), then cancels what is in flight.
func (l *HTTPLink) Stop(grace time.Duration) error {
	l.mu.Lock()
	sid := l.session
	l.mu.Unlock()
	if sid != "" {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, l.spec.URL, nil)
		if err == nil {
			l.setHeaders(req)
			if resp, err := l.client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		cancel()
	}
	l.cancel()
	l.abortLean()
	l.fail(errors.New("closed"))
	l.wg.Wait()
	return nil
}

// reauthorize handles a 401 (or a 403 insufficient_scope) answer to req, sent with
// token sent: it runs (or joins) the OAuth flow, then sends req again, once, with the
// new token. Any other 403 is returned as it is.
func (l *HTTPLink) reauthorize(req *http.Request, resp *http.Response, sent *Bearer) (*http.Response, error) {
	if !wantsAuthorization(resp.StatusCode, resp.Header) {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return l.authorizeAndRetry(req, resp.StatusCode, resp.Header, sent)
}

// wantsAuthorization reports whether an answer of status with header h asks for
// (more) authorization: a 401, or a 403 insufficient_scope.
func wantsAuthorization(status int, h http.Header) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden && parseChallenge(h).err == "insufficient_scope"
}

// authorizeAndRetry runs (or joins) the OAuth flow for an answer of status with header
// h to req, sent with token sent, then sends req again, once, with the new token.
func (l *HTTPLink) authorizeAndRetry(req *http.Request, status int, h http.Header, sent *Bearer) (*http.Response, error) {
	if err := l.authz.Renew(l.ctx, status, h, sent); err != nil {
		return nil, fmt.Errorf("authorizing with the upstream: %w", err)
	}
	retry := req.Clone(l.ctx)
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		retry.Body = body
	}
	t, err := l.authz.Authorization(l.ctx)
	if err != nil {
		return nil, err
	}
	if t != nil {
		retry.Header["Authorization"] = t.Header
	}
	resp, err := l.client.Transport.RoundTrip(retry)
	switch {
	case err != nil:
	case resp.StatusCode < 300:
		l.authz.Accepted()
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		ch := parseChallenge(resp.Header)
		resp.Body.Close()
		return nil, fmt.Errorf("the upstream still answers HTTP %d (%s, scope %q) with the new token", resp.StatusCode, orNone(ch.err), ch.scope)
	}
	return resp, err
}
