package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"sync"
	"sync/atomic"
)

// Method names this server knows.
const (
	methodInitialize            = "initialize"
	methodPing                  = "ping"
	methodToolsList             = "tools/list"
	methodToolsCall             = "tools/call"
	methodPromptsList           = "prompts/list"
	methodPromptsGet            = "prompts/get"
	methodResourcesList         = "resources/list"
	methodResourceTemplatesList = "resources/templates/list"
	methodResourcesRead         = "resources/read"
	methodLoggingSetLevel       = "logging/setLevel"
	notifInitialized            = "notifications/initialized"
	notifCancelled              = "notifications/cancelled"
	notifProgress               = "notifications/progress"
)

// errCancelledByClient is the cancellation cause of a request named in a
// notifications/cancelled.
var errCancelledByClient = errors.New("cancelled by the client")

// incoming is any message read from stdin. Raw fields are copies, so they
// outlive the line they were read from.
type incoming struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// server is the full test server. Each request is handled in its own
// goroutine, so a slow call does not hold up the others.
type server struct {
	cfg   *config
	out   *lineWriter
	log   *log.Logger
	exit  func(*exitError)
	tools *catalogue
	// subjects, over HTTP, returns the subjects of the bearer tokens the session's
	// requests carried (whoami); nil on stdio.
	subjects func() []string

	outgoing outgoing // the server's own requests (ping_client)

	handled atomic.Int64 // requests finished, for -exit-after

	mu       sync.Mutex           // guards inflight, stopping and wg.Add
	inflight map[string]*inflight // requests being handled, by raw id
	stopping bool                 // set by stop; no request starts after it
	wg       sync.WaitGroup       // one count per handler goroutine
}

// inflight is a request being handled.
type inflight struct {
	cancel context.CancelCauseFunc
}

func newServer(cfg *config, out *lineWriter, logger *log.Logger, exit func(*exitError)) *server {
	return &server{
		cfg:      cfg,
		out:      out,
		log:      logger,
		exit:     exit,
		tools:    newCatalogue(cfg),
		inflight: make(map[string]*inflight),
		outgoing: outgoing{waiting: make(chan incoming, 1)},
	}
}

func (s *server) serve(ctx context.Context, stdin io.Reader) error {
	lr := newLineReader(stdin)
	for {
		line, err := lr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading stdin: %w", err)
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			s.dispatch(ctx, line)
		}
	}
}

func (s *server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
}

func (s *server) drain() {
	s.wg.Wait()
}

// dispatch handles one line: it answers malformed input itself, handles
// notifications inline and starts a goroutine for each request.
func (s *server) dispatch(ctx context.Context, line []byte) {
	if line[0] == '[' {
		s.writeError(nil, &rpcError{Code: codeInvalidRequest, Message: "Batch requests are not supported"})
		return
	}
	var msg incoming
	if err := json.Unmarshal(line, &msg); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			s.log.Printf("parse error: %v", err)
			s.writeError(nil, &rpcError{Code: codeParseError, Message: "Parse error"})
		} else {
			s.writeError(nil, &rpcError{Code: codeInvalidRequest, Message: "Invalid Request"})
		}
		return
	}
	if s.cfg.chatter {
		id := "none"
		if len(msg.ID) > 0 {
			id = string(msg.ID)
		}
		s.log.Printf("received method=%q id=%s", msg.Method, id)
	}
	switch {
	case msg.Method == "" && (len(msg.Result) > 0 || len(msg.Error) > 0):
		// A response to the server's own request (ping_client); never answered.
		select {
		case s.outgoing.waiting <- msg:
		default:
			s.log.Printf("unexpected response %s", msg.ID)
		}
	case msg.Method == "":
		s.writeError(msg.ID, &rpcError{Code: codeInvalidRequest, Message: "Invalid Request: no method"})
	case len(msg.ID) == 0:
		s.notification(&msg)
	default:
		s.start(ctx, &msg)
	}
}

