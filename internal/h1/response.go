package h1

import (
	"bufio"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/httpsyntax"
)

var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBufSize) }}

var (
	errConnFailed = errors.New("h1: connection write failed")
	errFinished   = errors.New("h1: response used after its handler returned")
)

// response is the http.ResponseWriter (and http.Flusher) of one request; it may be
// written from another goroutine while the handler waits, so its methods lock.
//
// The header map is read once, when the status is decided (WriteHeader, or the first
// Write or Flush), as net/http promises: changes after that do not reach the wire. The
// framing is the server's alone: the handler's Content-Length (valid, read then) or,
// without one, the length of a body complete by the handler's return that fits
// writeBufSize, else chunked; the map's own framing fields are never written.
type response struct {
	c      *conn
	header http.Header
	cancel func()

	mu          sync.Mutex
	status      int
	wroteHeader bool        // the status is decided
	snap        http.Header // the header as it was then, while the head waits for the body
	headerSent  bool        // the head is in the writer
	chunked     bool
	length      int64 // Content-Length, -1 when unknown
	written     int64
	staged      []byte // body held back until the head is sent (length unknown)
	closeAfter  bool
	failed      bool // a write to the connection failed
	final       bool // the handler has returned
	done        bool // finished: every later use fails
}

func (w *response) Header() http.Header { return w.header }

// SetContentLength announces the body's length before the status is decided, as a
// Content-Length field in the header would, without the field's two allocations (the
// value's string and its slice): a handler answering with a body it holds whole calls
// it before WriteHeader. A Content-Length field in the header, if any, still wins; a
// call after the status is decided does nothing.
func (w *response) SetContentLength(n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.wroteHeader && !w.done && n >= 0 {
		w.length = n
	}
}

func (w *response) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeader(code)
}

func (w *response) writeHeader(code int) {
	if w.done {
		return
	}
	if w.wroteHeader {
		w.c.s.logf("h1: superfluous WriteHeader(%d)", code)
		return
	}
	if code < 100 || code > 999 {
		panic("h1: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		w.writeInformational(code)
		return
	}
	w.wroteHeader, w.status = true, code
	if v := w.header["Content-Length"]; len(v) == 1 {
		if n, ok := httpsyntax.ParseLength(v[0]); ok {
			w.length = n
		}
	}
	_, typed := w.header["Content-Type"]
	if w.final || !w.bodyAllowed() || w.length >= 0 && (typed || w.length == 0) {
		w.sendHead(w.header, nil) // into the buffer: the map is read now
		return
	}
	// The head waits for the first body bytes (to sniff a type, or to learn the length):
	// keep the header as it is now.
	w.snap = w.header.Clone()
}

// writeInformational sends a 1xx head at once, without framing fields.
func (w *response) writeInformational(code int) {
	bw := w.writer()
	writeStatus(bw, code)
	writeFields(bw, w.header, true)
	bw.WriteString("\r\n")
	w.flushConn()
}

func (w *response) bodyAllowed() bool {
	return w.status >= 200 && w.status != http.StatusNoContent && w.status != http.StatusNotModified
}

func (w *response) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return 0, errFinished
	}
	if !w.wroteHeader {
		w.writeHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !w.bodyAllowed() {
		return 0, http.ErrBodyNotAllowed
	}
	if w.length >= 0 && w.written+int64(len(p)) > w.length {
		return 0, http.ErrContentLength
	}
	if w.failed {
		return 0, errConnFailed
	}
	w.written += int64(len(p))
	if !w.headerSent {
		if w.length < 0 && len(w.staged)+len(p) <= writeBufSize {
			w.staged = append(w.staged, p...)
			return len(p), nil
		}
		first := w.staged
		if len(first) == 0 {
			first = p
		}
		w.sendHead(w.snap, first)
	}
	w.writeBody(p)
	if w.failed {
		return 0, errConnFailed
	}
	return len(p), nil
}

// writeBody writes p, framed as a chunk when chunked.
func (w *response) writeBody(p []byte) {
	bw := w.writer()
	var err error
	if w.chunked {
		bw.WriteString(strconv.FormatInt(int64(len(p)), 16))
		bw.WriteString("\r\n")
		bw.Write(p)
		_, err = bw.WriteString("\r\n")
	} else {
		_, err = bw.Write(p)
	}
	if err != nil { // bufio's error sticks, so the last write tells
		w.fail()
	}
}

// fail marks the connection broken: the client cannot get the rest, so the request ends.
func (w *response) fail() {
	if !w.failed {
		w.failed = true
		if w.cancel != nil {
			w.cancel()
		}
	}
}

// SetWriteDeadline sets the connection's write deadline (for http.ResponseController):
// a time in the past makes a write blocked on a client that reads nothing fail, which
// ends the request. It does not take mu, which such a write holds.
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.nc.SetWriteDeadline(t) }

// Flush sends what is held back and buffered; a body still open afterwards is a stream,
// so the connection is watched for the client going away from now on.
func (w *response) Flush() {
	_ = w.FlushError()
}

