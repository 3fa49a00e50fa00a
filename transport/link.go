package transport

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// Link is one connection to an upstream server, whatever carries it: a child process's
// pipes, or Streamable HTTP. Messages go out with Write and come back, in arrival order,
// from ReadLine.
type Link interface {
	Write(m *jsonrpc.Message) error
	ReadLine() ([]byte, error)
	// Buffered is how many messages (or bytes) are already read and waiting, so that the
	// reader knows whether more follow at once.
	Buffered() int
	// Done is closed when the link is dead (the process exited, the HTTP session was
	// lost); ExitErr then says why.
	Done() <-chan struct{}
	ExitErr() error
	// Stop ends the link gracefully within about 2×grace, and releases what the link
	// holds (descriptors, contexts): its owner calls it once the link is no longer used,
	// also after Done.
	Stop(grace time.Duration) error
	// Describe names the peer for logs (a pid, a URL).
	Describe() string
}

// Exchanger is implemented by links on which every request is an exchange of its own
// (Streamable HTTP): a request, the messages its answer carries and its response stay
// together. Exchange sends m (with extra headers, such as the Mcp-Param-* mirrors of a
// tool's arguments) and hands what comes back on m's own answer to onMessage, in order:
// the messages related to m (progress, logs, the server's requests made for it), then
// its response. A failed exchange is reported through RequestFailer. What reaches the
// proxy any other way (a session's GET stream) still comes through ReadLine.
//
// Before sending a request, Exchange calls abortable (when set) with a function that ends
// the exchange: closing the request's answer stream is how a 2026-07-28 client cancels
// a request over HTTP (that era has no notifications/cancelled on HTTP).
type Exchanger interface {
	Exchange(m *jsonrpc.Message, headers map[string]string, onMessage func(line []byte), abortable func(abort func())) error
}

// InlineExchanger is implemented by Exchangers that can run an exchange on the calling
// goroutine: ExchangeInline is Exchange, except that for a request it returns only once
// the answer has been handed to onMessage (or the request failed), with no goroutine of
// its own. Before sending a request it calls abortable (when set) with a function that
// ends the exchange early (the request was cancelled or timed out meanwhile: its answer
// is not wanted, and the caller must not wait for it).
type InlineExchanger interface {
	ExchangeInline(m *jsonrpc.Message, headers map[string]string, onMessage func(line []byte), abortable func(abort func())) error
}

// Corker is implemented by links whose writes can be held and flushed together, so that
// a burst of requests leaves in one system call (pipes; every HTTP message is its own
// request).
type Corker interface {
	Cork()
	Uncork() error
}

// ReadInterrupter is implemented by links whose ReadLine can be cut short from another
// goroutine, so that the goroutine reading (which may be a caller waiting for its own
// answer, see upstream's leader/follower read) can be told to stop when it no longer
// needs to. After InterruptRead, a ReadLine that would wait for the peer (the one in
// progress, and every later one until ResumeRead) returns an error matching
// os.ErrDeadlineExceeded at once; nothing is lost, a line cut short is completed by a
// later ReadLine. ReadInterruptible reports whether this link supports it (a pipe the Go
// runtime cannot poll does not).
type ReadInterrupter interface {
	ReadInterruptible() bool
	InterruptRead()
	ResumeRead()
}

// VersionCarrier is implemented by links that carry the negotiated protocol version on
// every request (Streamable HTTP's MCP-Protocol-Version header).
type VersionCarrier interface {
	SetProtocolVersion(v string)
}

var (
	_ Link            = (*Process)(nil)
	_ Corker          = (*Process)(nil)
	_ ReadInterrupter = (*Process)(nil)
)

// Describe implements Link.
func (p *Process) Describe() string { return "pid " + strconv.Itoa(p.Pid()) }

// RequestFailer is implemented by links on which one request can fail while the link
// lives on (HTTP: each request is its own exchange, and a POST can fail alone). Such a
// failure is reported to the function given here with the request's id; it is never
// disguised as a response from the server, so that the caller can tell a proxy-side
// failure from the upstream's own error. Set it before the first Write.
type RequestFailer interface {
	OnRequestFailure(f func(id jsonrpc.ID, err error))
}

// failureSink is the RequestFailer part of a link.
type failureSink struct {
	f atomic.Pointer[func(jsonrpc.ID, error)]
}

// OnRequestFailure implements RequestFailer.
func (s *failureSink) OnRequestFailure(f func(id jsonrpc.ID, err error)) { s.f.Store(&f) }

// requestFailed reports that request m will get no answer; nothing for a notification.
func (s *failureSink) requestFailed(m *jsonrpc.Message, err error) {
	if !m.IsRequest() {
		return
	}
	if f := s.f.Load(); f != nil {
		(*f)(m.ID, err)
	}
}
