package main

// Streamable HTTP mode (-http ADDR), in the session style of protocol versions 2025-06-18
// and 2025-11-25:
//
//   - POST /mcp carries one JSON-RPC message. A request is answered with one
//     application/json response; a notification or a response is answered 202.
//   - initialize mints an Mcp-Session-Id; every later message must carry it (400 without
//     it, 404 for an unknown or ended session).
//   - GET /mcp opens the session's event stream, kept open with ": keep-alive" comment
//     lines (or 405 with -http-get=false); DELETE /mcp ends the session.
//   - GET /stats answers JSON counters, among them the TCP connections that carried MCP
//     traffic, so that a load test can tell whether a client reuses its connections.
//
// With -fast every request is answered inline by the very code of stdio -fast, writing
// into the response body, so that the server is a fair baseline for benchmarks. Without
// it each session runs its own full server fed through a pipe: its responses go back to
// the waiting POST by id, and everything else it writes (progress, its own requests,
// garbage) goes on the session's GET streams, or nowhere when none is open.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	mcpPath   = "/mcp"
	statsPath = "/stats"

	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"

	maxHTTPBody    = 4 << 20 // bytes of one POST body
	httpWriterSize = 4 << 10 // buffer of a pooled response writer
	maxPooledBody  = 64 << 10
	streamBacklog  = 64 // events queued for one GET stream before they are dropped
	shutdownGrace  = 5 * time.Second
)

// serveHTTP is run for -http: it serves until ctx ends, SIGINT or SIGTERM arrives, or a
// tool asks to end the process (then it returns that *exitError).
func serveHTTP(ctx context.Context, cfg *config, logger *log.Logger) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	exit := newExitSignal()
	h := newHTTPServer(cfg, logger, exit.request)
	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.httpAddr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ConnState:         h.connState,
		ConnContext:       h.connContext,
		ErrorLog:          log.New(logger.Writer(), "http: ", 0),
	}
	addr := ln.Addr().String()
	if h.auth != nil {
		scheme := "http"
		if cfg.tlsCert != "" {
			scheme = "https"
		}
		h.auth.self = scheme + "://" + addr + mcpPath
	}
	if cfg.httpAddrFile != "" {
		if err := writeFileAtomic(cfg.httpAddrFile, []byte(addr+"\n")); err != nil {
			ln.Close()
			return fmt.Errorf("writing -http-addr-file: %w", err)
		}
	}
	errc := make(chan error, 1)
	if cfg.tlsCert != "" {
		logger.Printf("%s: serving Streamable HTTP on https://%s%s", cfg.name, addr, mcpPath)
		go func() { errc <- srv.ServeTLS(ln, cfg.tlsCert, cfg.tlsKey) }() // HTTP/2 offered by ALPN
	} else {
		logger.Printf("%s: serving Streamable HTTP on http://%s%s", cfg.name, addr, mcpPath)
		go func() { errc <- srv.Serve(ln) }()
	}
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
	case <-exit.done:
	}
	// End the sessions first: their GET streams would hold Shutdown up.
	h.closeAll()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	h.wait()
	if e := exit.get(); e != nil {
		return e
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// writeFileAtomic writes b to path through a temporary file and a rename, so that a
// reader polling for path never sees it half written.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// httpServer is the handler of -http mode.
type httpServer struct {
	cfg     *config
	fullCfg *config // per-session full servers: cfg without -exit-after (counted here)
	log     *log.Logger
	exit    func(*exitError)
	fast    *fastServer   // -fast: requests are answered inline; nil: a full server per session
	auth    *resourceAuth // -auth-jwks: the bearer tokens' check; nil: none

	mu       sync.RWMutex // guards sessions and closed
	sessions map[string]*httpSession
	closed   bool
	bg       sync.WaitGroup // full servers draining after their session ended

	handled atomic.Int64 // requests answered, for -exit-after
	stats   httpStats

	writers sync.Pool // *lineWriter, reset onto each response
	bodies  sync.Pool // *bytes.Buffer
	msgs    sync.Pool // *fastMessage
}

// httpStats are the counters behind GET /stats.
type httpStats struct {
	connsAccepted  atomic.Int64
	connsOpen      atomic.Int64
	mcpConns       atomic.Int64
	posts          atomic.Int64
	toolCalls      atomic.Int64
	http2Posts     atomic.Int64
	sessionsOpened atomic.Int64
	getStreams     atomic.Int64
}

// statsSnapshot is the JSON of GET /stats.
type statsSnapshot struct {
	ConnectionsAccepted int64 `json:"connections_accepted"` // every TCP connection accepted, /stats ones included
	ConnectionsOpen     int64 `json:"connections_open"`
	MCPConnections      int64 `json:"mcp_connections"` // connections that carried at least one /mcp request
	Posts               int64 `json:"posts"`
	Requests            int64 `json:"requests"` // JSON-RPC requests answered or handed to a full server
	ToolCalls           int64 `json:"tool_calls"`
	HTTP2Posts          int64 `json:"http2_posts"` // POSTs that came over HTTP/2
	SessionsOpened      int64 `json:"sessions_opened"`
	SessionsActive      int64 `json:"sessions_active"`
	GetStreamsOpen      int64 `json:"get_streams_open"`
}

func newHTTPServer(cfg *config, logger *log.Logger, exit func(*exitError)) *httpServer {
	h := &httpServer{cfg: cfg, log: logger, exit: exit, sessions: map[string]*httpSession{}}
	if cfg.fast {
		h.fast = newFastServer(cfg, nil, logger, exit)
	} else {
		c := *cfg
		c.exitAfter = 0
		h.fullCfg = &c
	}
	h.writers.New = func() any { return newLineWriterSize(io.Discard, httpWriterSize) }
	h.bodies.New = func() any { return new(bytes.Buffer) }
	h.msgs.New = func() any { return new(fastMessage) }
	if cfg.authJWKS != "" {
		h.auth = &resourceAuth{jwksURL: cfg.authJWKS, issuer: cfg.authIssuer, as: cfg.authAS, anonymousCatalogue: cfg.authAnonymousCatalogue}
	}
	return h
}

// connMark is attached to each connection's context: has it carried MCP traffic yet?
type connMark struct{ used atomic.Bool }

type connKey struct{}

func (h *httpServer) connContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &connMark{})
}

