package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/mcp-proxy/mcp-proxy/plugins/proto"
)

// Handshake is the handshake both sides check before anything else: a plugin built for
// another ProtocolVersion is refused with go-plugin's "incompatible API version" error,
// and a plugin binary started by hand (not by the proxy) says so and exits.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "MCP_PROXY_PLUGIN",
	MagicCookieValue: "b9c4f1f2-6f0e-4d55-9a36-mcp-proxy-plugin",
}

// WindowSize is the gRPC flow-control window of the connection between the proxy and a
// plugin, on both sides. A fixed window turns off gRPC's bandwidth estimation, whose
// pings would cost each hook crossing a write and a read more on each side.
const WindowSize = 4 << 20

// PluginKey names the one plugin type in go-plugin's plugin set.
const PluginKey = "mcp"

// GRPC is the go-plugin plugin type of the interface, for both sides: the plugin serves
// Impl, the proxy dispenses a pb.PluginClient.
type GRPC struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl Plugin // the plugin's side only
}

var _ goplugin.GRPCPlugin = (*GRPC)(nil)

// GRPCServer registers Impl.
func (g *GRPC) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterPluginServer(s, &server{impl: g.Impl})
	return nil
}

// GRPCClient returns the proxy's client of the plugin.
func (g *GRPC) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewPluginClient(c), nil
}

// Serve runs p as a plugin of the proxy until the proxy stops it. It exits the process
// when the proxy goes away, however it went (SIGKILL included).
func Serve(p Plugin) {
	go watchParent(os.Getppid(), time.Second)
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         goplugin.PluginSet{PluginKey: &GRPC{Impl: p}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.InitialWindowSize(WindowSize), grpc.InitialConnWindowSize(WindowSize))...)
		},
		Logger: Logger(),
	})
}

// Logger returns a logger whose lines the proxy puts in its own log at their level,
// with the plugin's name; made before Serve or after it, it writes JSON to the process's
// own stderr. (Serve puts a pipe in place of os.Stderr and os.Stdout, which the proxy
// also reads: lines written there arrive too.) Never write to stdout before Serve:
// go-plugin's handshake is there.
func Logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: processStderr, JSONFormat: true, Level: hclog.Debug})
}

// processStderr is the process's stderr as it was before Serve replaced os.Stderr.
var processStderr = os.Stderr

// watchParent exits when the process that started this one is gone: the proxy also
// asks the kernel to kill its plugins when it dies (PR_SET_PDEATHSIG), and this covers
// what that cannot (another OS, a thread that exited).
func watchParent(ppid int, every time.Duration) {
	if ppid <= 1 {
		return
	}
	for range time.Tick(every) {
		if os.Getppid() != ppid {
			os.Exit(2)
		}
	}
}

// server adapts a Plugin to the gRPC service. A hook that panics fails that call only.
type server struct {
	pb.UnimplementedPluginServer
	impl Plugin
}

func recovered(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("plugin panicked: %v\n%s", r, debug.Stack())
	}
}

func (s *server) Describe(context.Context, *pb.DescribeRequest) (resp *pb.DescribeResponse, err error) {
	defer recovered(&err)
	d := s.impl.Describe()
	resp = &pb.DescribeResponse{Name: d.Name, Version: d.Version}
	if resp.Hooks, err = hookValues(d.Hooks); err != nil {
		return nil, err
	}
	for _, a := range d.Config {
		resp.ConfigSchema = append(resp.ConfigSchema, &pb.Attribute{Name: a.Name, Type: a.Type, Required: a.Required, Description: a.Description})
	}
	return resp, nil
}

func hookValues(hooks []Hook) ([]pb.Hook, error) {
	var out []pb.Hook
	for _, h := range hooks {
		switch h {
		case HookBefore:
			out = append(out, pb.Hook_HOOK_BEFORE)
		case HookAfter:
			out = append(out, pb.Hook_HOOK_AFTER)
		case HookCatalogue:
			out = append(out, pb.Hook_HOOK_CATALOGUE)
		case HookRank:
			out = append(out, pb.Hook_HOOK_RANK)
		default:
			return nil, fmt.Errorf("unknown hook %q", h)
		}
	}
	return out, nil
}

