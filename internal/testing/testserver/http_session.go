package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"
)

// httpSession is one MCP session of -http mode.
type httpSession struct {
	id        string
	done      chan struct{} // closed when the session ends
	closeOnce sync.Once
	full      *fullSession // nil with -fast

	mu       sync.Mutex // guards streams and subjects
	streams  map[chan []byte]struct{}
	subjects []string // of the bearer tokens its requests carried (bearer.go)
}

func (s *httpSession) addStream() chan []byte {
	ch := make(chan []byte, streamBacklog)
	s.mu.Lock()
	s.streams[ch] = struct{}{}
	s.mu.Unlock()
	return ch
}

func (s *httpSession) removeStream(ch chan []byte) {
	s.mu.Lock()
	delete(s.streams, ch)
	s.mu.Unlock()
}

// broadcast queues line on every open GET stream of the session; a full stream, or no
// stream at all, loses it.
func (s *httpSession) broadcast(line []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.streams {
		select {
		case ch <- line:
		default:
		}
	}
}

// fullSession runs a full server for one HTTP session: POSTed messages are written to it
// as lines, and what it writes is routed by routeLine.
type fullSession struct {
	sess   *httpSession
	srv    *server
	in     *io.PipeWriter
	inMu   sync.Mutex // one line at a time
	cancel context.CancelFunc
	served chan struct{} // closed when srv.serve has returned

	mu      sync.Mutex             // guards pending and partial
	pending map[string]chan []byte // raw request id -> the POST waiting for its response
	partial []byte                 // the line being assembled from the server's writes
}

func startFullSession(h *httpServer, s *httpSession) *fullSession {
	f := &fullSession{sess: s, pending: map[string]chan []byte{}, served: make(chan struct{})}
	pr, pw := io.Pipe()
	f.in = pw
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.srv = newServer(h.fullCfg, newLineWriter(f), h.log, h.exit)
	f.srv.subjects = s.subjectList
	go func() {
		defer close(f.served)
		if err := f.srv.serve(ctx, pr); err != nil {
			h.log.Printf("session %s: %v", s.id[:8], err)
		}
	}()
	return f
}

// send writes one message to the server as a line.
func (f *fullSession) send(body []byte) error {
	line := body
	if bytes.ContainsAny(body, "\r\n") {
		var c bytes.Buffer
		if err := json.Compact(&c, body); err == nil {
			line = c.Bytes()
		}
	}
	f.inMu.Lock()
	defer f.inMu.Unlock()
	if _, err := f.in.Write(append(slices.Clip(line), '\n')); err != nil {
		return err
	}
	return nil
}

// answer hands a request to the server and writes its response as the body. If the
// client goes away first the request is cancelled.
func (f *fullSession) answer(w http.ResponseWriter, r *http.Request, s *httpSession, id, body []byte) {
	key := string(id)
	ch := make(chan []byte, 1)
	f.mu.Lock()
	f.pending[key] = ch
	f.mu.Unlock()
	forget := func() {
		f.mu.Lock()
		if f.pending[key] == ch {
			delete(f.pending, key)
		}
		f.mu.Unlock()
	}
	if err := f.send(body); err != nil {
		forget()
		httpRPCError(w, http.StatusNotFound, id, codeInvalidRequest, "Session not found")
		return
	}
	select {
	case resp := <-ch:
		w.Header().Set("Content-Type", "application/json")
		w.Write(resp)
	case <-r.Context().Done():
		forget()
		_ = f.send([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + key + `}}`))
	case <-s.done:
		forget()
		httpRPCError(w, http.StatusNotFound, id, codeInvalidRequest, "Session ended")
	}
}

// Write receives the server's output (whole lines, or a long line in pieces).
func (f *fullSession) Write(p []byte) (int, error) {
	f.mu.Lock()
	f.partial = append(f.partial, p...)
	var lines [][]byte
	for {
		i := bytes.IndexByte(f.partial, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, bytes.Clone(f.partial[:i]))
		f.partial = f.partial[i+1:]
	}
	if len(f.partial) == 0 {
		f.partial = nil
	}
	f.mu.Unlock()
	for _, line := range lines {
		f.route(line)
	}
	return len(p), nil
}

// route sends a response to the POST waiting for it and anything else to the GET
// streams.
func (f *fullSession) route(line []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(line, &m) == nil && m.Method == nil && len(m.ID) > 0 {
		f.mu.Lock()
		ch := f.pending[string(m.ID)]
		delete(f.pending, string(m.ID))
		f.mu.Unlock()
		if ch != nil {
			ch <- append(line, '\n')
			return
		}
	}
	f.sess.broadcast(line)
}

// stop ends the server: no more input, requests in flight cancelled, then waits.
func (f *fullSession) stop() {
	f.in.Close()
	f.srv.stop()
	f.cancel()
	<-f.served
	f.srv.drain()
}
