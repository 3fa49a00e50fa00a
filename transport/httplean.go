package transport

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/internal/h1client"
	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// The lean POST: for an upstream the lean HTTP/1.1 client serves (plain http, no
// proxy), every POST is written by hand into a pooled buffer, from a prefix made once per
// link (request line, Host and the fields every POST carries), and sent with h1client's
// Send; the answer's head is read without a header map, and an Abort (no context) ends
// the exchange. With OAuth, the token is written per request, and a 401 is authorized
// and retried net/http-shaped (reauthorizeLean). It sends exactly what the
// net/http-shaped path (newPost and RoundTrip) would, without the request copy, the
// header map, the value slices and the contexts that path costs per call. A request
// with extra headers (the Mcp-Param-* of a 2026-07-28 tool) takes that path.

// leanPost is what a link's lean POSTs share.
type leanPost struct {
	tr     *h1client.Transport
	key    string // host:port
	prefix []byte // "POST target HTTP/1.1", Host and the fixed fields, each line ended
}

// Fields the lean path writes per request, or leaves to the client: a link whose own
// headers (spec.Headers) name one of them takes the net/http-shaped path, where the
// order in which they are set decides.
var leanPerCall = []string{"Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Traceparent", "Tracestate"}

// newLeanPost prepares the lean POSTs to rawURL with the link's own headers (canonical
// keys), or returns nil when they cannot go that way. With OAuth, the token is written
// per request (and the link's headers hold no Authorization: the token would replace
// it).
func newLeanPost(rawURL string, headers http.Header, authz Authorizer) *leanPost {
	if transportFor(rawURL) != leanTransport || authz != nil && headers["Authorization"] != nil {
		return nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	b := append([]byte(nil), "POST "...)
	b = append(b, u.RequestURI()...)
	b = append(b, " HTTP/1.1\r\n"...)
	if b, err = h1client.AppendField(b, "Host", u.Host); err != nil {
		return nil
	}
	keys := make([]string, 0, len(headers))
	for k := range headers {
		if slices.Contains(leanPerCall, k) {
			return nil
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if headers["Content-Type"] == nil {
		b = append(b, "Content-Type: application/json\r\n"...)
	}
	if headers["Accept"] == nil {
		b = append(b, "Accept: application/json, text/event-stream\r\n"...)
	}
	if headers["User-Agent"] == nil {
		b = append(b, "User-Agent: Go-http-client/1.1\r\n"...) // what the client writes when none is set
	}
	for _, k := range keys {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Trailer", "Te", "Upgrade":
			continue // the client sets the framing, as it does for any request
		}
		for _, v := range headers[k] {
			if b, err = h1client.AppendField(b, k, v); err != nil {
				return nil // the other path reports it on every request
			}
		}
	}
	return &leanPost{tr: leanTransport, key: h1client.HostPort(u.Host), prefix: b}
}

// leanBufs are the buffers of one lean POST: its body is encoded into body, then the
// whole request written into wire.
type leanBufs struct{ body, wire []byte }

// maxPooledLean bounds the buffers kept for reuse: one large request must not pin them.
const maxPooledLean = 64 << 10

var leanBufPool = sync.Pool{New: func() any { return &leanBufs{body: make([]byte, 0, 1024), wire: make([]byte, 0, 2048)} }}

// appendLeanPost writes the POST of m, whose body is in bufs.body, into bufs and returns
// its bytes; token, when not nil, is the OAuth token it carries.
func (l *HTTPLink) appendLeanPost(bufs *leanBufs, m *jsonrpc.Message, token *Bearer) ([]byte, error) {
	body := bufs.body
	var err error
	b := append(bufs.wire[:0], l.lean.prefix...)
	defer func() { bufs.wire = b[:0] }()
	if token != nil {
		for _, v := range token.Header {
			if b, err = h1client.AppendField(b, "Authorization", v); err != nil {
				return nil, err
			}
		}
	}
	l.mu.Lock()
	session, version := l.session, l.version
	l.mu.Unlock()
	if session != "" {
		if b, err = h1client.AppendField(b, "Mcp-Session-Id", session); err != nil {
			return nil, err
		}
	}
	if version != "" {
		if b, err = h1client.AppendField(b, "Mcp-Protocol-Version", version); err != nil {
			return nil, err
		}
	}
	// The 2026-07-28 request headers mirror the body, as in exchange.
	if m.Method != "" {
		if b, err = h1client.AppendField(b, "Mcp-Method", m.Method); err != nil {
			return nil, err
		}
		if key := nameParam(m.Method); key != "" {
			if b, err = appendName(b, m.Params, key); err != nil {
				return nil, err
			}
		}
	}
	b = appendTraceFields(b, m)
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	return b, nil
}

// leanExchange is one lean POST in flight: its Abort ends it (a cancellation, a timeout,
// the link's Stop).
type leanExchange struct {
	abort  h1client.Abort
	bufs   *leanBufs          // its request's, until sent
	cancel context.CancelFunc // ends the context made for resuming its answer stream, if one was
}

// putBufs gives the request's buffers back once it is sent (or failed).
func (x *leanExchange) putBufs() {
	if b := x.bufs; b != nil && cap(b.body) <= maxPooledLean && cap(b.wire) <= maxPooledLean {
		leanBufPool.Put(b)
	}
	x.bufs = nil
}

// context returns a context that ends with the exchange (its Abort, the link's end),
// made on demand: only an answer stream that ended without the response needs one, to
// be resumed.
func (x *leanExchange) context(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	x.cancel = cancel
	done := x.abort.Done()
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx
}

// startLean registers x as in flight, so that Stop aborts it; false once the link is
// stopping.
func (l *HTTPLink) startLean(x *leanExchange) bool {
	l.liveMu.Lock()
	defer l.liveMu.Unlock()
	if l.stopping {
		return false
	}
	if l.live == nil {
		l.live = make(map[*leanExchange]struct{})
	}
	l.live[x] = struct{}{}
	return true
}

func (l *HTTPLink) endLean(x *leanExchange) {
	l.liveMu.Lock()
	delete(l.live, x)
	l.liveMu.Unlock()
}

// abortLean aborts every lean POST in flight, and those to come.
func (l *HTTPLink) abortLean() {
	l.liveMu.Lock()
	defer l.liveMu.Unlock()
	l.stopping = true
	for x := range l.live {
		x.abort.Abort()
	}
}

// exchangeLean is exchange on the lean path.
func (l *HTTPLink) exchangeLean(m *jsonrpc.Message, onMessage func(line []byte), inline bool, abortable func(abort func())) error {
	x := &leanExchange{bufs: leanBufPool.Get().(*leanBufs)}
	body, err := m.Append(x.bufs.body[:0])
	if err != nil {
		x.putBufs()
		return err
	}
	x.bufs.body = body
	if abortable != nil && m.IsRequest() {
		abortable(x.abort.Abort)
	}
	l.wg.Add(1)
	if inline || !m.IsRequest() {
		defer l.wg.Done()
		l.postLean(x, m, onMessage)
		return nil
	}
	go func() {
		defer l.wg.Done()
		l.postLean(x, m, onMessage)
	}()
	return nil
}

// postLean is post on the lean path.
func (l *HTTPLink) postLean(x *leanExchange, m *jsonrpc.Message, emit func([]byte)) {
	if !l.startLean(x) {
		x.putBufs()
		return // the link is stopping: as a POST whose context the stop cancelled
	}
	defer l.endLean(x)
	sent, err := l.tokenToSend()
	var wire []byte
	if err == nil {
		wire, err = l.appendLeanPost(x.bufs, m, sent)
	}
	var rep *h1client.Reply
	if err == nil {
		rep, err = l.lean.tr.Send(l.lean.key, http.MethodPost, wire, &x.abort)
	}
	x.putBufs() // the request is written (or failed): its bytes are no longer read
	if err != nil {
		l.postFailed(m, err)
		return
	}
	defer rep.Body.Close()
	if l.authz != nil && (rep.StatusCode == http.StatusUnauthorized || rep.StatusCode == http.StatusForbidden) {
		if h := rep.Header(); wantsAuthorization(rep.StatusCode, h) {
			l.reauthorizeLean(rep, h, m, sent, emit)
			return
		}
	}
	// The head's fields are read before its body (see Reply.Field).
	if sid := rep.Field("Mcp-Session-Id"); len(sid) > 0 {
		setSession(l, sid)
	}
	a := postAnswer{
		status: rep.StatusCode,
		stream: bytes.HasPrefix(rep.Field("Content-Type"), []byte("text/event-stream")),
		length: rep.ContentLength,
		body:   rep.Body,
	}
	l.handleAnswer(a, m, emit, func() context.Context { return x.context(l.ctx) })
	if x.cancel != nil {
		x.cancel()
	}
}

// reauthorizeLean is reauthorize for a lean POST whose answer (rep, its fields h) asks
// for authorization: the flow runs, and the request is sent again, once, the way an
// OAuth retry always is (net/http-shaped, under the link's context).
func (l *HTTPLink) reauthorizeLean(rep *h1client.Reply, h http.Header, m *jsonrpc.Message, sent *Bearer, emit func([]byte)) {
	_, _ = io.Copy(io.Discard, io.LimitReader(rep.Body, 64<<10))
	rep.Body.Close()
	body, err := m.Encode()
	var req *http.Request
	if err == nil {
		req, err = l.buildPost(l.ctx, m, body, nil)
	}
	var resp *http.Response
	if err == nil {
		resp, err = l.authorizeAndRetry(req, rep.StatusCode, h, sent)
	}
	l.finishPost(req, resp, err, m, emit)
}

// appendName appends Mcp-Name with the string params[key], when there is one: as it is
// when it needs neither unescaping nor encoding (no allocation), else as exchange writes
// it.
func appendName(b []byte, params []byte, key string) ([]byte, error) {
	raw, ok, err := jsonx.Get(params, key)
	if err != nil || !ok || len(raw) < 2 || raw[0] != '"' {
		return b, nil // as GetString: no name
	}
	if v := raw[1 : len(raw)-1]; bytes.IndexByte(v, '\\') < 0 && mcp.PlainHeaderValue(v) {
		return h1client.AppendField(b, "Mcp-Name", v)
	}
	name, ok, _ := jsonx.GetString(params, key)
	if !ok {
		return b, nil
	}
	return h1client.AppendField(b, "Mcp-Name", mcp.EncodeHeaderValue(name))
}