func (s *server) Configure(ctx context.Context, req *pb.ConfigureRequest) (resp *pb.ConfigureResponse, err error) {
	defer recovered(&err)
	resp = &pb.ConfigureResponse{}
	cerr := s.impl.Configure(ctx, req.Instance, req.Config)
	if cerr == nil {
		if hs, ok := s.impl.(HookSelector); ok {
			if resp.Hooks, err = hookValues(hs.Hooks()); err != nil {
				return nil, err
			}
		}
		return resp, nil
	}
	ds, ok := cerr.(Diagnostics)
	if !ok {
		ds = Diagnostics{{Summary: "Invalid plugin configuration", Detail: cerr.Error()}}
	}
	for _, d := range ds {
		resp.Diagnostics = append(resp.Diagnostics, &pb.Diagnostic{Warning: d.Warning, Summary: d.Summary, Detail: d.Detail, Attribute: d.Attribute})
	}
	return resp, nil
}

func callOf(c *pb.Call) *Call {
	if c == nil {
		return &Call{}
	}
	call := &Call{Method: c.Method, Kind: kindName(c.Kind), Upstream: c.Upstream, Name: c.Name, OriginalName: c.OriginalName,
		ClientName: c.ClientName, Arguments: raw(c.Arguments), Meta: raw(c.Meta)}
	if c.Principal != nil {
		call.Principal = Principal{Name: c.Principal.Name, Groups: c.Principal.Groups}
	}
	return call
}

func raw(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return b
}

func kindName(k pb.Kind) string {
	switch k {
	case pb.Kind_KIND_TOOL:
		return "tool"
	case pb.Kind_KIND_PROMPT:
		return "prompt"
	case pb.Kind_KIND_RESOURCE:
		return "resource"
	case pb.Kind_KIND_RESOURCE_TEMPLATE:
		return "resource_template"
	}
	return ""
}

func notes(n map[string]any) ([]byte, error) {
	if len(n) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("encoding the notes: %w", err)
	}
	return b, nil
}

// Hooks serves the hook calls of the stream until the proxy closes it. Each call runs on
// a worker of its own (workers are kept for the stream's life, so a call needs no new
// goroutine or stack), and its answer is sent when it is ready, in any order.
func (s *server) Hooks(stream pb.Plugin_HooksServer) error {
	ctx := stream.Context()
	var sendMu sync.Mutex
	jobs := make(chan *pb.HookCall)
	defer close(jobs)
	idle := make(chan struct{}, 1024) // tokens of idle workers
	worker := func() {
		for req := range jobs {
			ans := s.hook(ctx, req)
			sendMu.Lock()
			_ = stream.Send(ans) // a broken stream ends Recv too, which returns
			sendMu.Unlock()
			select {
			case idle <- struct{}{}:
			default:
			}
		}
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-idle:
		default:
			go worker()
		}
		jobs <- req
	}
}

// hook runs one hook call; its error becomes the answer's error.
func (s *server) hook(ctx context.Context, req *pb.HookCall) (ans *pb.HookAnswer) {
	ans = &pb.HookAnswer{Id: req.Id}
	if req.TimeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	var err error
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("plugin panicked: %v\n%s", r, debug.Stack())
		}
		if err != nil {
			ans = &pb.HookAnswer{Id: req.Id, Error: err.Error()}
		}
	}()
	switch h := req.Hook.(type) {
	case *pb.HookCall_Before:
		var r *pb.BeforeResponse
		r, err = s.before(ctx, h.Before)
		ans.Answer = &pb.HookAnswer_Before{Before: r}
	case *pb.HookCall_After:
		var r *pb.AfterResponse
		r, err = s.after(ctx, h.After)
		ans.Answer = &pb.HookAnswer_After{After: r}
	default:
		err = fmt.Errorf("unknown hook call %T (a newer proxy?)", req.Hook)
	}
	return ans
}

