package sdk

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	pb "github.com/mcp-proxy/mcp-proxy/plugins/proto"
)

type testImpl struct {
	Base
	hooks   []Hook
	used    []Hook
	panicky bool
	config  struct {
		N int `json:"n"`
	}
}

func (p *testImpl) Describe() Description {
	return Description{Name: "t", Version: "1", Hooks: p.hooks, Config: []Attribute{{Name: "n", Type: "number"}}}
}

func (p *testImpl) Configure(_ context.Context, _ string, raw json.RawMessage) error {
	if err := Decode(raw, &p.config); err != nil {
		return err
	}
	if p.config.N > 3 {
		return Diagnostics{{Summary: "too big", Attribute: "n"}}
	}
	return nil
}

func (p *testImpl) Hooks() []Hook { return p.used }

func (p *testImpl) Before(_ context.Context, c *Call) (*Verdict, error) {
	if p.panicky {
		panic("boom")
	}
	if c.Principal.Name == "eve" {
		return Deny("not eve"), nil
	}
	return &Verdict{Arguments: json.RawMessage(`{"a":1}`), Notes: map[string]any{"k": 1}}, nil
}

func (p *testImpl) After(_ context.Context, c *Call, o *Outcome) (*Replacement, error) {
	if o.Error != nil {
		return &Replacement{Error: &Error{Code: 1, Message: "x"}}, nil
	}
	return &Replacement{Result: json.RawMessage(`{"content":[]}`)}, nil
}

func (p *testImpl) Catalogue(_ context.Context, items []Item) ([]Change, error) {
	return []Change{{Index: len(items)}}, nil
}

func TestServer(t *testing.T) {
	ctx := context.Background()
	impl := &testImpl{hooks: []Hook{HookBefore, HookAfter}, used: []Hook{HookAfter}}
	s := &server{impl: impl}
	d, err := s.Describe(ctx, &pb.DescribeRequest{})
	if err != nil || d.Name != "t" || len(d.Hooks) != 2 || d.ConfigSchema[0].Type != "number" {
		t.Fatalf("describe: %v %v", d, err)
	}
	if _, err := (&server{impl: &testImpl{hooks: []Hook{"during"}}}).Describe(ctx, nil); err == nil {
		t.Error("an unknown hook was described")
	}
	c, err := s.Configure(ctx, &pb.ConfigureRequest{Config: []byte(`{"n":2}`)})
	if err != nil || len(c.Diagnostics) != 0 || len(c.Hooks) != 1 || c.Hooks[0] != pb.Hook_HOOK_AFTER {
		t.Fatalf("configure: %v %v", c, err)
	}
	c, _ = s.Configure(ctx, &pb.ConfigureRequest{Config: []byte(`{"n":5}`)})
	if len(c.Diagnostics) != 1 || c.Diagnostics[0].Attribute != "n" {
		t.Errorf("diagnostics: %v", c)
	}
	c, _ = s.Configure(ctx, &pb.ConfigureRequest{Config: []byte(`{"m":1}`)})
	if len(c.Diagnostics) != 1 || !strings.Contains(c.Diagnostics[0].Detail, "unknown field") {
		t.Errorf("unknown field: %v", c)
	}
	b, err := s.before(ctx, &pb.BeforeRequest{Call: &pb.Call{Principal: &pb.Principal{Name: "eve"}}})
	if err != nil || b.Action != pb.BeforeResponse_DENY || b.Message != "not eve" {
		t.Errorf("deny: %v %v", b, err)
	}
	b, _ = s.before(ctx, &pb.BeforeRequest{Call: &pb.Call{Kind: pb.Kind_KIND_TOOL}})
	if b.Action != pb.BeforeResponse_REWRITE || string(b.Notes) != `{"k":1}` {
		t.Errorf("rewrite: %v", b)
	}
	a, _ := s.after(ctx, &pb.AfterRequest{Error: &pb.Error{Code: 5}})
	if a.Action != pb.AfterResponse_ERROR {
		t.Errorf("after error: %v", a)
	}
	a, _ = s.after(ctx, &pb.AfterRequest{Result: []byte(`{}`)})
	if a.Action != pb.AfterResponse_REWRITE {
		t.Errorf("after rewrite: %v", a)
	}
	if _, err := s.Catalogue(ctx, &pb.CatalogueRequest{Items: []*pb.Item{{Name: "a"}}}); err == nil {
		t.Error("an out-of-range change was sent")
	}
	impl.panicky = true
	if ans := s.hook(ctx, &pb.HookCall{Id: 7, Hook: &pb.HookCall_Before{Before: &pb.BeforeRequest{}}}); ans.Id != 7 || !strings.Contains(ans.Error, "panicked") {
		t.Errorf("a panicking hook: %v", ans)
	}
	if ans := s.hook(ctx, &pb.HookCall{Id: 8}); !strings.Contains(ans.Error, "unknown hook call") {
		t.Errorf("an empty hook call: %v", ans)
	}
}

func TestDiagnosticsError(t *testing.T) {
	d := Diagnostics{{Summary: "a", Detail: "b"}, {Summary: "c"}}
	if d.Error() != "a: b (and 1 more)" {
		t.Error(d.Error())
	}
}
