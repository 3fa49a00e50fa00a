package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	pb "github.com/mcp-proxy/mcp-proxy/plugins/proto"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// fakePlugin is the plugin's side of the gRPC client interface, in process: the stage's
// logic is tested here, the real process and transport by the end-to-end tests.
type fakePlugin struct {
	before    func(*pb.BeforeRequest) (*pb.BeforeResponse, error)
	after     func(*pb.AfterRequest) (*pb.AfterResponse, error)
	catalogue func(*pb.CatalogueRequest) (*pb.CatalogueResponse, error)
	index     func(*pb.IndexRequest) (*pb.IndexResponse, error)
	rank      func(*pb.RankRequest) (*pb.RankResponse, error)
}

func (f *fakePlugin) Describe(context.Context, *pb.DescribeRequest, ...grpc.CallOption) (*pb.DescribeResponse, error) {
	return nil, errors.New("not used")
}

func (f *fakePlugin) Configure(context.Context, *pb.ConfigureRequest, ...grpc.CallOption) (*pb.ConfigureResponse, error) {
	return nil, errors.New("not used")
}

func (f *fakePlugin) Hooks(context.Context, ...grpc.CallOption) (pb.Plugin_HooksClient, error) {
	return nil, errors.New("not used: hook calls go through call")
}

// call is the fake's hookCaller: each hook call answered by the fake's function.
func (f *fakePlugin) call(ctx context.Context, req *pb.HookCall) (*pb.HookAnswer, error) {
	return wait(ctx, func() (*pb.HookAnswer, error) {
		ans := &pb.HookAnswer{Id: req.Id}
		switch h := req.Hook.(type) {
		case *pb.HookCall_Before:
			r, err := f.before(h.Before)
			if err != nil {
				return nil, err
			}
			ans.Answer = &pb.HookAnswer_Before{Before: r}
		case *pb.HookCall_After:
			r, err := f.after(h.After)
			if err != nil {
				return nil, err
			}
			ans.Answer = &pb.HookAnswer_After{After: r}
		}
		return ans, nil
	})
}

func (f *fakePlugin) close() {}

func (f *fakePlugin) Catalogue(ctx context.Context, r *pb.CatalogueRequest, _ ...grpc.CallOption) (*pb.CatalogueResponse, error) {
	return wait(ctx, func() (*pb.CatalogueResponse, error) { return f.catalogue(r) })
}

func (f *fakePlugin) Index(ctx context.Context, r *pb.IndexRequest, _ ...grpc.CallOption) (*pb.IndexResponse, error) {
	return wait(ctx, func() (*pb.IndexResponse, error) { return f.index(r) })
}

func (f *fakePlugin) Rank(ctx context.Context, r *pb.RankRequest, _ ...grpc.CallOption) (*pb.RankResponse, error) {
	return wait(ctx, func() (*pb.RankResponse, error) { return f.rank(r) })
}

// wait runs f but gives up, as gRPC does, when ctx ends first.
func wait[R any](ctx context.Context, f func() (R, error)) (R, error) {
	type out struct {
		r   R
		err error
	}
	ch := make(chan out, 1)
	go func() { r, err := f(); ch <- out{r, err} }()
	select {
	case o := <-ch:
		return o.r, o.err
	case <-ctx.Done():
		var zero R
		return zero, status.Error(codes.DeadlineExceeded, "deadline")
	}
}