func (s *server) before(ctx context.Context, req *pb.BeforeRequest) (*pb.BeforeResponse, error) {
	v, err := s.impl.Before(ctx, callOf(req.Call))
	if err != nil {
		return nil, err
	}
	resp := &pb.BeforeResponse{}
	if v == nil {
		return resp, nil
	}
	if resp.Notes, err = notes(v.Notes); err != nil {
		return nil, err
	}
	switch {
	case v.Deny != "":
		resp.Action, resp.Message = pb.BeforeResponse_DENY, v.Deny
	case v.Arguments != nil:
		resp.Action, resp.Arguments = pb.BeforeResponse_REWRITE, v.Arguments
	}
	return resp, nil
}

func (s *server) after(ctx context.Context, req *pb.AfterRequest) (*pb.AfterResponse, error) {
	o := &Outcome{Result: raw(req.Result)}
	if req.Error != nil {
		o.Error = &Error{Code: req.Error.Code, Message: req.Error.Message, Data: raw(req.Error.Data)}
	}
	r, err := s.impl.After(ctx, callOf(req.Call), o)
	if err != nil {
		return nil, err
	}
	resp := &pb.AfterResponse{}
	if r == nil {
		return resp, nil
	}
	if resp.Notes, err = notes(r.Notes); err != nil {
		return nil, err
	}
	switch {
	case r.Error != nil:
		resp.Action = pb.AfterResponse_ERROR
		resp.Error = &pb.Error{Code: r.Error.Code, Message: r.Error.Message, Data: r.Error.Data}
	case r.Result != nil:
		resp.Action, resp.Result = pb.AfterResponse_REWRITE, r.Result
	}
	return resp, nil
}

func (s *server) Catalogue(ctx context.Context, req *pb.CatalogueRequest) (resp *pb.CatalogueResponse, err error) {
	defer recovered(&err)
	items := make([]Item, len(req.Items))
	for i, it := range req.Items {
		items[i] = Item{Kind: kindName(it.Kind), Name: it.Name, Upstream: it.Upstream, OriginalName: it.OriginalName, Raw: it.Raw}
	}
	changes, err := s.impl.Catalogue(ctx, items)
	if err != nil {
		return nil, err
	}
	resp = &pb.CatalogueResponse{}
	for _, c := range changes {
		if c.Index < 0 || c.Index >= len(items) {
			return nil, fmt.Errorf("catalogue change for item %d of %d", c.Index, len(items))
		}
		resp.Changes = append(resp.Changes, &pb.Change{Index: uint32(c.Index), Hide: c.Hide, Raw: c.Raw})
	}
	return resp, nil
}

func (s *server) Index(ctx context.Context, req *pb.IndexRequest) (resp *pb.IndexResponse, err error) {
	defer recovered(&err)
	rk, ok := s.impl.(Ranker)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "the plugin is not a ranker")
	}
	docs := make([]Document, len(req.Documents))
	for i, d := range req.Documents {
		docs[i] = Document{Name: d.Name, Namespace: d.Namespace, Title: d.Title, Description: d.Description, InputSchema: raw(d.InputSchema)}
	}
	if err := rk.Index(ctx, req.Index, req.Previous, docs); err != nil {
		return nil, err
	}
	return &pb.IndexResponse{}, nil
}

func (s *server) Rank(ctx context.Context, req *pb.RankRequest) (resp *pb.RankResponse, err error) {
	defer recovered(&err)
	rk, ok := s.impl.(Ranker)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "the plugin is not a ranker")
	}
	hits, err := rk.Rank(ctx, req.Index, req.Query, int(req.Limit))
	if err != nil {
		return nil, err
	}
	resp = &pb.RankResponse{Hits: make([]*pb.Ranked, 0, len(hits))}
	for _, h := range hits {
		resp.Hits = append(resp.Hits, &pb.Ranked{Name: h.Name, Score: h.Score})
	}
	return resp, nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
