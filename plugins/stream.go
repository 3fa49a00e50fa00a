package plugins

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/mcp-proxy/mcp-proxy/plugins/proto"
)

// live is a running plugin: its client for the unary calls and what carries its request
// hook calls.
type live struct {
	rpc   pb.PluginClient
	hooks hookCaller
}

// hookCaller carries hook calls to a plugin and their answers back.
type hookCaller interface {
	// call sends one hook call and waits for its answer, until ctx ends (the call's
	// timeout, or its client went away) or the plugin goes away. Errors carry gRPC
	// codes, as a unary call's would: DeadlineExceeded, Canceled, Unavailable.
	call(ctx context.Context, req *pb.HookCall) (*pb.HookAnswer, error)
	close()
}

func (l *live) call(ctx context.Context, req *pb.HookCall) (*pb.HookAnswer, error) {
	return l.hooks.call(ctx, req)
}

func (l *live) close() { l.hooks.close() }

// hookStream is the Hooks stream: every hook call of a plugin, multiplexed by id.
type hookStream struct {
	stream pb.Plugin_HooksClient
	cancel context.CancelFunc // ends the stream

	sendMu sync.Mutex // serialises Send on the stream

	mu      sync.Mutex // guards next, pending and err
	next    uint64
	pending map[uint64]chan *pb.HookAnswer
	err     error         // why the stream ended; set once
	dead    chan struct{} // closed when the stream ended
}

// openHooks opens the Hooks stream of a plugin and starts reading it.
func openHooks(rpc pb.PluginClient) (*live, error) {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := rpc.Hooks(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	l := &hookStream{stream: stream, cancel: cancel, pending: map[uint64]chan *pb.HookAnswer{}, dead: make(chan struct{})}
	go l.read()
	return &live{rpc: rpc, hooks: l}, nil
}

// read delivers answers to their callers until the stream ends, then fails every call
// still waiting.
func (l *hookStream) read() {
	for {
		ans, err := l.stream.Recv()
		if err != nil {
			l.mu.Lock()
			l.err = status.Error(codes.Unavailable, "the plugin's hook stream ended: "+err.Error())
			l.pending = nil
			l.mu.Unlock()
			close(l.dead)
			return
		}
		l.mu.Lock()
		ch := l.pending[ans.Id]
		delete(l.pending, ans.Id)
		l.mu.Unlock()
		if ch != nil {
			ch <- ans // buffered: never blocks
		}
		// An answer nobody waits for came after its call gave up: dropped.
	}
}

func (l *hookStream) call(ctx context.Context, req *pb.HookCall) (*pb.HookAnswer, error) {
	ch := make(chan *pb.HookAnswer, 1)
	l.mu.Lock()
	if l.pending == nil {
		err := l.err
		l.mu.Unlock()
		return nil, err
	}
	l.next++
	req.Id = l.next
	l.pending[req.Id] = ch
	l.mu.Unlock()
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMs = max(1, time.Until(dl).Milliseconds())
	}
	l.sendMu.Lock()
	err := l.stream.Send(req)
	l.sendMu.Unlock()
	if err != nil {
		l.forget(req.Id)
		return nil, status.Error(codes.Unavailable, "sending to the plugin: "+err.Error())
	}
	select {
	case ans := <-ch:
		if ans.Error != "" {
			return nil, errors.New(ans.Error)
		}
		return ans, nil
	case <-ctx.Done():
		l.forget(req.Id)
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-l.dead:
		return nil, l.err
	}
}

func (l *hookStream) forget(id uint64) {
	l.mu.Lock()
	if l.pending != nil {
		delete(l.pending, id)
	}
	l.mu.Unlock()
}

// close ends the stream (the process is stopped separately).
func (l *hookStream) close() {
	if l.cancel != nil {
		l.cancel()
	}
}
