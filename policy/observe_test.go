package policy

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcp-proxy/mcp-proxy/router"
)

type decisions []Decided

func (d *decisions) PolicyDecision(e Decided) { *d = append(*d, e) }

// TestObserverSeesDecisions: the rules stage reports every decision with its rule, the
// limits stage its refusals with the limit; neither names the principal.
func TestObserverSeesDecisions(t *testing.T) {
	e, err := NewEngine([]Rule{
		{Name: "no-admin", Deny: true, Tools: []string{"*admin*"}},
		{Name: "fs", Tools: []string{"fs__*"}},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLimiter([]Limit{{Name: "slow-down", Rate: rate.Limit(0.001), Burst: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var seen decisions
	c := &Chain{Rules: e, Limits: l, Observer: &seen}
	h := compose(c, func(_ context.Context, _ *router.Call, reply router.Reply) { reply(json.RawMessage(`{}`), nil) })
	call := func(name string) error {
		req := &router.Request{Method: "tools/call", Principal: alice, Params: json.RawMessage(`{"name":"` + name + `"}`)}
		t := &router.Target{Kind: router.TargetTool, Name: name, Original: name, Upstream: "fs"}
		var got error
		h(context.Background(), &router.Call{Method: req.Method, Params: req.Params, Target: t, Request: req},
			func(_ json.RawMessage, err error) { got = err })
		return got
	}
	if err := call("fs__read"); err != nil {
		t.Fatal(err)
	}
	if err := call("fs__admin_reset"); err == nil {
		t.Fatal("the deny rule let the call through")
	}
	if err := call("fs__read"); err == nil {
		t.Fatal("the rate limit let the call through")
	}
	// Not policed: no decision.
	h(context.Background(), &router.Call{Method: "resources/subscribe", Target: &router.Target{Kind: router.TargetResource, Upstream: "fs"},
		Request: &router.Request{}}, func(json.RawMessage, error) {})
	want := decisions{
		{Stage: StageRules, Method: "tools/call", Upstream: "fs", Rule: "fs", Decision: DecisionAllow},
		{Stage: StageRules, Method: "tools/call", Upstream: "fs", Rule: "no-admin", Decision: DecisionDeny},
		{Stage: StageRules, Method: "tools/call", Upstream: "fs", Rule: "fs", Decision: DecisionAllow},
		{Stage: StageLimits, Method: "tools/call", Upstream: "fs", Rule: "slow-down", Decision: DecisionRateLimited},
	}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("decisions:\n got %+v\nwant %+v", seen, want)
	}
}

// failingStore is a bucket store that cannot be read.
type failingStore struct{}

func (failingStore) Take(context.Context, []Bucket, time.Time) (int, time.Duration, error) {
	return 0, 0, errors.New("store down")
}

// TestObserverSeesStoreFailure: a call refused because the limits could not be checked
// is reported as DecisionError.
func TestObserverSeesStoreFailure(t *testing.T) {
	l, err := NewLimiterWith([]Limit{{Name: "shared", Rate: 10, Burst: 10}}, nil, LimiterOptions{Store: failingStore{}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var seen decisions
	c := &Chain{Limits: l, Observer: &seen}
	h := compose(c, func(_ context.Context, _ *router.Call, reply router.Reply) { reply(json.RawMessage(`{}`), nil) })
	req := &router.Request{Method: "tools/call", Params: json.RawMessage(`{"name":"x"}`)}
	h(context.Background(), &router.Call{Method: req.Method, Params: req.Params, Target: &router.Target{Kind: router.TargetTool, Name: "x", Upstream: "u"}, Request: req},
		func(json.RawMessage, error) {})
	want := decisions{{Stage: StageLimits, Method: "tools/call", Upstream: "u", Rule: "shared", Decision: DecisionError}}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("decisions:\n got %+v\nwant %+v", seen, want)
	}
}