func (h *httpServer) connState(_ net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		h.stats.connsAccepted.Add(1)
		h.stats.connsOpen.Add(1)
	case http.StateClosed, http.StateHijacked:
		h.stats.connsOpen.Add(-1)
	}
}

func (h *httpServer) snapshot() statsSnapshot {
	h.mu.RLock()
	active := len(h.sessions)
	h.mu.RUnlock()
	return statsSnapshot{
		ConnectionsAccepted: h.stats.connsAccepted.Load(),
		ConnectionsOpen:     h.stats.connsOpen.Load(),
		MCPConnections:      h.stats.mcpConns.Load(),
		Posts:               h.stats.posts.Load(),
		Requests:            h.handled.Load(),
		ToolCalls:           h.stats.toolCalls.Load(),
		HTTP2Posts:          h.stats.http2Posts.Load(),
		SessionsOpened:      h.stats.sessionsOpened.Load(),
		SessionsActive:      int64(active),
		GetStreamsOpen:      h.stats.getStreams.Load(),
	}
}

func (h *httpServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case mcpPath:
	case "/.well-known/oauth-protected-resource" + mcpPath:
		if h.auth == nil {
			http.NotFound(w, r)
			return
		}
		h.auth.metadata(w)
		return
	case statsPath:
		b, _ := json.Marshal(h.snapshot())
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(b, '\n'))
		return
	default:
		http.NotFound(w, r)
		return
	}
	if m, _ := r.Context().Value(connKey{}).(*connMark); m != nil && !m.used.Load() && m.used.CompareAndSwap(false, true) {
		h.stats.mcpConns.Add(1)
	}
	if o := r.Header.Get("Origin"); o != "" && !loopbackOrigin(o) {
		httpRPCError(w, http.StatusForbidden, nil, codeInvalidRequest, "Forbidden: Origin is not a loopback origin")
		return
	}
	if h.auth != nil && r.Method != http.MethodPost {
		if _, ok := h.auth.check(w, r, ""); !ok {
			return
		}
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.get(w, r)
	case http.MethodDelete:
		h.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// loopbackOrigin reports whether an Origin header names a loopback host: this test
// server only ever serves local clients.
func loopbackOrigin(o string) bool {
	_, hostport, ok := strings.Cut(o, "://")
	if !ok {
		return false
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// accepts reports whether the Accept header admits the media type (a missing header
// admits everything).
func accepts(r *http.Request, mediaType string) bool {
	vs := r.Header.Values("Accept")
	if len(vs) == 0 {
		return true
	}
	for _, v := range vs {
		if strings.Contains(v, mediaType) || strings.Contains(v, "*/*") {
			return true
		}
	}
	return false
}

// httpRPCError answers with an HTTP status and a JSON-RPC error (id may be empty: null).
func httpRPCError(w http.ResponseWriter, status int, id []byte, code int, msg string) {
	if len(id) == 0 {
		id = nullID
	}
	body, _ := encode(&rpcError{Code: code, Message: msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var b bytes.Buffer
	b.Grow(len(responsePrefix) + len(id) + len(errorInfix) + len(body) + len(responseSuffix) + 1)
	b.Write(responsePrefix)
	b.Write(id)
	b.Write(errorInfix)
	b.Write(body)
	b.Write(responseSuffix)
	b.WriteByte('\n')
	w.Write(b.Bytes())
}

// lookup returns the session named by the request's Mcp-Session-Id, or answers 400 (no
// header) or 404 (unknown session) itself and returns nil.
func (h *httpServer) lookup(w http.ResponseWriter, r *http.Request, id []byte) *httpSession {
	sid := r.Header.Get(headerSessionID)
	if sid == "" {
		httpRPCError(w, http.StatusBadRequest, id, codeInvalidRequest, "Bad Request: Mcp-Session-Id header is required")
		return nil
	}
	h.mu.RLock()
	s := h.sessions[sid]
	h.mu.RUnlock()
	if s == nil {
		httpRPCError(w, http.StatusNotFound, id, codeInvalidRequest, "Session not found")
		return nil
	}
	return s
}

func (h *httpServer) versionOK(r *http.Request) bool {
	v := r.Header.Get(headerProtocolVersion)
	return v == "" || slices.Contains(supportedVersions, v) || (h.cfg.version != "" && v == h.cfg.version)
}

func (h *httpServer) post(w http.ResponseWriter, r *http.Request) {
	h.stats.posts.Add(1)
	if r.ProtoMajor == 2 {
		h.stats.http2Posts.Add(1)
	}
	if !accepts(r, "application/json") {
		httpRPCError(w, http.StatusNotAcceptable, nil, codeInvalidRequest, "Not Acceptable: Accept must admit application/json")
		return
	}
	buf := h.bodies.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledBody {
			h.bodies.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, maxHTTPBody+1)); err != nil {
		httpRPCError(w, http.StatusBadRequest, nil, codeParseError, "Parse error: "+err.Error())
		return
	}
	if buf.Len() > maxHTTPBody {
		httpRPCError(w, http.StatusRequestEntityTooLarge, nil, codeInvalidRequest, "Request body too large")
		return
	}
	body := bytes.TrimSpace(buf.Bytes())
	if len(body) > 0 && body[0] == '[' {
		httpRPCError(w, http.StatusBadRequest, nil, codeInvalidRequest, "Batch requests are not supported")
		return
	}
	msg := h.msgs.Get().(*fastMessage)
	defer h.msgs.Put(msg)
	msg.reset()
	if err := json.Unmarshal(body, msg); err != nil {
		httpRPCError(w, http.StatusBadRequest, nil, codeParseError, "Parse error")
		return
	}
	if h.cfg.chatter {
		h.log.Printf("received method=%q id=%s", msg.Method, msg.ID)
	}
	var subject string
	if h.auth != nil {
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		var ok bool
		if subject, ok = h.auth.check(w, r, m.Method); !ok {
			return
		}
	}
	isRequest := msg.Method != fastAbsent && len(msg.ID) > 0
	if isRequest && msg.Method == fastInitialize {
		if r.Header.Get(headerSessionID) != "" {
			httpRPCError(w, http.StatusBadRequest, msg.ID, codeInvalidRequest, "Invalid Request: initialize inside a session")
			return
		}
		h.initialize(w, r, msg, body, subject)
		return
	}
	s := h.lookup(w, r, msg.ID)
	if s == nil {
		return
	}
	s.addSubject(subject)
	if !h.versionOK(r) {
		httpRPCError(w, http.StatusBadRequest, msg.ID, codeInvalidRequest,
			"Bad Request: unsupported MCP-Protocol-Version "+r.Header.Get(headerProtocolVersion))
		return
	}
	if !isRequest { // a notification, or a response to one of a full server's requests
		if s.full != nil {
			if err := s.full.send(body); err != nil {
				httpRPCError(w, http.StatusNotFound, nil, codeInvalidRequest, "Session not found")
				return
			}
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if msg.Method == fastToolsCall {
		h.stats.toolCalls.Add(1)
	}
	if h.cfg.echoMeta {
		h.log.Printf("request id=%s traceparent=%q tracestate=%q", msg.ID, r.Header.Get("traceparent"), r.Header.Get("tracestate"))
	}
	if h.fast != nil {
		h.answerFast(w, msg)
	} else {
		s.full.answer(w, r, s, msg.ID, body)
	}
	h.countRequest()
}

// answerFast writes the -fast answer to msg as the response body.
func (h *httpServer) answerFast(w http.ResponseWriter, msg *fastMessage) {
	w.Header().Set("Content-Type", "application/json")
	out := h.writers.Get().(*lineWriter)
	out.reset(w)
	h.fast.respond(out, msg)
	out.reset(io.Discard) // drop the reference to w
	h.writers.Put(out)
}

// countRequest counts one answered request and ends the process after -exit-after.
func (h *httpServer) countRequest() {
	if n := h.handled.Add(1); h.cfg.exitAfter > 0 && n == h.cfg.exitAfter {
		h.log.Printf("exiting after %d requests", n)
		h.exit(&exitError{code: 4, reason: fmt.Sprintf("exit after %d requests", n)})
	}
}

// initialize opens a session and answers the handshake, with the session id in the
// Mcp-Session-Id header.
func (h *httpServer) initialize(w http.ResponseWriter, r *http.Request, msg *fastMessage, body []byte, subject string) {
	s, err := h.newSession()
	if err != nil {
		httpRPCError(w, http.StatusServiceUnavailable, msg.ID, codeInternalError, err.Error())
		return
	}
	s.addSubject(subject)
	w.Header().Set(headerSessionID, s.id)
	if h.fast != nil {
		h.answerFast(w, msg)
	} else {
		s.full.answer(w, r, s, msg.ID, body)
	}
	h.countRequest()
}

func (h *httpServer) newSession() (*httpSession, error) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	s := &httpSession{id: hex.EncodeToString(b[:]), done: make(chan struct{}), streams: map[chan []byte]struct{}{}}
	if h.fast == nil {
		s.full = startFullSession(h, s)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.endSession(s)
		return nil, errors.New("the server is shutting down")
	}
	h.sessions[s.id] = s
	h.mu.Unlock()
	h.stats.sessionsOpened.Add(1)
	return s, nil
}

// endSession ends s: its GET streams close and its full server (if any) stops.
func (h *httpServer) endSession(s *httpSession) {
	s.closeOnce.Do(func() {
		close(s.done)
		if s.full != nil {
			h.bg.Go(s.full.stop)
		}
	})
}

// closeAll ends every session; later initialize requests are refused.
func (h *httpServer) closeAll() {
	h.mu.Lock()
	h.closed = true
	all := h.sessions
	h.sessions = map[string]*httpSession{}
	h.mu.Unlock()
	for _, s := range all {
		h.endSession(s)
	}
}

// wait waits for the full servers of ended sessions to finish.
func (h *httpServer) wait() { h.bg.Wait() }

func (h *httpServer) delete(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(headerSessionID)
	if sid == "" {
		httpRPCError(w, http.StatusBadRequest, nil, codeInvalidRequest, "Bad Request: Mcp-Session-Id header is required")
		return
	}
	h.mu.Lock()
	s := h.sessions[sid]
	delete(h.sessions, sid)
	h.mu.Unlock()
	if s == nil {
		httpRPCError(w, http.StatusNotFound, nil, codeInvalidRequest, "Session not found")
		return
	}
	h.endSession(s)
	w.WriteHeader(http.StatusNoContent)
}

// get serves a session's GET event stream until the client goes, the session ends or
// the server shuts down.
func (h *httpServer) get(w http.ResponseWriter, r *http.Request) {
	if !h.cfg.httpGet {
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "this server offers no GET stream", http.StatusMethodNotAllowed)
		return
	}
	if !accepts(r, "text/event-stream") {
		http.Error(w, "Accept must admit text/event-stream", http.StatusNotAcceptable)
		return
	}
	s := h.lookup(w, r, nil)
	if s == nil {
		return
	}
	rc := http.NewResponseController(w)
	flush := func() error {
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if flush() != nil {
		return
	}
	h.stats.getStreams.Add(1)
	defer h.stats.getStreams.Add(-1)
	events := s.addStream()
	defer s.removeStream(events)
	ka := time.NewTicker(h.cfg.httpKeepAlive)
	defer ka.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-ka.C:
			_, err = io.WriteString(w, ": keep-alive\n\n")
		case ev := <-events:
			_, err = fmt.Fprintf(w, "event: message\ndata: %s\n\n", ev)
		}
		if err == nil {
			err = flush()
		}
		if err != nil {
			return
		}
	}
}
