package upstream

import (
	"context"
	"testing"
)

type countingHook struct{ started, ended int }

func (h *countingHook) InlineStarted() { h.started++ }
func (h *countingHook) InlineEnded()   { h.ended++ }

// TestInlineClaimedOnce: a marked context allows one inline exchange, found through
// contexts derived from it, with its hook; an unmarked one allows none; an
// InlineContext marks as AllowInline does, and Init makes it fresh; InitExchange's mark
// is not claimed by a child's read, only by an exchange.
func TestInlineClaimedOnce(t *testing.T) {
	type key struct{}
	h := &countingHook{}
	ctx, cancel := context.WithCancel(context.WithValue(AllowInline(context.Background(), h), key{}, "v"))
	defer cancel()
	if hook, ok := claimInline(ctx, false); !ok || hook != h {
		t.Fatalf("first claim: %v %v", hook, ok)
	}
	if _, ok := claimInline(ctx, false); ok {
		t.Error("a second claim under the same context")
	}
	if ctx.Value(key{}) != "v" {
		t.Error("the marked context hides the values of its parent")
	}
	if _, ok := claimInline(context.Background(), false); ok {
		t.Error("an unmarked context allows an inline exchange")
	}
	var ic InlineContext
	for range 2 {
		c := ic.Init(context.Background(), nil)
		if hook, ok := claimInline(c, true); !ok || hook != nil {
			t.Errorf("InlineContext: %v %v", hook, ok)
		}
		if _, ok := claimInline(c, true); ok {
			t.Error("InlineContext claimed twice")
		}
		c = ic.InitExchange(context.Background(), nil)
		if _, ok := claimInline(c, true); ok {
			t.Error("InitExchange's mark claimed by a child's read")
		}
		if _, ok := claimInline(c, false); !ok {
			t.Error("InitExchange's mark not claimed by an exchange")
		}
	}
}