// FlushError is Flush for http.ResponseController.
func (w *response) FlushError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return errFinished
	}
	if !w.wroteHeader {
		w.writeHeader(http.StatusOK)
	}
	if !w.headerSent {
		w.sendHead(w.snap, w.staged)
	}
	w.flushConn()
	if w.chunked || w.length > w.written {
		w.c.startWatch()
	}
	if w.failed {
		return errConnFailed
	}
	return nil
}

func (w *response) writer() *bufio.Writer {
	if w.c.bw == nil {
		bw := writerPool.Get().(*bufio.Writer)
		bw.Reset(w.c.nc)
		w.c.bw = bw
	}
	return w.c.bw
}

func (w *response) flushConn() {
	if w.c.bw != nil && !w.failed {
		if err := w.c.bw.Flush(); err != nil {
			w.fail()
		}
	}
}

// sendHead writes the status line and the fields of h, then the framing, Date and
// Connection fields the server decides, then what is staged; first is the start of the
// body, to sniff a Content-Type from when h has none.
func (w *response) sendHead(h http.Header, first []byte) {
	w.headerSent = true
	if h == nil {
		h = http.Header{}
	}
	framed := false // a Content-Length field
	if w.bodyAllowed() {
		if w.length < 0 && w.final {
			w.length = int64(len(w.staged))
		}
		if w.length >= 0 {
			framed = true
		} else {
			w.chunked = true
		}
		if _, ok := h["Content-Type"]; !ok && len(first) > 0 {
			h["Content-Type"] = []string{http.DetectContentType(first)}
		}
	}
	// Unread input past what can be drained means closing: say so.
	if b := w.c.body; b != nil && b.left.Load() > maxDiscard {
		w.closeAfter = true
	}
	if w.closeAfter || w.c.s.closing.Load() {
		w.closeAfter = true
	} else {
		for _, v := range h["Connection"] {
			if httpsyntax.HasToken(v, "close") {
				w.closeAfter = true
				break
			}
		}
	}
	bw := w.writer()
	writeStatus(bw, w.status)
	writeFields(bw, h, w.closeAfter)
	if framed {
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), w.length, 10)) // no string per response
		bw.WriteString("\r\n")
	}
	if w.chunked {
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if _, ok := h["Date"]; !ok {
		bw.WriteString("Date: ")
		bw.WriteString(httpDate())
		bw.WriteString("\r\n")
	}
	if w.closeAfter {
		bw.WriteString("Connection: close\r\n")
	}
	bw.WriteString("\r\n")
	w.snap = nil
	if len(w.staged) > 0 {
		staged := w.staged
		w.staged = nil
		w.writeBody(staged)
	}
}

// finish completes the response after the handler returned; false when the connection
// cannot carry another request.
func (w *response) finish() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.final = true
	if !w.wroteHeader {
		w.writeHeader(http.StatusOK)
	}
	if !w.headerSent {
		w.sendHead(w.snap, w.staged)
	}
	if w.chunked {
		w.writer().WriteString("0\r\n\r\n")
	}
	w.flushConn()
	w.release()
	if w.length >= 0 && w.written < w.length && w.bodyAllowed() {
		return false // the handler promised more than it wrote: only closing ends it
	}
	return !w.failed && !w.closeAfter
}

// abandon ends a response whose handler panicked: nothing more is written.
func (w *response) abandon() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.release()
}

// release returns the write buffer to the pool and retires the response.
func (w *response) release() {
	w.done = true
	if bw := w.c.bw; bw != nil {
		bw.Reset(nil)
		writerPool.Put(bw)
		w.c.bw = nil
	}
	w.staged, w.snap = nil, nil
}

var statusLines sync.Map // int → string

func writeStatus(bw *bufio.Writer, code int) {
	if v, ok := statusLines.Load(code); ok {
		bw.WriteString(v.(string))
		return
	}
	text := http.StatusText(code)
	if text == "" {
		text = "status code " + strconv.Itoa(code)
	}
	line := "HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\n"
	statusLines.Store(code, line)
	bw.WriteString(line)
}

// writeFields writes header fields as net/http would (names that are not tokens are
// dropped; CR or LF in a value becomes a space), leaving out the framing fields, which
// are the server's, and Connection when the server writes its own.
func writeFields(bw *bufio.Writer, h http.Header, skipConnection bool) {
	for k, vs := range h {
		switch k {
		case "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		case "Connection":
			if skipConnection {
				continue
			}
		}
		if !httpsyntax.ValidName(k) {
			continue
		}
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			if strings.ContainsAny(v, "\r\n") {
				v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
			}
			bw.WriteString(httpsyntax.TrimOWS(v)) // as net/http: spaces and tabs only
			bw.WriteString("\r\n")
		}
	}
}

// httpDate is the Date header value, formatted once per second.
func httpDate() string {
	now := time.Now()
	sec := now.Unix()
	if d := cachedDate.Load(); d != nil && d.sec == sec {
		return d.text
	}
	d := &dateText{sec: sec, text: now.UTC().Format(http.TimeFormat)}
	cachedDate.Store(d)
	return d.text
}

type dateText struct {
	sec  int64
	text string
}

var cachedDate atomic.Pointer[dateText]
