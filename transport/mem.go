package transport

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// Pipe returns the two ends of an in-memory connection to a server written in Go: the
// proxy's end is a Link that behaves as a child process's pipes do, and the server's end
// reads what the proxy writes and writes what the proxy reads. Tests script upstream
// servers with it (upstream.Spec.Dial hands the link to an upstream); an in-process
// server can be served through it too.
//
// Nothing is copied by a goroutine: both directions are unbounded queues of lines, so a
// server that does not read never blocks the proxy's writes (a pipe's buffer would, once
// full), and Unread says how much it has not read.
//
// maxMessage bounds one message from the server, as ProcessSpec.MaxMessage does (zero or
// less means jsonrpc.DefaultMaxMessageSize): ReadLine reports a longer line as a
// *jsonrpc.TooLargeError and goes on with the next.
func Pipe(maxMessage int) (*MemLink, *MemServer) {
	if maxMessage <= 0 {
		maxMessage = jsonrpc.DefaultMaxMessageSize
	}
	p := &memPipe{
		max:        maxMessage,
		serverWake: make(chan struct{}, 1),
		proxyWake:  make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
	l := &MemLink{p: p}
	l.w = jsonrpc.NewLineWriter(memInput{p})
	return l, &MemServer{p: p}
}

// MemLink is the proxy's end of a Pipe. Like a Process, it is dead (Done) once the server
// has exited (MemServer.Close or Fail) or Stop has ended it; lines the server wrote before
// that are still read, then ReadLine reports io.EOF.
type MemLink struct {
	p        *memPipe
	w        *jsonrpc.LineWriter // frames the proxy's messages into p.toServer
	stopOnce sync.Once
}

// MemServer is the server's end of a Pipe. Its methods are safe for concurrent use.
type MemServer struct {
	p *memPipe
}

var (
	_ Link            = (*MemLink)(nil)
	_ Corker          = (*MemLink)(nil)
	_ ReadInterrupter = (*MemLink)(nil)
	_ io.Closer       = (*MemServer)(nil)
)

// errKilled is a MemLink's exit error when Stop ended it because the server did not exit
// within the grace period after its input was closed.
var errKilled = errors.New("killed: the server did not exit within the grace period after its input was closed")

// memPipe is the state both ends share.
type memPipe struct {
	max int

	mu       sync.Mutex // guards the fields below
	toServer []byte     // whole lines written by the proxy, not yet read by the server
	inClosed bool       // the proxy closed its output (Stop): the server reads EOF after toServer
	toProxy  [][]byte   // lines from the server, not yet read by the proxy
	dead     bool       // the server exited, or Stop killed it; done is closed
	stopRead bool       // InterruptRead: a ReadLine that would wait returns at once
	exitErr  error      // why, once dead

	serverWake chan struct{} // signalled when toServer grows or the input closes
	proxyWake  chan struct{} // signalled when toProxy grows
	done       chan struct{} // closed when the link dies
}

// wake signals ch without blocking; one pending signal is enough for its one waiter.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// die ends the link with err (nil: the server exited cleanly); later calls do nothing.
func (p *memPipe) die(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return
	}
	p.dead, p.exitErr = true, err
	close(p.done)
}

// memInput is the writer behind a MemLink's LineWriter: the server's input.
type memInput struct{ p *memPipe }

func (w memInput) Write(b []byte) (int, error) {
	p := w.p
	p.mu.Lock()
	if p.dead || p.inClosed {
		p.mu.Unlock()
		return 0, io.ErrClosedPipe
	}
	p.toServer = append(p.toServer, b...)
	p.mu.Unlock()
	wake(p.serverWake)
	return len(b), nil
}

// Write implements Link: m is sent as one line. It fails with io.ErrClosedPipe once the
// link is dead or stopped (the error sticks, as a pipe's does).
func (l *MemLink) Write(m *jsonrpc.Message) error { return l.w.Write(m) }

// Cork implements Corker: the server reads nothing written until the matching Uncork.
func (l *MemLink) Cork() { l.w.Cork() }

// Uncork implements Corker.
func (l *MemLink) Uncork() error { return l.w.Uncork() }

// ReadLine implements Link: the next line the server wrote, valid until the next call. It
// blocks until there is one, and reports io.EOF once the link is dead and every line
// written before has been read. It must be called from one goroutine.
func (l *MemLink) ReadLine() ([]byte, error) {
	p := l.p
	for {
		p.mu.Lock()
		if len(p.toProxy) > 0 {
			line := p.toProxy[0]
			p.toProxy[0] = nil
			p.toProxy = p.toProxy[1:]
			p.mu.Unlock()
			if len(line) > p.max {
				return nil, &jsonrpc.TooLargeError{Size: len(line), Limit: p.max, Head: line[:min(len(line), 4<<10)]}
			}
			return line, nil
		}
		dead, stop := p.dead, p.stopRead
		p.mu.Unlock()
		if dead {
			return nil, io.EOF
		}
		if stop {
			return nil, os.ErrDeadlineExceeded
		}
		select {
		case <-p.proxyWake:
		case <-p.done:
		}
	}
}

