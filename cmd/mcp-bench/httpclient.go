package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// The Streamable HTTP client of -mode http: one MCP session per worker over a shared
// keep-alive connection pool, in the session style of 2025-06-18/2025-11-25 (initialize
// mints Mcp-Session-Id; each message is one POST; the answer is JSON or an event stream).

const (
	httpProtocolVersion = "2025-11-25"
	// maxErrorBody bounds what is read of a non-MCP error answer.
	maxErrorBody = 4 << 10
)

// rpcCaller issues calls one at a time. The message it returns is valid until its next
// call. Each caller is used by one goroutine.
type rpcCaller interface {
	call(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error)
}

var (
	_ rpcCaller = (*caller)(nil)
	_ rpcCaller = (*httpSession)(nil)
)

// httpClient talks to one Streamable HTTP endpoint over a pool of keep-alive connections
// and counts the TCP connections it dials.
type httpClient struct {
	url   string
	tr    *http.Transport
	hc    *http.Client
	dials atomic.Int64
}

// newHTTPClient returns a client keeping up to idle idle connections to the endpoint
// (Go's default is 2, which would make a concurrent benchmark dial on most calls).
func newHTTPClient(url string, idle int) *httpClient { return newHTTPClientTLS(url, idle, nil) }

// newHTTPClientTLS is newHTTPClient trusting roots (nil: the system's) over https, with
// HTTP/2 where the server offers it.
func newHTTPClientTLS(url string, idle int, roots *x509.CertPool) *httpClient {
	c := &httpClient{url: url}
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	c.tr = &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c.dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConns:        0, // no overall limit
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   true, // over https; plain http stays HTTP/1.1
		TLSClientConfig:     &tls.Config{RootCAs: roots},
	}
	c.hc = &http.Client{Transport: c.tr}
	return c
}

// close drops the idle connections.
func (c *httpClient) close() { c.tr.CloseIdleConnections() }

// httpSession is one MCP session. Its call is not safe for concurrent use.
type httpSession struct {
	c       *httpClient
	id      string // Mcp-Session-Id
	timeout time.Duration
	nextID  int64

	body []byte        // the request being sent
	buf  bytes.Buffer  // the answer being read
	br   *bufio.Reader // event-stream reader, reset onto each answer
}

// openSession runs initialize and notifications/initialized, with timeout per message.
func (c *httpClient) openSession(ctx context.Context, timeout time.Duration) (*httpSession, error) {
	s := &httpSession{c: c, timeout: timeout}
	m, err := s.call(ctx, "initialize", initializeParams)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if m.Error != nil {
		return nil, fmt.Errorf("initialize: %w", m.Error)
	}
	if s.id == "" {
		return nil, errors.New("initialize: no Mcp-Session-Id in the answer")
	}
	if err := s.notify(ctx, "notifications/initialized", nil); err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	return s, nil
}

// newRequest builds a POST (or another method) with the session's headers.
func (s *httpSession) newRequest(ctx context.Context, method string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.c.url, r)
	if err != nil {
		return nil, err
	}
	h := req.Header
	if body != nil {
		h["Content-Type"] = []string{"application/json"}
	}
	h["Accept"] = []string{"application/json, text/event-stream"}
	if s.id != "" {
		h["Mcp-Session-Id"] = []string{s.id}
		h["Mcp-Protocol-Version"] = []string{httpProtocolVersion}
	}
	return req, nil
}

// do sends one request with the session's timeout; a timeout is reported as errTimeout.
func (s *httpSession) do(ctx context.Context, method string, body []byte) (*http.Response, context.CancelFunc, error) {
	cctx, cancel := context.WithTimeoutCause(ctx, s.timeout, errTimeout)
	req, err := s.newRequest(cctx, method, body)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	resp, err := s.c.hc.Do(req)
	if err != nil {
		cancel()
		if ctx.Err() == nil && errors.Is(context.Cause(cctx), errTimeout) {
			return nil, nil, errTimeout
		}
		return nil, nil, err
	}
	return resp, cancel, nil
}

// notify POSTs a notification, which must be answered 202.
func (s *httpSession) notify(ctx context.Context, method string, params json.RawMessage) error {
	body, err := jsonrpc.NewNotification(method, params).Encode()
	if err != nil {
		return err
	}
	resp, cancel, err := s.do(ctx, http.MethodPost, body)
	if err != nil {
		return err
	}
	defer cancel()
	drainClose(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("HTTP %d, want 202", resp.StatusCode)
	}
	return nil
}

