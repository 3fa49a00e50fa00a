package h1

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBufSize) }}

// response is the http.ResponseWriter (and http.Flusher) of one request. A body that is
// complete when the handler first flushes or returns, and fits writeBufSize, goes out
// with its Content-Length in one write; a streamed one of unknown length is chunked.
type response struct {
	c      *conn
	req    *http.Request
	header http.Header

	status      int
	wroteHeader bool // the status is decided
	headerSent  bool // the head is in the writer
	chunked     bool
	length      int64 // Content-Length, -1 when unknown
	written     int64
	staged      []byte // body held back until the head is sent
	closeAfter  bool
	failed      bool // a write to the connection failed
	cancel      func()
}

func (w *response) reset(c *conn, req *http.Request, cancel func()) {
	*w = response{c: c, req: req, header: w.header, staged: w.staged[:0], length: -1, closeAfter: req.Close, cancel: cancel}
	if w.header == nil {
		w.header = http.Header{}
	} else {
		clear(w.header)
	}
}

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		w.c.s.logf("h1: superfluous WriteHeader(%d)", code)
		return
	}
	if code < 100 || code > 999 {
		panic("h1: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		w.writeInformational(code)
		return
	}
	w.wroteHeader, w.status = true, code
	if cl := w.header.Get("Content-Length"); cl != "" {
		if n, ok := parseLength([]byte(cl)); ok {
			w.length = n
		} else {
			w.header.Del("Content-Length")
		}
	}
}

func (w *response) writeInformational(code int) {
	bw := w.writer()
	writeStatus(bw, code)
	writeFields(bw, w.header)
	bw.WriteString("\r\n")
	w.flushConn()
}

func (w *response) bodyAllowed() bool {
	return w.status >= 200 && w.status != http.StatusNoContent && w.status != http.StatusNotModified
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
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
		if w.length < 0 && len(w.staged)+len(p) <= writeBufSize { // else the head can go now
			w.staged = append(w.staged, p...)
			return len(p), nil
		}
		w.sendHead(false)
	}
	w.writeBody(p)
	if w.failed {
		return 0, errConnFailed
	}
	return len(p), nil
}

var errConnFailed = &connError{}

type connError struct{}

func (*connError) Error() string { return "h1: connection write failed" }

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

// Flush sends what is held back and buffered; a body still open afterwards is a stream,
// so the connection is watched for the client going away from now on.
func (w *response) Flush() {
	_ = w.FlushError()
}

// FlushError is Flush for http.ResponseController.
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headerSent {
		w.sendHead(false)
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

// sendHead writes the status line and header fields; final means the handler is done,
// so an unknown length is the length of what is staged. The fields the server adds
// (framing, Date, Connection) go straight to the wire, not into the handler's map.
func (w *response) sendHead(final bool) {
	w.headerSent = true
	h := w.header
	var length string
	if w.bodyAllowed() {
		if w.length < 0 {
			if final {
				w.length = int64(len(w.staged))
				length = strconv.Itoa(len(w.staged))
			} else {
				w.chunked = true
			}
		}
		if _, ok := h["Content-Type"]; !ok && len(w.staged) > 0 {
			h["Content-Type"] = []string{http.DetectContentType(w.staged)}
		}
	} else {
		delete(h, "Content-Length")
	}
	delete(h, "Transfer-Encoding")
	if w.closeAfter || w.c.s.closing.Load() {
		delete(h, "Connection")
		w.closeAfter = true
	} else if v := h["Connection"]; len(v) > 0 && hasToken([]byte(strings.Join(v, ",")), "close") {
		w.closeAfter = true
	}
	bw := w.writer()
	writeStatus(bw, w.status)
	writeFields(bw, h)
	if length != "" {
		bw.WriteString("Content-Length: ")
		bw.WriteString(length)
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
	if w.closeAfter && len(h["Connection"]) == 0 {
		bw.WriteString("Connection: close\r\n")
	}
	bw.WriteString("\r\n")
	if len(w.staged) > 0 {
		staged := w.staged
		w.staged = w.staged[:0]
		w.writeBody(staged)
	}
}

// finish completes the response after the handler returned; false when the connection
// cannot carry another request.
func (w *response) finish() bool {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headerSent {
		w.sendHead(true)
	}
	if w.chunked {
		w.writer().WriteString("0\r\n\r\n")
	}
	w.flushConn()
	if w.length >= 0 && w.written < w.length && w.bodyAllowed() {
		return false // the handler promised more than it wrote: only closing ends it
	}
	return !w.failed && !w.closeAfter
}

// release returns the write buffer to the pool.
func (w *response) release() {
	if bw := w.c.bw; bw != nil {
		bw.Reset(nil)
		writerPool.Put(bw)
		w.c.bw = nil
	}
	w.staged = nil // an idle connection holds no buffer
	w.req, w.cancel = nil, nil
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

// writeFields writes header fields as net/http would: names that are not tokens are
// dropped, and CR or LF in a value becomes a space.
func writeFields(bw *bufio.Writer, h http.Header) {
	for k, vs := range h {
		if !validName(k) {
			continue
		}
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			if strings.ContainsAny(v, "\r\n") {
				v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
			}
			bw.WriteString(strings.TrimSpace(v))
			bw.WriteString("\r\n")
		}
	}
}

func validName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !isTokenChar(k[i]) {
			return false
		}
	}
	return true
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
