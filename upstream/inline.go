package upstream

import (
	"context"
	"sync/atomic"
)

// inlineCtx marks a context under which the first request sent to an upstream may run
// its whole exchange on the sending goroutine (see AllowInline). It is one allocation:
// the mark and the claim together.
type inlineCtx struct {
	context.Context
	hook         InlineHook
	exchangeOnly bool // only an exchange over HTTP may claim it, not a child's read (InitExchange)
	claimed      atomic.Bool
}

// InlineHook is told when the inline exchange that a context from AllowInline allows
// starts and when it ends, both on the goroutine that runs it (for what that goroutine
// would otherwise do meanwhile: the HTTP front end keeps its answer alive).
type InlineHook interface {
	InlineStarted()
	InlineEnded()
}

type inlineKey struct{}

// Value implements context.Context.
func (c *inlineCtx) Value(key any) any {
	if key == (inlineKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// AllowInline returns ctx marked so that the first request sent under it (or under a
// context derived from it) to an upstream whose link exchanges each request on its own
// (Streamable HTTP) runs that exchange on the sending goroutine: Send returns once the
// answer is in and done has run, instead of starting a goroutine for the exchange and
// returning at once. It saves a goroutine and a hand-off per call, for a caller that
// waits for the answer anyway and has nothing else to do meanwhile (the HTTP front end's
// handler of one request). Later requests under ctx are sent as usual: one that fans out
// must not be serialised. hook (nil: none) is told when the exchange starts and ends.
func AllowInline(ctx context.Context, hook InlineHook) context.Context {
	return &inlineCtx{Context: ctx, hook: hook}
}

// InlineContext is what AllowInline returns, held in the caller's own state: Init
// returns ctx marked as AllowInline would, without an allocation of its own. It must not
// be copied or reused while a context it returned is in use.
type InlineContext struct {
	c inlineCtx
}

// Init returns ctx marked as AllowInline(ctx, hook) would.
func (ic *InlineContext) Init(ctx context.Context, hook InlineHook) context.Context {
	ic.c.Context, ic.c.hook, ic.c.exchangeOnly = ctx, hook, false
	ic.c.claimed.Store(false)
	return &ic.c
}

// InitExchange is Init for a caller that is worth running inline only a request's
// exchange over HTTP: a request to a child process is not claimed (its answer is read
// by the connection's reader goroutine, as without the mark), since the caller would
// have to hand its own work to another goroutine first (the stdio front end's reading)
// and would then save nothing.
func (ic *InlineContext) InitExchange(ctx context.Context, hook InlineHook) context.Context {
	ctx = ic.Init(ctx, hook)
	ic.c.exchangeOnly = true
	return ctx
}

// claimInline reports whether ctx allows an inline exchange (read: the read of a
// child's answer, see lead.go) that nothing claimed yet, and claims it; hook is the
// context's (possibly nil).
func claimInline(ctx context.Context, read bool) (hook InlineHook, ok bool) {
	c, _ := ctx.Value(inlineKey{}).(*inlineCtx)
	if c == nil || read && c.exchangeOnly || !c.claimed.CompareAndSwap(false, true) {
		return nil, false
	}
	return c.hook, true
}
