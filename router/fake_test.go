package router

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// fakeUpstream is an in-memory upstream for unit tests and benchmarks: it serves a fixed
// catalogue and answers every call by encoding the request (as the real upstream writes
// it) and decoding a canned response line (as the real upstream reads it).
type fakeUpstream struct {
	name string
	cat  *upstream.Catalogue
	info upstream.Info

	mu    sync.Mutex
	calls []*upstream.Request
	buf   []byte
	resp  []byte // a response line with id 1
}

func newFake(name string, tools ...string) *fakeUpstream {
	f := &fakeUpstream{name: name, cat: &upstream.Catalogue{},
		resp: []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok from ` + name + `"}]}}`)}
	for _, t := range tools {
		f.cat.Tools = append(f.cat.Tools, json.RawMessage(`{"name":`+string(jsonrpc.AppendString(nil, t))+`,"description":"d","inputSchema":{"type":"object"}}`))
	}
	return f
}

var _ Upstream = (*fakeUpstream)(nil)

func (f *fakeUpstream) Name() string                                       { return f.name }
func (f *fakeUpstream) Start(context.Context)                              {}
func (f *fakeUpstream) WaitFirstAttempt(context.Context) error             { return nil }
func (f *fakeUpstream) Close() error                                       { return nil }
func (f *fakeUpstream) State() (upstream.State, error)                     { return upstream.StateReady, nil }
func (f *fakeUpstream) Info() upstream.Info                                { return f.info }
func (f *fakeUpstream) Catalogue() *upstream.Catalogue                     { return f.cat }
func (f *fakeUpstream) Notify(method string, params json.RawMessage) error { return nil }

func (f *fakeUpstream) Call(ctx context.Context, req *upstream.Request) (*jsonrpc.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls[:0], req)
	var err error
	f.buf, err = (&jsonrpc.Message{ID: jsonrpc.IntID(1), Method: req.Method, Params: req.Params}).Append(f.buf[:0])
	if err != nil {
		return nil, err
	}
	return jsonrpc.Decode(f.resp)
}

func (f *fakeUpstream) Send(ctx context.Context, req *upstream.Request, done func(*jsonrpc.Message, error)) {
	done(f.Call(ctx, req))
}

func (f *fakeUpstream) Cork() func() { return func() {} }

func (f *fakeUpstream) SetClientCapabilities(json.RawMessage) {}
func (f *fakeUpstream) SetPreferLegacy(bool)                  {}

func (f *fakeUpstream) ListAll(context.Context, string, string) ([]json.RawMessage, error) {
	return nil, nil
}

func (f *fakeUpstream) lastCall() *upstream.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return nil
	}
	return f.calls[len(f.calls)-1]
}
