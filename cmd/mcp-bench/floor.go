package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/h1"
	"github.com/mcp-proxy/mcp-proxy/internal/h1client"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// The floor forwarder ("mcp-bench floor ..."): the no-logic forwarder a proxy path is
// measured against, built from the proxy's own parts. Its front end is the proxy's HTTP
// server (internal/h1) or a stdin/stdout line stream (jsonrpc's framing); every message
// is decoded once with the proxy's codec (jsonrpc.Decode); the upstream leg is one child
// process's pipes with a pending map (new ids out, the client's id back), or the lean
// HTTP/1.1 client (internal/h1client) with its keep-alive pool. It has no sessions of
// its own, no routing, no policy and no logging: whatever the proxy spends beyond it is
// the proxy's logic.
//
// Over HTTP it passes Mcp-Session-Id and MCP-Protocol-Version through both ways (the
// upstream's session is the client's); towards a child it answers every initialize with
// the child's answer and hands out one constant session id.

const (
	floorSessionID = "floor"
	floorMaxBody   = 4 << 20
)

// floorUpstream is the floor's upstream leg.
type floorUpstream interface {
	// forward sends m (raw is its encoding) and returns the answer's body and content
	// type (nil for a notification); hdr carries the session fields both ways.
	forward(ctx context.Context, m *jsonrpc.Message, raw []byte, hdr *floorHeaders) ([]byte, string, error)
	close() error
}

// floorHeaders are the session fields a request carries and its answer sets.
type floorHeaders struct {
	session, version string // in: the client's; out: the upstream's session, if it set one
}

// runFloor is "mcp-bench floor [-listen ADDR -addr-file FILE] [-upstream-url URL | -- CMD ARGS...]".
func runFloor(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcp-bench floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "serve HTTP (POST /mcp) on this address; empty: stdin/stdout")
	addrFile := fs.String("addr-file", "", "with -listen: write the bound address to this file")
	upURL := fs.String("upstream-url", "", "the upstream's Streamable HTTP URL; empty: the command after the flags, over its pipes")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	var up floorUpstream
	switch {
	case *upURL != "" && fs.NArg() == 0:
		h, err := newFloorHTTPUp(*upURL)
		if err != nil {
			return usageError{fmt.Sprintf("floor: -upstream-url: %v", err)}
		}
		up = h
	case *upURL == "" && fs.NArg() > 0:
		p, err := startFloorPipe(fs.Args(), stderr)
		if err != nil {
			return err
		}
		up = p
	default:
		return usageError{"floor: give either -upstream-url or an upstream command"}
	}
	defer up.close()
	if prefix := os.Getenv(floorProfileEnv); prefix != "" {
		stop, err := startFloorProfile(fmt.Sprintf("%s.%d", prefix, os.Getpid()))
		if err != nil {
			return err
		}
		defer stop()
	}
	if *listen == "" {
		return serveFloorStdio(ctx, up, stdin, stdout)
	}
	return serveFloorHTTP(ctx, up, *listen, *addrFile)
}

// floorProfileEnv names the environment variable that makes every floor forwarder write
// a CPU profile of its run to PREFIX.PID (to compare with the proxy's, which
// MCP_PROXY_CPUPROFILE writes).
const floorProfileEnv = "MCP_BENCH_FLOOR_CPUPROFILE"

func startFloorProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("floor: creating the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("floor: starting the CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// serveFloorHTTP serves POST /mcp with the proxy's HTTP server until ctx ends.
func serveFloorHTTP(ctx context.Context, up floorUpstream, addr, addrFile string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if addrFile != "" {
		if err := os.WriteFile(addrFile, []byte(ln.Addr().String()+"\n"), 0o600); err != nil {
			ln.Close()
			return err
		}
	}
	srv := &h1.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { floorHandle(up, w, r) })}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	case err := <-errc:
		return err
	}
}

func floorHandle(up floorUpstream, w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		return
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, floorMaxBody))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	m, err := jsonrpc.Decode(raw)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	hdr := floorHeaders{session: r.Header.Get("Mcp-Session-Id"), version: r.Header.Get("Mcp-Protocol-Version")}
	answer, ctype, err := up.forward(r.Context(), m, raw, &hdr)
	if hdr.session != "" {
		w.Header()["Mcp-Session-Id"] = []string{hdr.session}
	}
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadGateway)
	case answer == nil:
		w.WriteHeader(http.StatusAccepted)
	default:
		w.Header()["Content-Type"] = []string{ctype}
		w.Write(answer)
	}
}

