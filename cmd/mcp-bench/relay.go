package main

import (
	"errors"
	"io"
	"net"
	"sync"
)

// relay is a loopback TCP forwarder in front of an HTTP upstream, so that the chaos mode
// can reset the proxy's connections to it (RST, not an orderly close) while the upstream
// itself lives on. Every connection it accepts is piped to target by two copiers.
type relay struct {
	ln     net.Listener
	target string

	mu    sync.Mutex              // guards conns
	conns map[*relayPair]struct{} // the pairs being piped

	wg sync.WaitGroup // the accept loop and every pair's piping
}

// relayPair is one accepted connection and its dialled twin.
type relayPair struct{ in, out *net.TCPConn }

// startRelay listens on a free loopback port and forwards to target.
func startRelay(target string) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, target: target, conns: map[*relayPair]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// addr is the relay's host:port.
func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // the listener was closed
		}
		r.wg.Add(1)
		go r.pipe(c.(*net.TCPConn))
	}
}

// pipe forwards one connection both ways until both directions have ended.
func (r *relay) pipe(in *net.TCPConn) {
	defer r.wg.Done()
	c, err := net.Dial("tcp", r.target)
	if err != nil {
		_ = in.Close()
		return
	}
	p := &relayPair{in: in, out: c.(*net.TCPConn)}
	r.mu.Lock()
	r.conns[p] = struct{}{}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(p.out, p.in)
		_ = p.out.CloseWrite()
	}()
	_, _ = io.Copy(p.in, p.out)
	_ = p.in.CloseWrite()
	<-done
	r.mu.Lock()
	delete(r.conns, p)
	r.mu.Unlock()
	_ = p.in.Close()
	_ = p.out.Close()
}

// resetAll aborts every connection being piped, both sides, with a TCP RST, and returns
// how many there were.
func (r *relay) resetAll() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.conns {
		for _, c := range []*net.TCPConn{p.in, p.out} {
			_ = c.SetLinger(0) // close sends RST
			_ = c.Close()
		}
	}
	return len(r.conns)
}

// open returns how many connections are being piped: the proxy's sockets to this
// upstream (its pooled idle ones included), to within the closes still in transit.
func (r *relay) open() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}

// Close stops accepting, resets what is open and waits for every copier.
func (r *relay) Close() error {
	err := r.ln.Close()
	r.resetAll()
	r.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