// call sends one request and returns its response. A JSON-RPC error response (whatever
// the HTTP status) is returned as a message; other failures are errors.
func (s *httpSession) call(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	s.nextID++
	id := s.nextID
	var err error
	s.body, err = jsonrpc.NewRequest(jsonrpc.IntID(id), method, params).Append(s.body[:0])
	if err != nil {
		return nil, err
	}
	resp, cancel, err := s.do(ctx, http.MethodPost, s.body)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer drainClose(resp.Body)
	if method == "initialize" {
		s.id = resp.Header.Get("Mcp-Session-Id")
	}
	m, err := s.readAnswer(resp, id)
	if err != nil && ctx.Err() == nil && resp.Request != nil && errors.Is(context.Cause(resp.Request.Context()), errTimeout) {
		return nil, errTimeout
	}
	return m, err
}

// readAnswer reads the response to request id from an answer: a JSON body, or an event
// stream whose other messages (notifications, server requests) are skipped.
func (s *httpSession) readAnswer(resp *http.Response, id int64) (*jsonrpc.Message, error) {
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "text/event-stream") && resp.StatusCode == http.StatusOK:
		return s.readEventStream(resp.Body, id)
	case strings.HasPrefix(ct, "application/json"):
		s.buf.Reset()
		if _, err := s.buf.ReadFrom(io.LimitReader(resp.Body, maxResponseSize+1)); err != nil {
			return nil, fmt.Errorf("reading the answer: %w", err)
		}
		if s.buf.Len() > maxResponseSize {
			return nil, fmt.Errorf("answer larger than %d bytes", maxResponseSize)
		}
		m, err := jsonrpc.Decode(s.buf.Bytes())
		if err != nil {
			return nil, fmt.Errorf("HTTP %d: decoding the answer: %w", resp.StatusCode, err)
		}
		if got, _ := m.ID.Int64(); m.IsResponse() && (got == id || (m.Error != nil && !m.ID.IsValid())) {
			if resp.StatusCode != http.StatusOK && m.Error == nil {
				return nil, fmt.Errorf("HTTP %d with a result", resp.StatusCode)
			}
			return m, nil
		}
		return nil, fmt.Errorf("HTTP %d: the answer is not the response to request %d: %.200s", resp.StatusCode, id, s.buf.Bytes())
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, fmt.Errorf("HTTP %d (%s): %.200s", resp.StatusCode, ct, bytes.TrimSpace(b))
	}
}

// readEventStream reads events until the response to id arrives.
func (s *httpSession) readEventStream(body io.Reader, id int64) (*jsonrpc.Message, error) {
	if s.br == nil {
		s.br = bufio.NewReaderSize(body, 4<<10)
	} else {
		s.br.Reset(body)
	}
	defer s.br.Reset(nil)
	s.buf.Reset()
	for {
		line, err := s.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) { // a long line: assemble it in buf
			start := s.buf.Len()
			s.buf.Write(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = s.br.ReadSlice('\n')
				s.buf.Write(line)
			}
			if s.buf.Len() > maxResponseSize {
				return nil, fmt.Errorf("event larger than %d bytes", maxResponseSize)
			}
			line = bytes.Clone(s.buf.Bytes()[start:])
			s.buf.Truncate(start)
		}
		if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("the event stream ended without the response")
			}
			return nil, fmt.Errorf("reading the event stream: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0: // end of an event
			if s.buf.Len() == 0 {
				continue
			}
			m, err := jsonrpc.Decode(s.buf.Bytes())
			s.buf.Reset()
			if err != nil {
				return nil, fmt.Errorf("decoding an event: %w", err)
			}
			if got, _ := m.ID.Int64(); m.IsResponse() && got == id {
				return m, nil
			}
			// A notification or a request of the server's: not ours to answer here.
		case line[0] == ':': // comment (keep-alive)
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			if string(field) == "data" {
				value = bytes.TrimPrefix(value, []byte(" "))
				if s.buf.Len() > 0 {
					s.buf.WriteByte('\n')
				}
				s.buf.Write(value)
			}
		}
	}
}

// close ends the session with DELETE (best effort: errors are returned, not fatal).
func (s *httpSession) close(ctx context.Context) error {
	if s.id == "" {
		return nil
	}
	resp, cancel, err := s.do(ctx, http.MethodDelete, nil)
	if err != nil {
		return err
	}
	defer cancel()
	drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("DELETE: HTTP %d", resp.StatusCode)
	}
	return nil
}

// openGET opens the session's GET event stream and returns it once its headers arrived;
// the caller reads and closes the body.
func (s *httpSession) openGET(ctx context.Context) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.c.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.id)
	req.Header.Set("Mcp-Protocol-Version", httpProtocolVersion)
	resp, err := s.c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		drainClose(resp.Body)
		return nil, fmt.Errorf("GET stream: HTTP %d (%s)", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp, nil
}

// drainClose reads what is left of a body (so that its connection can be reused) and
// closes it.
func drainClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxResponseSize))
	body.Close()
}
