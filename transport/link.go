package transport

import (
	"strconv"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// Link is one connection to an upstream server, whatever carries it: a child process's
// pipes, or Streamable HTTP. Messages go out with Write and come back, in arrival order,
// from ReadLine.
type Link interface {
	Write(m *jsonrpc.Message) error
	ReadLine() ([]byte, error)
	Buffered() int
	Cork()
	Uncork() error
	// Done is closed when the link is dead (the process exited, the HTTP session was
	// lost); ExitErr then says why.
	Done() <-chan struct{}
	ExitErr() error
	// Stop ends the link gracefully within about 2×grace.
	Stop(grace time.Duration) error
	// Describe names the peer for logs (a pid, a URL).
	Describe() string
	// SetProtocolVersion tells the link the version negotiated, for transports that
	// carry it in headers.
	SetProtocolVersion(v string)
}

var _ Link = (*Process)(nil)

// Describe implements Link.
func (p *Process) Describe() string { return "pid " + strconv.Itoa(p.Pid()) }

// SetProtocolVersion implements Link; pipes carry no headers.
func (p *Process) SetProtocolVersion(string) {}