func testInstance(t testing.TB, spec Spec, hs hooks, f *fakePlugin) *instance {
	t.Helper()
	if spec.Name == "" {
		spec.Name = "p"
	}
	in, err := newInstance(spec, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	in.hooks = hs
	if f != nil {
		in.conn.Store(&live{rpc: f, hooks: f})
	}
	return in
}

func toolCall(name, params string, p *principal.Principal) *router.Call {
	return &router.Call{Method: mcp.MethodToolsCall, Params: json.RawMessage(params),
		Target:  &router.Target{Kind: router.TargetTool, Name: name, Original: strings.TrimPrefix(name, "gh__"), Upstream: "gh"},
		Request: &router.Request{Method: mcp.MethodToolsCall, Principal: p}}
}

// run sends call through the stage to an upstream that answers with res (or upErr), and
// returns the one reply.
func run(t *testing.T, in *instance, call *router.Call, res string, upErr error) (json.RawMessage, error, *router.Call) {
	t.Helper()
	var got *router.Call
	next := func(_ context.Context, c *router.Call, reply router.Reply) {
		got = c
		if upErr != nil {
			reply(nil, upErr)
			return
		}
		reply(json.RawMessage(res), nil)
	}
	type answer struct {
		res json.RawMessage
		err error
	}
	ch := make(chan answer, 2)
	in.stage(next)(context.Background(), call, func(r json.RawMessage, err error) { ch <- answer{r, err} })
	select {
	case a := <-ch:
		select {
		case <-ch:
			t.Fatal("answered twice")
		case <-time.After(20 * time.Millisecond):
		}
		return a.res, a.err, got
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
	return nil, nil, nil
}

func code(err error) int64 {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Code
	}
	return 0
}

func TestStage(t *testing.T) {
	const result = `{"content":[{"type":"text","text":"hi"}],"structuredContent":{"a":1},"isError":false,"task":"kept"}`
	alice := &principal.Principal{Name: "alice", Groups: []string{"dev"}}
	cases := []struct {
		name    string
		spec    Spec
		before  func(*pb.BeforeRequest) (*pb.BeforeResponse, error)
		after   func(*pb.AfterRequest) (*pb.AfterResponse, error)
		upErr   error
		code    int64
		result  string // substring of the result
		args    string // what went upstream
		noCross bool
	}{
		{name: "allow", before: func(r *pb.BeforeRequest) (*pb.BeforeResponse, error) {
			if r.Call.Principal.Name != "alice" || r.Call.OriginalName != "issue" || string(r.Call.Arguments) != `{"q":1}` || string(r.Call.Meta) != `{"k":"v"}` {
				return nil, errors.New("wrong call: " + r.Call.String())
			}
			return &pb.BeforeResponse{}, nil
		}, result: `"text":"hi"`, args: `{"q":1}`},
		{name: "deny", before: func(*pb.BeforeRequest) (*pb.BeforeResponse, error) {
			return &pb.BeforeResponse{Action: pb.BeforeResponse_DENY, Message: "no"}, nil
		}, code: mcp.CodePluginDenied},
		{name: "deny without message", before: func(*pb.BeforeRequest) (*pb.BeforeResponse, error) {
			return &pb.BeforeResponse{Action: pb.BeforeResponse_DENY}, nil
		}, code: mcp.CodePluginFailed},
		{name: "rewrite", before: func(*pb.BeforeRequest) (*pb.BeforeResponse, error) {
			return &pb.BeforeResponse{Action: pb.BeforeResponse_REWRITE, Arguments: []byte(`{"q":2}`)}, nil
		}, args: `{"q":2}`, result: "hi"},
		{name: "rewrite duplicate members", before: func(*pb.BeforeRequest) (*pb.BeforeResponse, error) {
			return &pb.BeforeResponse{Action: pb.BeforeResponse_REWRITE, Arguments: []byte(`{"q":2,"q":3}`)}, nil
		}, code: mcp.CodePluginFailed},
		{name: "error fails open", spec: Spec{FailOpen: true}, before: func(*pb.BeforeRequest) (*pb.BeforeResponse, error) {
			return nil, errors.New("boom")
		}, args: `{"q":1}`, result: "hi"},
		{name: "timeout fails closed", spec: Spec{Timeout: 20 * time.Millisecond}, before: func(*pb.BeforeRequest) (*pb.BeforeResponse, error) {
			time.Sleep(time.Second)
			return &pb.BeforeResponse{}, nil
		}, code: mcp.CodePluginFailed},
		{name: "after rewrites content only", after: func(r *pb.AfterRequest) (*pb.AfterResponse, error) {
			return &pb.AfterResponse{Action: pb.AfterResponse_REWRITE, Result: []byte(`{"content":[{"type":"text","text":"masked"}],"task":"forged"}`)}, nil
		}, result: `"task":"kept"`},
		{name: "after error", after: func(r *pb.AfterRequest) (*pb.AfterResponse, error) {
			return &pb.AfterResponse{Action: pb.AfterResponse_ERROR, Error: &pb.Error{Code: -31000, Message: "hidden"}}, nil
		}, code: mcp.CodePluginDenied},
		{name: "after sees upstream error", upErr: &jsonrpc.Error{Code: -32000, Message: "up"}, after: func(r *pb.AfterRequest) (*pb.AfterResponse, error) {
			if r.Error == nil || r.Error.Code != -32000 {
				return nil, errors.New("no error")
			}
			return &pb.AfterResponse{}, nil
		}, code: -32000},
		{name: "after non-object fails closed", after: func(r *pb.AfterRequest) (*pb.AfterResponse, error) {
			return &pb.AfterResponse{Action: pb.AfterResponse_REWRITE, Result: []byte(`[]`)}, nil
		}, code: mcp.CodePluginFailed},
		{name: "not selected: no crossing", spec: Spec{Match: policy.Match{Tools: []string{"other__*"}}}, noCross: true, result: "hi", args: `{"q":1}`},
		{name: "not selected principal", spec: Spec{Match: policy.Match{Principals: []string{"bob"}}}, noCross: true, result: "hi", args: `{"q":1}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakePlugin{before: c.before, after: c.after}
			var hs hooks
			if c.before != nil {
				hs |= hookBefore
			}
			if c.after != nil {
				hs |= hookAfter
			}
			if c.noCross {
				hs = hookBefore | hookAfter
				f.before = func(*pb.BeforeRequest) (*pb.BeforeResponse, error) {
					t.Error("crossed")
					return &pb.BeforeResponse{}, nil
				}
				f.after = func(*pb.AfterRequest) (*pb.AfterResponse, error) { t.Error("crossed"); return &pb.AfterResponse{}, nil }
			}
			in := testInstance(t, c.spec, hs, f)
			res, err, got := run(t, in, toolCall("gh__issue", `{"name":"issue","arguments":{"q":1},"_meta":{"k":"v"}}`, alice), result, c.upErr)
			if c.code != 0 {
				if code(err) != c.code {
					t.Fatalf("got %s %v, want code %d", res, err, c.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if !strings.Contains(string(res), c.result) {
				t.Errorf("result %s lacks %s", res, c.result)
			}
			if c.args != "" && got != nil && !strings.Contains(string(got.Params), `"arguments":`+c.args) {
				t.Errorf("upstream got %s, want arguments %s", got.Params, c.args)
			}
		})
	}
}

// TestHungPluginIsKicked: consecutive timeouts mark the plugin hung for its supervisor.
func TestHungPluginIsKicked(t *testing.T) {
	f := &fakePlugin{before: func(*pb.BeforeRequest) (*pb.BeforeResponse, error) { time.Sleep(time.Second); return nil, nil }}
	in := testInstance(t, Spec{Timeout: 10 * time.Millisecond}, hookBefore, f)
	for i := 0; i < hungAfter; i++ {
		if _, err, _ := run(t, in, toolCall("gh__x", `{"name":"x"}`, nil), `{}`, nil); code(err) != mcp.CodePluginFailed {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if in.timeouts.Load() < hungAfter {
		t.Errorf("timeouts = %d", in.timeouts.Load())
	}
	select {
	case <-in.kick:
	default:
		t.Error("the supervisor was not woken")
	}
}

func TestDownPlugin(t *testing.T) {
	in := testInstance(t, Spec{}, hookBefore, nil)
	if _, err, _ := run(t, in, toolCall("gh__x", `{"name":"x"}`, nil), `{}`, nil); code(err) != mcp.CodePluginFailed {
		t.Fatalf("got %v", err)
	}
	in = testInstance(t, Spec{FailOpen: true}, hookBefore, nil)
	if res, err, _ := run(t, in, toolCall("gh__x", `{"name":"x"}`, nil), `{"ok":1}`, nil); err != nil || string(res) != `{"ok":1}` {
		t.Fatalf("got %s %v", res, err)
	}
}

func TestPresenter(t *testing.T) {
	items := []router.Listed{
		{Kind: router.TargetTool, Name: "gh__a", Upstream: "gh", Raw: json.RawMessage(`{"name":"gh__a"}`)},
		{Kind: router.TargetTool, Name: "gh__b", Upstream: "gh", Raw: json.RawMessage(`{"name":"gh__b"}`)},
		{Kind: router.TargetTool, Name: "fs__c", Upstream: "fs", Raw: json.RawMessage(`{"name":"fs__c"}`)},
		{Kind: router.TargetResource, Template: true, Name: "file:///{p}", Upstream: "fs", Raw: json.RawMessage(`{"uriTemplate":"file:///{p}"}`)},
	}
	var seen int
	f := &fakePlugin{catalogue: func(r *pb.CatalogueRequest) (*pb.CatalogueResponse, error) {
		seen = len(r.Items)
		return &pb.CatalogueResponse{Changes: []*pb.Change{{Index: 0, Hide: true}, {Index: 1, Raw: []byte(`{"name":"gh__b","description":"d"}`)}}}, nil
	}}
	in := testInstance(t, Spec{Match: policy.Match{Upstreams: []string{"gh"}}}, hookCatalogue, f)
	(&presenter{plugins: []*instance{in}}).Present(items)
	if seen != 2 || !items[0].Hide || !strings.Contains(string(items[1].Raw), `"d"`) || items[2].Hide {
		t.Errorf("seen %d, items %+v", seen, items)
	}
	// A failing closed plugin hides what it selects; open leaves it.
	bad := &fakePlugin{catalogue: func(*pb.CatalogueRequest) (*pb.CatalogueResponse, error) { return nil, errors.New("down") }}
	for _, open := range []bool{false, true} {
		its := []router.Listed{{Kind: router.TargetTool, Name: "gh__a", Upstream: "gh", Raw: json.RawMessage(`{"name":"gh__a"}`)}}
		in := testInstance(t, Spec{FailOpen: open}, hookCatalogue, bad)
		(&presenter{plugins: []*instance{in}}).Present(its)
		if its[0].Hide == open {
			t.Errorf("open=%v: hidden=%v", open, its[0].Hide)
		}
	}
	// An index out of range is the plugin's failure.
	oob := &fakePlugin{catalogue: func(*pb.CatalogueRequest) (*pb.CatalogueResponse, error) {
		return &pb.CatalogueResponse{Changes: []*pb.Change{{Index: 9, Hide: true}}}, nil
	}}
	its := []router.Listed{{Kind: router.TargetTool, Name: "gh__a", Upstream: "gh", Raw: json.RawMessage(`{"name":"gh__a"}`)}}
	(&presenter{plugins: []*instance{testInstance(t, Spec{}, hookCatalogue, oob)}}).Present(its)
	if !its[0].Hide {
		t.Error("an out-of-range change must count as a failure (closed: hidden)")
	}
}

func TestSchema(t *testing.T) {
	for _, bad := range [][]*pb.Attribute{
		{{Name: "1x"}},
		{{Name: "a"}, {Name: "a"}},
		{{Name: "a", Type: "list(strin"}},
		{{Name: "a", Type: "nosuchtype"}},
	} {
		if _, err := compileSchema(bad); err == nil {
			t.Errorf("schema %v accepted", bad)
		}
	}
	s, err := compileSchema([]*pb.Attribute{{Name: "patterns", Type: "list(string)", Required: true}, {Name: "n", Type: "number"}, {Name: "any"}})
	if err != nil {
		t.Fatal(err)
	}
	js, _, diags := s.decode(nil, nil)
	if !diags.HasErrors() || js != nil {
		t.Errorf("a missing required attribute: %s %v", js, diags)
	}
}

func TestHCLogger(t *testing.T) {
	var buf strings.Builder
	root := newHCLogger(zerolog.New(&buf).Level(zerolog.DebugLevel), "/opt/bin/prog")
	l := root.Named("plugin").With("k", "v")
	l.Info("hello", "n", 1, "err", errors.New("x"))
	l.Trace("dropped")
	if s := buf.String(); !strings.Contains(s, `"level":"info"`) || !strings.Contains(s, `"source":"plugin"`) || !strings.Contains(s, `"k":"v"`) || !strings.Contains(s, `"n":1`) || strings.Contains(s, "dropped") {
		t.Errorf("log: %s", s)
	}
	if !l.IsDebug() || l.IsTrace() {
		t.Error("levels")
	}
	// The logger go-plugin parses the plugin's stderr with (named after the program) is
	// off: those lines arrive through pluginLines.
	buf.Reset()
	quiet := root.Named("prog")
	quiet.Error("parsed elsewhere")
	if quiet.GetLevel() != hclog.Off || buf.Len() != 0 {
		t.Errorf("the stderr logger logs: %q", buf.String())
	}
}

func TestPluginLines(t *testing.T) {
	cases := []struct{ line, level, msg, field string }{
		{`{"@level":"info","@message":"hclog json","@timestamp":"2026-01-01T00:00:00Z","k":"v","@module":"m"}`, "info", "hclog json", `"k":"v"`},
		{`{"time":"x","level":"WARN","msg":"slog json","n":2}`, "warn", "slog json", `"n":2`},
		{`{"level":"error","message":"zerolog","plugin":"spoof"}`, "error", "zerolog", `"plugin_plugin":"spoof"`},
		{`{"just":"json"}`, "info", `{"just":"json"}`, ""},
		{`2026-12-04T17:38:02.501Z [WARN]  mine: hclog text`, "warn", "mine: hclog text", ""},
		{`time=2026-12-04T17:38:02Z level=ERROR msg="slog text" k=v`, "error", "slog text", `"k":"v"`},
		{`level=debug msg=logfmt`, "debug", "logfmt", ""},
		{`2026/12/04 17:38:02 standard log`, "info", "2026/12/04 17:38:02 standard log", ""},
		{`[DEBUG] prefixed`, "debug", "prefixed", ""},
		{`ERROR: shouted`, "error", "shouted", ""},
		{`plain line`, "info", "plain line", ""},
		{`x=1 and not logfmt`, "info", "x=1 and not logfmt", ""},
	}
	for _, c := range cases {
		var buf strings.Builder
		w := newPluginLines(zerolog.New(&buf).Level(zerolog.TraceLevel).With().Str("plugin", "p").Logger())
		half := len(c.line) / 2
		w.Write([]byte(c.line[:half])) // a line may come in pieces
		w.Write([]byte(c.line[half:] + "\n"))
		var rec map[string]any
		if err := json.Unmarshal([]byte(buf.String()), &rec); err != nil {
			t.Errorf("%s: %q: %v", c.line, buf.String(), err)
			continue
		}
		if rec["level"] != c.level || rec["message"] != c.msg || rec["plugin"] != "p" || !strings.Contains(buf.String(), c.field) {
			t.Errorf("%s: logged %s; want level %s, message %q, %s", c.line, buf.String(), c.level, c.msg, c.field)
		}
	}
	var buf strings.Builder
	w := newPluginLines(zerolog.New(&buf))
	w.Write([]byte("panic: boom\n\ngoroutine 1 [running]:\nmain.main()\n"))
	if n := strings.Count(buf.String(), `"level":"error"`); n != 3 {
		t.Errorf("a panic: %d lines at error, want 3:\n%s", n, buf.String())
	}
}