// serveFloorStdio reads messages from stdin and writes answers to stdout until stdin
// ends. Each request is forwarded on the goroutine that read it, which first hands the
// reading over to a new goroutine (leader/follower, as the proxy's stdio front end does
// for an exchange it runs inline): the request goes upstream at once, without waiting
// for another thread to wake up and take it, and the new reader blocks on stdin only
// once the request waits for its answer. Notifications are forwarded by the reader
// itself, in order (as the proxy posts notifications before the next request).
func serveFloorStdio(ctx context.Context, up floorUpstream, stdin io.Reader, stdout io.Writer) error {
	f := &floorStdio{ctx: ctx, up: up, lr: jsonrpc.NewLineReader(stdin, floorMaxBody), lw: jsonrpc.NewLineWriter(stdout),
		end: make(chan error, 1)}
	f.wg.Add(1)
	go f.read()
	err := <-f.end
	f.wg.Wait()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// floorStdio is the stdio front end of the floor forwarder.
type floorStdio struct {
	ctx context.Context
	up  floorUpstream
	lr  *jsonrpc.LineReader // read by one goroutine at a time: the current reader
	lw  *jsonrpc.LineWriter
	end chan error // the input's end
	wg  sync.WaitGroup

	mu      sync.Mutex // guards session
	session floorHeaders
}

// read is the reader: it reads until a request, hands the reading to a new goroutine
// and forwards the request.
func (f *floorStdio) read() {
	defer f.wg.Done()
	for {
		line, err := f.lr.ReadLine()
		if err != nil {
			f.end <- err
			return
		}
		raw := bytes.Clone(line)
		m, err := jsonrpc.Decode(raw)
		if err != nil {
			continue
		}
		if !m.IsRequest() {
			f.forward(m, raw)
			continue
		}
		f.wg.Add(1)
		go f.read() // the next reader; this goroutine is the request's now
		f.forward(m, raw)
		return
	}
}

func (f *floorStdio) forward(m *jsonrpc.Message, raw []byte) {
	f.mu.Lock()
	hdr := f.session
	f.mu.Unlock()
	answer, _, err := f.up.forward(f.ctx, m, raw, &hdr)
	if hdr.session != "" {
		f.mu.Lock()
		f.session.session = hdr.session
		f.mu.Unlock()
	}
	switch {
	case err != nil && m.IsRequest():
		f.lw.Write(jsonrpc.NewErrorResponse(m.ID, &jsonrpc.Error{Code: -32603, Message: err.Error()}))
	case answer != nil:
		f.lw.WriteRaw(answer)
	}
}

// floorHTTPUp is the HTTP upstream leg: every message one POST on a pooled connection.
// Like the proxy's HTTP link, it writes the request by hand into a reused buffer (a
// prefix made once: request line, Host and the fixed fields) and sends it with the lean
// client's Send, which reads the answer's head without a header map; any URL that
// client does not serve (https) goes through its RoundTrip (and so net/http).
type floorHTTPUp struct {
	tmpl   *http.Request
	tr     *h1client.Transport
	key    string // host:port, for Send
	prefix []byte // nil: RoundTrip
	bufs   sync.Pool
}

func newFloorHTTPUp(url string) (*floorHTTPUp, error) {
	tmpl, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		return nil, err
	}
	u := &floorHTTPUp{tmpl: tmpl, tr: &h1client.Transport{Fallback: http.DefaultTransport}}
	u.bufs.New = func() any { b := make([]byte, 0, 2048); return &b }
	if tmpl.URL.Scheme == "http" {
		p := []byte("POST " + tmpl.URL.RequestURI() + " HTTP/1.1\r\n")
		if p, err = h1client.AppendField(p, "Host", tmpl.URL.Host); err != nil {
			return nil, err
		}
		p = append(p, "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nUser-Agent: Go-http-client/1.1\r\n"...)
		u.key, u.prefix = h1client.HostPort(tmpl.URL.Host), p
	}
	return u, nil
}

var (
	floorJSON   = []string{"application/json"}
	floorAccept = []string{"application/json, text/event-stream"}
)

func (u *floorHTTPUp) forward(ctx context.Context, m *jsonrpc.Message, raw []byte, hdr *floorHeaders) ([]byte, string, error) {
	if u.prefix == nil {
		return u.roundTrip(ctx, m, raw, hdr)
	}
	bp := u.bufs.Get().(*[]byte)
	b := append((*bp)[:0], u.prefix...)
	var err error
	if hdr.session != "" {
		b, err = h1client.AppendField(b, "Mcp-Session-Id", hdr.session)
	}
	if err == nil && hdr.version != "" {
		b, err = h1client.AppendField(b, "Mcp-Protocol-Version", hdr.version)
	}
	if err != nil {
		return nil, "", err
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(raw)), 10)
	b = append(append(b, "\r\n\r\n"...), raw...)
	var abort h1client.Abort
	stop := context.AfterFunc(ctx, abort.Abort)
	defer stop()
	rep, err := u.tr.Send(u.key, http.MethodPost, b, &abort)
	*bp = b[:0]
	u.bufs.Put(bp)
	if err != nil {
		return nil, "", err
	}
	defer rep.Body.Close()
	if sid := rep.Field("Mcp-Session-Id"); len(sid) > 0 && string(sid) != hdr.session {
		hdr.session = string(sid)
	}
	ctype := floorJSON[0]
	if ct := rep.Field("Content-Type"); string(ct) != ctype {
		ctype = string(ct)
	}
	return floorAnswer(rep.StatusCode, rep.ContentLength, rep.Body, ctype)
}