// ReadInterruptible implements ReadInterrupter: a MemLink always is.
func (l *MemLink) ReadInterruptible() bool { return true }

// InterruptRead implements ReadInterrupter: ReadLine returns the lines already written,
// then os.ErrDeadlineExceeded instead of waiting, until ResumeRead.
func (l *MemLink) InterruptRead() {
	l.p.mu.Lock()
	l.p.stopRead = true
	l.p.mu.Unlock()
	wake(l.p.proxyWake)
}

// ResumeRead implements ReadInterrupter.
func (l *MemLink) ResumeRead() {
	l.p.mu.Lock()
	l.p.stopRead = false
	l.p.mu.Unlock()
}

// Buffered implements Link: how many lines from the server are waiting to be read.
func (l *MemLink) Buffered() int {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return len(l.p.toProxy)
}

// Unread returns how many bytes written to the server it has not read yet, as
// Process.Unread does for a child's stdin; ok is false once the link is stopped or dead.
func (l *MemLink) Unread() (n int, ok bool) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	if l.p.dead || l.p.inClosed {
		return 0, false
	}
	return len(l.p.toServer), true
}

// Done implements Link: closed when the server has exited or Stop ended the link.
func (l *MemLink) Done() <-chan struct{} { return l.p.done }

// ExitErr implements Link: it waits until Done is closed, then returns what the server
// passed to Fail (nil after Close), or why Stop ended the link.
func (l *MemLink) ExitErr() error {
	<-l.p.done
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.p.exitErr
}

// Stop implements Link as Process.Stop does: it closes the server's input (its Read
// reports io.EOF once it has read what was written before) and waits up to grace for the
// server to exit; then it ends the link itself, as SIGKILL would. It returns once the
// link is dead, and is safe to call more than once, concurrently, and after the link died.
func (l *MemLink) Stop(grace time.Duration) error {
	l.stopOnce.Do(func() {
		p := l.p
		p.mu.Lock()
		p.inClosed = true
		p.mu.Unlock()
		wake(p.serverWake)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			p.die(errKilled)
		}
	})
	<-l.p.done
	return nil
}

// Describe implements Link.
func (l *MemLink) Describe() string { return "in-memory pipe" }

// Read returns the next message the proxy wrote, decoded. It blocks until there is one;
// it reports io.EOF once the proxy stopped the link and everything written before has
// been read (a child's stdin at EOF), and io.ErrClosedPipe once the link is dead.
func (s *MemServer) Read() (*jsonrpc.Message, error) {
	p := s.p
	for {
		p.mu.Lock()
		if p.dead {
			p.mu.Unlock()
			return nil, io.ErrClosedPipe
		}
		if i := bytes.IndexByte(p.toServer, '\n'); i >= 0 {
			line := bytes.Clone(p.toServer[:i])
			p.toServer = p.toServer[i+1:]
			if len(p.toServer) == 0 {
				p.toServer = nil
			}
			more := len(p.toServer) > 0
			p.mu.Unlock()
			if more {
				wake(p.serverWake) // for another reader
			}
			return jsonrpc.Decode(line)
		}
		inClosed := p.inClosed
		p.mu.Unlock()
		if inClosed {
			return nil, io.EOF
		}
		select {
		case <-p.serverWake:
		case <-p.done:
		}
	}
}

// Write sends m to the proxy as one line. It fails with io.ErrClosedPipe once the link is
// dead; after the proxy's Stop the server may still write until it exits.
func (s *MemServer) Write(m *jsonrpc.Message) error {
	b, err := m.Encode()
	if err != nil {
		return err
	}
	return s.WriteLine(b)
}

// WriteLine sends raw bytes to the proxy, as a server writing to its stdout would: they
// are split into lines at each newline (a trailing one is optional) and blank lines are
// dropped, so the bytes need not be a valid message. It fails with io.ErrClosedPipe once
// the link is dead.
func (s *MemServer) WriteLine(b []byte) error {
	var lines [][]byte
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		line = bytes.TrimRight(line, "\r")
		if len(bytes.TrimSpace(line)) > 0 {
			lines = append(lines, bytes.Clone(line))
		}
	}
	p := s.p
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return io.ErrClosedPipe
	}
	p.toProxy = append(p.toProxy, lines...)
	p.mu.Unlock()
	wake(p.proxyWake)
	return nil
}

// Close is the server exiting cleanly: the link dies and its ExitErr is nil. Lines
// already written are still read by the proxy. Closing a dead link does nothing.
func (s *MemServer) Close() error {
	s.p.die(nil)
	return nil
}

// Fail is the server crashing: the link dies and its ExitErr is err (Fail(nil) is Close).
// Lines already written are still read by the proxy. Failing a dead link does nothing.
func (s *MemServer) Fail(err error) { s.p.die(err) }

// Done is closed when the link is dead: the server exited, or the proxy's Stop ended it.
func (s *MemServer) Done() <-chan struct{} { return s.p.done }