// notification handles a message without an id.
func (s *server) notification(msg *incoming) {
	switch msg.Method {
	case notifInitialized:
		if s.cfg.initializedError {
			s.writeError(nil, &rpcError{Code: codeInvalidRequest, Message: "notifications are not requests"})
		}
	case notifCancelled:
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if err := json.Unmarshal(msg.Params, &p); err != nil || len(p.RequestID) == 0 {
			s.log.Printf("ignoring malformed %s: %s", notifCancelled, msg.Params)
			return
		}
		s.mu.Lock()
		req := s.inflight[string(p.RequestID)]
		s.mu.Unlock()
		if req != nil {
			req.cancel(errCancelledByClient)
		}
	}
}

// start handles a request in a new goroutine, unless the server is stopping.
func (s *server) start(ctx context.Context, msg *incoming) {
	key := string(msg.ID)
	ctx, cancel := context.WithCancelCause(ctx)
	req := &inflight{cancel: cancel}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		cancel(nil)
		return
	}
	s.inflight[key] = req // a duplicate id replaces the earlier one
	s.wg.Add(1)
	s.mu.Unlock()

	go func() {
		defer s.wg.Done()
		defer cancel(nil)
		s.handle(ctx, msg)
		s.mu.Lock()
		if s.inflight[key] == req {
			delete(s.inflight, key)
		}
		s.mu.Unlock()
		if n := s.handled.Add(1); s.cfg.exitAfter > 0 && n == s.cfg.exitAfter {
			s.log.Printf("exiting after %d requests", n)
			s.out.close()
			s.exit(&exitError{code: 4, reason: fmt.Sprintf("exit after %d requests", n)})
		}
	}()
}

// handle answers one request. A handler returning neither a result nor an
// error sends no response.
func (s *server) handle(ctx context.Context, msg *incoming) {
	result, rpcErr := s.call(ctx, msg)
	switch {
	case rpcErr != nil:
		s.writeError(msg.ID, rpcErr)
	case result != nil:
		if err := writeResult(s.out, msg.ID, result); err != nil && !errors.Is(err, errOutputClosed) {
			s.log.Printf("writing response to %s: %v", msg.ID, err)
		}
	}
}

func (s *server) call(ctx context.Context, msg *incoming) (json.RawMessage, *rpcError) {
	switch msg.Method {
	case methodInitialize:
		s.cfg.holdInitialize(ctx)
		return s.initialize(msg.Params)
	case methodPing, methodLoggingSetLevel:
		return json.RawMessage(`{}`), nil
	case methodToolsList:
		return s.listTools(msg.Params)
	case methodToolsCall:
		return s.callTool(ctx, msg)
	case methodPromptsList:
		return s.listPrompts()
	case methodPromptsGet:
		return s.getPrompt(msg.Params)
	case methodResourcesList:
		return s.listResources()
	case methodResourceTemplatesList:
		return s.listResourceTemplates()
	case methodResourcesRead:
		return s.readResource(msg.Params)
	default:
		return nil, &rpcError{Code: codeMethodNotFound, Message: "Method not found: " + msg.Method}
	}
}

func (s *server) writeError(id []byte, e *rpcError) {
	if err := writeError(s.out, id, e); err != nil && !errors.Is(err, errOutputClosed) {
		s.log.Printf("writing error response: %v", err)
	}
}

// decodeParams decodes params into v; missing or null params leave v alone.
func decodeParams(params json.RawMessage, v any) *rpcError {
	if isAbsent(params) {
		return nil
	}
	if err := json.Unmarshal(params, v); err != nil {
		return &rpcError{Code: codeInvalidParams, Message: "Invalid params: " + err.Error()}
	}
	return nil
}

// encodeResult encodes a result built by this server.
func encodeResult(v any) (json.RawMessage, *rpcError) {
	b, err := encode(v)
	if err != nil {
		return nil, &rpcError{Code: codeInternalError, Message: "encoding result: " + err.Error()}
	}
	return b, nil
}