// roundTrip is forward through the lean client's RoundTrip: a template request copied
// (the URL parsed once), the body handed over without a copy.
func (u *floorHTTPUp) roundTrip(ctx context.Context, m *jsonrpc.Message, raw []byte, hdr *floorHeaders) ([]byte, string, error) {
	req := u.tmpl.WithContext(ctx)
	req.Header = make(http.Header, 4)
	req.Body, req.ContentLength = h1client.NewBody(raw), int64(len(raw))
	req.Header["Content-Type"] = floorJSON
	req.Header["Accept"] = floorAccept
	if hdr.session != "" {
		req.Header["Mcp-Session-Id"] = []string{hdr.session}
	}
	if hdr.version != "" {
		req.Header["Mcp-Protocol-Version"] = []string{hdr.version}
	}
	resp, err := u.tr.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if sid := resp.Header["Mcp-Session-Id"]; len(sid) > 0 {
		hdr.session = sid[0]
	}
	ctype := ""
	if ct := resp.Header["Content-Type"]; len(ct) > 0 {
		ctype = ct[0]
	}
	return floorAnswer(resp.StatusCode, resp.ContentLength, resp.Body, ctype)
}

// floorAnswer reads an answer's body (into a buffer of its size when the server gave
// it) and decodes a JSON one once with the codec, as the proxy does.
func floorAnswer(status int, length int64, body io.Reader, ctype string) ([]byte, string, error) {
	var b []byte
	var err error
	if length >= 0 && length <= floorMaxBody {
		b = make([]byte, length)
		_, err = io.ReadFull(body, b)
	} else {
		b, err = io.ReadAll(io.LimitReader(body, floorMaxBody))
	}
	if err != nil {
		return nil, "", err
	}
	if status == http.StatusAccepted || len(b) == 0 {
		return nil, "", nil
	}
	if strings.HasPrefix(ctype, "application/json") {
		if _, err := jsonrpc.Decode(b); err != nil { // the codec reads the answer once, as the proxy's does
			return nil, "", fmt.Errorf("the upstream's answer: %w", err)
		}
	}
	return b, ctype, nil
}

func (u *floorHTTPUp) close() error {
	u.tr.CloseIdleConnections()
	return nil
}

// floorPipe is the child-process leg: one pipe each way, a pending map from the floor's
// ids to the waiting callers.
type floorPipe struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	lw   *jsonrpc.LineWriter
	done chan struct{} // closed when the reader ends

	mu      sync.Mutex // guards next, pending
	next    int64
	pending map[int64]chan []byte
}

func startFloorPipe(argv []string, stderr io.Writer) (*floorPipe, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the upstream: %w", err)
	}
	p := &floorPipe{cmd: cmd, in: in, lw: jsonrpc.NewLineWriter(in), done: make(chan struct{}), pending: map[int64]chan []byte{}}
	go p.read(jsonrpc.NewLineReader(out, floorMaxBody))
	return p, nil
}

// read hands each response to its caller, with the caller's id back in it.
func (p *floorPipe) read(lr *jsonrpc.LineReader) {
	defer close(p.done)
	for {
		line, err := lr.ReadLine()
		if err != nil {
			return
		}
		m, err := jsonrpc.Decode(line)
		if err != nil || m.IsRequest() || m.Method != "" {
			continue // the floor forwards no server-to-client traffic
		}
		id, ok := m.ID.Int64()
		if !ok {
			continue
		}
		p.mu.Lock()
		ch := p.pending[id]
		delete(p.pending, id)
		p.mu.Unlock()
		if ch != nil {
			ch <- bytes.Clone(line)
		}
	}
}

func (p *floorPipe) forward(ctx context.Context, m *jsonrpc.Message, raw []byte, hdr *floorHeaders) ([]byte, string, error) {
	if !m.IsRequest() {
		return nil, "", p.lw.WriteRaw(raw)
	}
	ch := make(chan []byte, 1)
	p.mu.Lock()
	p.next++
	id := p.next
	p.pending[id] = ch
	p.mu.Unlock()
	out := *m
	out.ID = jsonrpc.IntID(id)
	if err := p.lw.Write(&out); err != nil {
		return nil, "", err
	}
	var line []byte
	select {
	case line = <-ch:
	case <-p.done:
		return nil, "", errors.New("the upstream exited")
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
		return nil, "", ctx.Err()
	}
	a, err := jsonrpc.Decode(line)
	if err != nil {
		return nil, "", err
	}
	a.ID = m.ID
	b, err := a.Encode()
	if err != nil {
		return nil, "", err
	}
	if m.Method == "initialize" {
		hdr.session = floorSessionID
	}
	return b, "application/json", nil
}

func (p *floorPipe) close() error {
	p.in.Close()
	t := time.AfterFunc(2*time.Second, func() { p.cmd.Process.Kill() })
	defer t.Stop()
	return p.cmd.Wait()
}
